#include <catch2/catch.hpp>
#include <filesystem>

#include "cache_test_util.hpp"
#include "ktune/cache/sha256.hpp"
#include "ktune/cache/store.hpp"

using namespace ktune::cache;
using namespace ktune::cache::test;

namespace {

std::string open_error(const std::string& path, OpenOptions o) {
  try {
    CacheDb::open(path, o);
  } catch (const CacheError& e) {
    return e.what();
  }
  return "(opened without error)";
}

OpenOptions read_only() {
  OpenOptions o;
  o.read_only = true;
  return o;
}

}  // namespace

TEST_CASE("binaries round trip with every column", "[cache][store]") {
  TempDir dir;
  const std::string path = dir.file("sub/dir/k.db");  // parent directories are created
  auto db = CacheDb::open(path, {});
  CHECK(db->path() == path);
  CHECK_FALSE(db->read_only());
  CHECK(db->schema_version() == kCacheSchemaVersion);

  BinaryRecord r = sample_record(1);
  r.created_at = 1700000000;
  REQUIRE(db->put_binary(r));
  BinaryLookup l = db->get_binary(r.digest);
  REQUIRE(l.status == LookupStatus::hit);
  const BinaryRecord& g = l.record;
  CHECK(g.digest == r.digest);
  CHECK(g.family == r.family);
  CHECK(g.name == r.name);
  CHECK(g.arch == r.arch);
  CHECK(g.compiler == r.compiler);
  CHECK(g.compiler_version == r.compiler_version);
  CHECK(g.options == r.options);
  CHECK(g.source_digest == r.source_digest);
  CHECK(g.ktune_version == r.ktune_version);
  CHECK(g.schema_version == r.schema_version);
  CHECK(g.entry_points == r.entry_points);
  CHECK(g.blob == r.blob);
  CHECK(g.blob_sha256 == sha256_hex(r.blob.data(), r.blob.size()));  // computed by the store
  CHECK(g.compile_ms == r.compile_ms);
  CHECK(g.created_at == 1700000000);

  BinaryRecord now = sample_record(2);
  REQUIRE(db->put_binary(now));
  CHECK(db->get_binary(now.digest).record.created_at > 1700000000);  // filled in

  CHECK(db->get_binary("no-such-digest").status == LookupStatus::miss);
  auto all = db->list_binaries();
  REQUIRE(all.size() == 2);
  CHECK(all[0].family == "mxfp4_gemm");
  CHECK(all[1].blob_size == static_cast<int64_t>(r.blob.size()));
  CHECK(db->list_binaries("xqa_decode").size() == 1);
  auto c = db->counts();
  CHECK(c.binaries == 2);
  CHECK(c.blob_bytes == static_cast<int64_t>(r.blob.size() + now.blob.size()));

  CHECK(db->remove_binary(r.digest));
  CHECK_FALSE(db->remove_binary(r.digest));
  CHECK(db->get_binary(r.digest).status == LookupStatus::miss);

  // Survives close and reopen.
  db.reset();
  db = CacheDb::open(path, {});
  CHECK(db->get_binary(now.digest).record.blob == now.blob);
}

TEST_CASE("put_binary is insert-or-ignore", "[cache][store]") {
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  BinaryRecord first = sample_record(1);
  CHECK(db->put_binary(first));
  BinaryRecord second = first;
  second.blob = pattern_blob(50, 99);
  second.name = "other";
  CHECK_FALSE(db->put_binary(second));
  BinaryLookup l = db->get_binary(first.digest);
  CHECK(l.record.blob == first.blob);
  CHECK(l.record.name == first.name);
  CHECK(db->counts().binaries == 1);
}

TEST_CASE("put_binary checks its input", "[cache][store]") {
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  BinaryRecord r = sample_record(1);
  r.blob_sha256 = sha256_hex("something else");
  CHECK_THROWS_WITH(db->put_binary(r), Catch::Contains("refusing to store") && Catch::Contains(r.digest));
  r.blob_sha256 = sha256_hex(r.blob.data(), r.blob.size());
  CHECK(db->put_binary(r));
  BinaryRecord nodigest = sample_record(2);
  nodigest.digest.clear();
  CHECK_THROWS_AS(db->put_binary(nodigest), CacheError);

  BinaryRecord empty = sample_record(3);
  empty.blob.clear();
  CHECK(db->put_binary(empty));
  BinaryLookup l = db->get_binary(empty.digest);
  CHECK(l.status == LookupStatus::hit);
  CHECK(l.record.blob.empty());
}

TEST_CASE("keys are bound as values, never spliced into SQL", "[cache][store]") {
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  BinaryRecord r = sample_record(1);
  r.digest = "x'); DROP TABLE binaries; --";
  r.family = "fam' OR '1'='1";
  CHECK(db->put_binary(r));
  CHECK(db->get_binary(r.digest).status == LookupStatus::hit);
  CHECK(db->list_binaries(r.family).size() == 1);
  CHECK(db->list_binaries("fam").empty());
  TuningRecord t = sample_tuning(1);
  t.problem_key = "\"; DELETE FROM tuning; --";
  db->put_tuning(t);
  CHECK(db->get_tuning(t.family, t.problem_key, t.device_fingerprint).has_value());
}

TEST_CASE("tuning rows round trip and upsert", "[cache][store]") {
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  TuningRecord t = sample_tuning(1, 0);
  db->put_tuning(t);
  auto got = db->get_tuning(t.family, t.problem_key, t.device_fingerprint);
  REQUIRE(got);
  CHECK(got->ktune_version == t.ktune_version);
  CHECK(got->winner_config == t.winner_config);
  CHECK(got->candidates_json == t.candidates_json);
  CHECK(got->tuned_at > 0);  // filled in
  CHECK_FALSE(db->get_tuning(t.family, t.problem_key, "other-device"));

  t.winner_config = "t128.s4";
  t.tuned_at = 5;
  db->put_tuning(t);  // last writer wins
  got = db->get_tuning(t.family, t.problem_key, t.device_fingerprint);
  CHECK(got->winner_config == "t128.s4");
  CHECK(got->tuned_at == 5);

  TuningRecord other = sample_tuning(2);
  other.family = "mla_sparse";
  db->put_tuning(other);
  CHECK(db->list_tuning().size() == 2);
  CHECK(db->list_tuning("mla_sparse").size() == 1);
  CHECK(db->counts().tuning == 2);
}

TEST_CASE("a file with a newer schema version is refused", "[cache][store]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  CacheDb::open(path, {})->put_binary(sample_record(1));
  raw_exec(path, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  const std::string msg = open_error(path, {});
  CHECK_THAT(msg, Catch::Contains(path) && Catch::Contains("99") && Catch::Contains("newer") &&
                      Catch::Contains("upgrade ktune"));
  CHECK_THAT(open_error(path, read_only()), Catch::Contains("newer"));
  // The refused file was not touched.
  raw_exec(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version'");
  CHECK(CacheDb::open(path, {})->get_binary(sample_record(1).digest).status == LookupStatus::hit);
}

TEST_CASE("a file that is not an SQLite database is refused with its path", "[cache][store]") {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  write_bytes(path, std::vector<char>(5000, 'z'));
  CHECK_THAT(open_error(path, {}), Catch::Contains("not an SQLite database: " + path));
  CHECK_THAT(open_error(path, read_only()), Catch::Contains("not an SQLite database: " + path));
  CHECK(read_bytes(path) == std::vector<char>(5000, 'z'));  // left alone

  const std::string tiny = dir.file("tiny");
  write_bytes(tiny, {'S', 'Q', 'L'});
  CHECK_THAT(open_error(tiny, {}), Catch::Contains("not an SQLite database"));

  const std::string foreign = dir.file("foreign.db");
  raw_exec(foreign, "CREATE TABLE something(x)");
  CHECK_THAT(open_error(foreign, {}), Catch::Contains("not a ktune cache") && Catch::Contains(foreign));

  CHECK_THAT(open_error(dir.path().string(), {}), Catch::Contains("directory"));
  OpenOptions no_create;
  no_create.create = false;
  CHECK_THAT(open_error(dir.file("absent.db"), no_create), Catch::Contains("does not exist"));
  CHECK_THAT(open_error(dir.file("absent.db"), read_only()), Catch::Contains("does not exist"));
  CHECK_FALSE(std::filesystem::exists(dir.file("absent.db")));
}

TEST_CASE("read-only open serves entries and refuses writes", "[cache][store]") {
  TempDir dir;
  const std::string path = dir.file("weird name?#%.db");  // needs escaping in the URI
  BinaryRecord r = sample_record(1);
  {
    auto db = CacheDb::open(path, {});
    db->put_binary(r);
    db->put_tuning(sample_tuning(1));
  }
  const auto before = read_bytes(path);
  {
    auto ro = CacheDb::open(path, read_only());
    CHECK(ro->read_only());
    CHECK(ro->get_binary(r.digest).status == LookupStatus::hit);
    CHECK(ro->get_tuning("xqa_decode", sample_tuning(1).problem_key, sample_tuning(1).device_fingerprint));
    CHECK_THROWS_WITH(ro->put_binary(sample_record(2)), Catch::Contains("read-only") && Catch::Contains(path));
    CHECK_THROWS_AS(ro->put_tuning(sample_tuning(2)), CacheError);
    CHECK_THROWS_AS(ro->remove_binary(r.digest), CacheError);
    CHECK(ro->verify().empty());
  }
  CHECK(read_bytes(path) == before);
}

TEST_CASE("find_binary_any_compiler_version returns the newest intact match", "[cache][store]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  auto db = CacheDb::open(path, {});
  BinaryRecord old_v = sample_record(1, "12.8.1", "srcA");
  old_v.created_at = 100;
  BinaryRecord new_v = sample_record(1, "13.0.88", "srcA");
  new_v.created_at = 200;
  BinaryRecord other_src = sample_record(1, "13.1.0", "srcB");
  other_src.created_at = 300;
  db->put_binary(old_v);
  db->put_binary(new_v);
  db->put_binary(other_src);
  auto find = [&] { return db->find_binary_any_compiler_version("srcA", "sm_90a", "nvrtc", "-arch=sm_90a -O3", "0.1.0"); };
  BinaryLookup l = find();
  REQUIRE(l.status == LookupStatus::hit);
  CHECK(l.record.compiler_version == "13.0.88");
  CHECK(db->find_binary_any_compiler_version("srcA", "sm_100a", "nvrtc", "-arch=sm_90a -O3", "0.1.0").status ==
        LookupStatus::miss);

  // Edits that change no value the row digest covers change nothing either: the older row's created_at stored as
  // the text '100x' (it still reads as 100, and SQL sorts text above every integer) and its rowid moved past the
  // newer one's.
  raw_exec(path, "UPDATE binaries SET created_at = created_at || 'x', rowid = 1000 WHERE digest = '" + old_v.digest +
                     "'");
  CHECK(db->verify().empty());  // still intact
  l = find();
  REQUIRE(l.status == LookupStatus::hit);
  CHECK(l.record.compiler_version == "13.0.88");

  // The newest one damaged: the older intact one is returned instead.
  std::vector<uint8_t> bad = new_v.blob;
  bad[10] ^= 0x40;
  raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + new_v.digest + "'", &bad);
  l = find();
  REQUIRE(l.status == LookupStatus::hit);
  CHECK(l.record.compiler_version == "12.8.1");
  db->remove_binary(old_v.digest);
  l = find();
  CHECK(l.status == LookupStatus::damaged);
  CHECK(l.record.blob.empty());
}
