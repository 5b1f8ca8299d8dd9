#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "cache_test_util.hpp"
#include "ktune/cache/store.hpp"

using namespace ktune::cache;
using namespace ktune::cache::test;

namespace {

OpenOptions read_only() {
  OpenOptions o;
  o.read_only = true;
  return o;
}

void tamper_blob(const std::string& path, const BinaryRecord& r, size_t byte) {
  std::vector<uint8_t> bad = r.blob;
  bad[byte] ^= 0x01;
  raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + r.digest + "'", &bad);
}

}  // namespace

TEST_CASE("a byte flipped in a stored blob is reported damaged, never a hit", "[cache][maintenance]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  auto db = CacheDb::open(path, {});
  BinaryRecord good = sample_record(1), victim = sample_record(2);
  db->put_binary(good);
  db->put_binary(victim);
  CHECK(db->verify().empty());

  tamper_blob(path, victim, 500);
  BinaryLookup l = db->get_binary(victim.digest);
  CHECK(l.status == LookupStatus::damaged);
  CHECK(l.record.blob.empty());
  CHECK(l.record.name == victim.name);
  CHECK_THAT(l.detail, Catch::Contains("sha256"));
  CHECK(db->get_binary(good.digest).status == LookupStatus::hit);

  auto issues = db->verify();
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].digest == victim.digest);
  CHECK(issues[0].name == victim.name);
  CHECK_THAT(issues[0].problem, Catch::Contains("sha256"));

  // A truncated blob is caught by the size column.
  std::vector<uint8_t> shorter(victim.blob.begin(), victim.blob.end() - 1);
  raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + victim.digest + "'", &shorter);
  CHECK_THAT(db->get_binary(victim.digest).detail, Catch::Contains("bytes"));

  // Putting the entry again repairs it.
  CHECK(db->put_binary(victim));
  CHECK(db->get_binary(victim.digest).status == LookupStatus::hit);
  CHECK(db->verify().empty());
}

TEST_CASE("a byte flipped in the file itself is reported damaged", "[cache][maintenance]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  BinaryRecord r = sample_record(7);
  r.blob = pattern_blob(20000, 4242);  // spans several pages, found below by its contents
  {
    auto db = CacheDb::open(path, {});
    db->put_binary(r);
    db->put_binary(sample_record(8));
  }  // last connection closed: WAL checkpointed into the main file
  auto bytes = read_bytes(path);
  auto at = std::search(bytes.begin(), bytes.end(), r.blob.begin() + 100, r.blob.begin() + 164,
                        [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; });
  REQUIRE(at != bytes.end());
  *(at + 10) = static_cast<char>(*(at + 10) ^ 0x80);
  write_bytes(path, bytes);

  for (OpenOptions o : {OpenOptions{}, read_only()}) {
    auto db = CacheDb::open(path, o);
    BinaryLookup l = db->get_binary(r.digest);
    CHECK(l.status == LookupStatus::damaged);
    CHECK(l.record.blob.empty());
    CHECK(db->get_binary(sample_record(8).digest).status == LookupStatus::hit);
    auto issues = db->verify();
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].digest == r.digest);
  }
}

TEST_CASE("prune by compiler version, ktune version and damage", "[cache][maintenance]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  auto db = CacheDb::open(path, {});
  db->put_binary(sample_record(1, "13.0.88"));
  db->put_binary(sample_record(2, "13.0.88"));
  db->put_binary(sample_record(3, "12.8.1"));
  db->put_binary(sample_record(4, "12.8.1"));
  BinaryRecord damaged = sample_record(5, "13.0.88");
  db->put_binary(damaged);
  tamper_blob(path, damaged, 3);

  CacheDb::PruneCriteria keep_family_only;
  keep_family_only.keep_compiler_version = "13.0.88";
  keep_family_only.family = "xqa_decode";  // odd indices: 1, 3, 5
  keep_family_only.remove_damaged = false;
  CHECK(db->prune(keep_family_only) == 1);  // #3
  CHECK(db->counts().binaries == 4);

  CacheDb::PruneCriteria keep_new;
  keep_new.keep_compiler_version = "13.0.88";
  CHECK(db->prune(keep_new) == 2);  // #4 (old compiler) and #5 (damaged)
  auto left = db->list_binaries();
  REQUIRE(left.size() == 2);
  for (const auto& b : left) CHECK(b.compiler_version == "13.0.88");
  CHECK(db->verify().empty());

  TuningRecord old_tuning = sample_tuning(1);
  old_tuning.ktune_version = "0.0.9";
  db->put_tuning(old_tuning);
  db->put_tuning(sample_tuning(2));
  CacheDb::PruneCriteria keep_ktune;
  keep_ktune.keep_ktune_version = "0.1.0";
  CHECK(db->prune(keep_ktune) == 1);
  CHECK(db->list_tuning().size() == 1);
  CHECK(db->prune(keep_new) == 0);
}

TEST_CASE("export makes a compact read-only copy and never overwrites", "[cache][maintenance]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  auto db = CacheDb::open(path, {});
  for (int i = 0; i < 20; ++i) db->put_binary(sample_record(i));
  db->put_tuning(sample_tuning(1));
  BinaryRecord damaged = sample_record(100);
  db->put_binary(damaged);
  tamper_blob(path, damaged, 0);

  const std::string out = dir.file("ship/image.db");
  db->export_to(out);
  auto bytes = read_bytes(out);
  REQUIRE(bytes.size() > 100);
  CHECK(bytes[18] == 1);  // header write version 1: rollback journal, not WAL
  CHECK(bytes[19] == 1);
  CHECK_FALSE(std::filesystem::exists(out + "-wal"));
  for (const auto& e : std::filesystem::directory_iterator(dir.file("ship")))
    CHECK(e.path().filename() == "image.db");  // no temporary left behind

  {
    auto ro = CacheDb::open(out, read_only());
    CHECK(ro->counts().binaries == 20);  // the damaged entry was not shipped
    CHECK(ro->get_binary(damaged.digest).status == LookupStatus::miss);
    CHECK(ro->get_binary(sample_record(7).digest).status == LookupStatus::hit);
    CHECK(ro->get_tuning("xqa_decode", sample_tuning(1).problem_key, sample_tuning(1).device_fingerprint));
    CHECK(ro->verify().empty());
    // A read-only file can be exported too.
    ro->export_to(dir.file("again.db"));
    CHECK(CacheDb::open(dir.file("again.db"), read_only())->counts().binaries == 20);
  }
  CHECK(read_bytes(out) == bytes);  // reading it changed nothing

  CHECK_THROWS_WITH(db->export_to(out), Catch::Contains("refusing to overwrite"));
  CHECK(read_bytes(out) == bytes);
}

TEST_CASE("merge imports intact entries and newer tuning rows", "[cache][maintenance]") {
  TempDir dir;
  const std::string src_path = dir.file("src.db"), dst_path = dir.file("dst.db");
  // One creation time for every row: record 1 must be the same row in both files (a row stamped in another second
  // has another row digest, and a merge keeps whichever of two intact rows sorts first).
  const auto record = [](int i) {
    BinaryRecord r = sample_record(i);
    r.created_at = 1700000000;
    return r;
  };
  {
    auto src = CacheDb::open(src_path, {});
    src->put_binary(record(1));  // also in dst -> skipped
    src->put_binary(record(2));  // new -> added
    src->put_binary(record(3));  // damaged -> damaged_skipped
    src->put_tuning(sample_tuning(1, 500));  // newer than dst's -> updated
    src->put_tuning(sample_tuning(2, 500));  // older than dst's -> kept
    src->put_tuning(sample_tuning(3, 500));  // new -> added
  }
  tamper_blob(src_path, sample_record(3), 42);
  auto dst = CacheDb::open(dst_path, {});
  dst->put_binary(record(1));
  TuningRecord t1 = sample_tuning(1, 100), t2 = sample_tuning(2, 900);
  t1.winner_config = t2.winner_config = "dst";
  dst->put_tuning(t1);
  dst->put_tuning(t2);

  CacheDb::MergeResult m = dst->merge_from(src_path);
  CHECK(m.binaries_added == 1);
  CHECK(m.binaries_skipped == 1);
  CHECK(m.damaged_skipped == 1);
  CHECK(m.tuning_added == 1);
  CHECK(m.tuning_updated == 1);
  CHECK(dst->counts().binaries == 2);
  CHECK(dst->get_binary(sample_record(3).digest).status == LookupStatus::miss);
  CHECK(dst->get_tuning("xqa_decode", t1.problem_key, t1.device_fingerprint)->winner_config ==
        sample_tuning(1).winner_config);
  CHECK(dst->get_tuning("xqa_decode", t2.problem_key, t2.device_fingerprint)->winner_config == "dst");
  CHECK(dst->verify().empty());

  CacheDb::MergeResult again = dst->merge_from(src_path);
  CHECK(again.binaries_added == 0);
  CHECK(again.binaries_skipped == 2);
  CHECK(again.tuning_added + again.tuning_updated == 0);
}

TEST_CASE("pruning NVRTC rows by compiler version keeps host (LLVM) objects", "[cache][maintenance]") {
  // `ktune cache prune --stale-compiler` compares NVRTC rows with the NVRTC loaded now; a host object's
  // compiler_version is an LLVM target id, which never equals an NVRTC version, so it must not be judged by it.
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  db->put_binary(sample_record(1, "13.0.88"));
  db->put_binary(sample_record(2, "12.8.1"));
  BinaryRecord host = sample_record(3, "x86_64-pc-linux-gnu/znver5/+avx512f;llvm 19.1.7");
  host.compiler = "llvm";
  host.arch = "host";
  db->put_binary(host);

  CacheDb::PruneCriteria nvrtc_only;
  nvrtc_only.keep_compiler_version = "13.0.88";
  nvrtc_only.compiler = "nvrtc";
  CHECK(db->prune(nvrtc_only) == 1);  // the 12.8.1 CUBIN only
  std::vector<std::string> left;
  for (const auto& b : db->list_binaries()) left.push_back(b.compiler + " " + b.compiler_version);
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"llvm x86_64-pc-linux-gnu/znver5/+avx512f;llvm 19.1.7", "nvrtc 13.0.88"});

  CacheDb::PruneCriteria every_compiler;  // no compiler given: every row is judged (what the field is for)
  every_compiler.keep_compiler_version = "13.0.88";
  CHECK(db->prune(every_compiler) == 1);  // now the host object goes
}
