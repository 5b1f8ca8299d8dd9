// Merging caches tuned on different hosts of one GPU type: the rows kept do not depend on the merge order
// (the later tuned_at wins; on equal tuned_at, the row whose row digest sorts first).
#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "cache_test_util.hpp"

using namespace ktune::cache;
using namespace ktune::cache::test;

namespace {

TuningRecord host_row(int key, int64_t tuned_at, const std::string& winner, const std::string& host) {
  TuningRecord t = sample_tuning(key, tuned_at);
  t.winner_config = winner;
  t.candidates_json = R"([{"config":")" + winner + R"(","measured_on":")" + host + R"("}])";
  return t;
}

using Row = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string, int64_t>;

std::vector<Row> rows_of(const std::string& path) {
  std::vector<Row> out;
  for (const TuningRecord& t : CacheDb::open(path, {})->list_tuning())
    out.emplace_back(t.family, t.problem_key, t.device_fingerprint, t.ktune_version, t.winner_config,
                     t.candidates_json, t.tuned_at);
  return out;
}

std::vector<Row> merged(const TempDir& dir, const std::string& name, const std::vector<std::string>& sources,
                        const std::string& prefer_version = "") {
  const std::string path = dir.file(name);
  {
    auto db = CacheDb::open(path, {});
    for (const auto& s : sources) db->merge_from(s, prefer_version);
  }
  return rows_of(path);
}

}  // namespace

TEST_CASE("cache merge keeps the same tuning rows whatever the order (A+B == B+A)", "[cache][maintenance][merge]") {
  TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db"), c = dir.file("c.db");
  {
    auto da = CacheDb::open(a, {});
    auto db = CacheDb::open(b, {});
    auto dc = CacheDb::open(c, {});
    da->put_tuning(host_row(1, 700, "t64.s2.w1", "host-a"));  // key 1: tuned in the same second on a and b
    db->put_tuning(host_row(1, 700, "t128.s1.w4", "host-b"));
    da->put_tuning(host_row(2, 800, "t64.s2.w2", "host-a"));  // key 2: b's is later
    db->put_tuning(host_row(2, 900, "t32.s4.w2", "host-b"));
    da->put_tuning(host_row(3, 500, "t64.s1.w1", "host-a"));  // key 3: only in a
    dc->put_tuning(host_row(1, 700, "t64.s8.w8", "host-c"));  // key 1 again, a third row of the same second
    dc->put_tuning(host_row(2, 600, "t16.s1.w1", "host-c"));
  }
  const std::vector<Row> ab = merged(dir, "ab.db", {a, b}), ba = merged(dir, "ba.db", {b, a});
  CHECK(ab == ba);
  REQUIRE(ab.size() == 3);
  CHECK(std::get<4>(ab[1]) == "t32.s4.w2");  // the later tuning wins
  CHECK(std::get<4>(ab[2]) == "t64.s1.w1");

  // Three files in every order, and into a cache that already holds one of them: one result.
  const std::vector<Row> abc = merged(dir, "abc.db", {a, b, c});
  CHECK(abc == merged(dir, "acb.db", {a, c, b}));
  CHECK(abc == merged(dir, "bca.db", {b, c, a}));
  CHECK(abc == merged(dir, "cba.db", {c, b, a}));
  CHECK(abc == merged(dir, "c_then_ab.db", {c, a, b, c}));
  // Key 1's winner among three rows of one second is one of them, chosen by row digest, not by order.
  const std::string key1 = std::get<4>(abc[0]);
  CHECK((key1 == "t64.s2.w1" || key1 == "t128.s1.w4" || key1 == "t64.s8.w8"));
  CHECK(CacheDb::open(dir.file("abc.db"), {})->verify().empty());
}

TEST_CASE("cache merge for a ktune version keeps that version's rows over later rows of another version",
          "[cache][maintenance][merge]") {
  TempDir dir;
  const std::string cur = dir.file("current.db"), old = dir.file("old.db");
  {
    TuningRecord mine = host_row(1, 500, "t64.s2.w1", "new-image");
    mine.ktune_version = "0.2.0";
    TuningRecord theirs = host_row(1, 900, "t32.s1.w1", "old-fleet");  // tuned later, by the previous release
    theirs.ktune_version = "0.1.0";
    CacheDb::open(cur, {})->put_tuning(mine);
    CacheDb::open(old, {})->put_tuning(theirs);
    TuningRecord only_old = host_row(2, 900, "t16.s1.w1", "old-fleet");  // no row of 0.2.0 for key 2
    only_old.ktune_version = "0.1.0";
    CacheDb::open(old, {})->put_tuning(only_old);
  }
  const std::vector<Row> pref = merged(dir, "pref.db", {cur, old}, "0.2.0");
  CHECK(pref == merged(dir, "pref_rev.db", {old, cur}, "0.2.0"));
  REQUIRE(pref.size() == 2);
  CHECK(std::get<4>(pref[0]) == "t64.s2.w1");  // 0.2.0's row, though tuned earlier
  CHECK(std::get<4>(pref[1]) == "t16.s1.w1");  // another version's row is still merged where there is no other
  // Without a preferred version the later row wins, as between rows of one version.
  const std::vector<Row> plain = merged(dir, "plain.db", {cur, old});
  CHECK(std::get<4>(plain[0]) == "t32.s1.w1");
}

TEST_CASE("cache merge keeps the same binary rows whatever the order (one key compiled on two hosts)",
          "[cache][maintenance][merge]") {
  // One digest, two intact rows: the blobs differ as NVRTC's per-process symbol names do, and so do created_at and
  // compile_ms. The merged file keeps one of them whatever the order: the row whose row digest sorts first.
  TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db");
  BinaryRecord ra = sample_record(1), rb = sample_record(1);
  ra.created_at = 1796505872;
  rb.created_at = 1796506070;
  rb.compile_ms = 125.1;
  rb.blob.back() ^= 0x5a;
  CacheDb::open(a, {})->put_binary(ra);
  CacheDb::open(b, {})->put_binary(rb);
  CacheDb::open(a, {})->put_binary(sample_record(2));  // only in a
  using BinRow = std::tuple<std::string, int64_t, double, std::string>;
  const auto binaries_of = [&](const std::vector<std::string>& sources, const std::string& name) {
    const std::string path = dir.file(name);
    {
      auto db = CacheDb::open(path, {});
      for (const auto& s : sources) db->merge_from(s, "");
    }
    auto db = CacheDb::open(path, {});
    CHECK(db->verify().empty());
    std::vector<BinRow> out;
    for (const BinaryInfo& info : db->list_binaries()) {
      const BinaryLookup l = db->get_binary(info.digest);
      REQUIRE(l.status == LookupStatus::hit);
      out.emplace_back(l.record.digest, l.record.created_at, l.record.compile_ms, l.record.blob_sha256);
    }
    return out;
  };
  const std::vector<BinRow> ab = binaries_of({a, b}, "ab.db"), ba = binaries_of({b, a}, "ba.db");
  REQUIRE(ab.size() == 2);
  CHECK(ab == ba);
  CHECK(binaries_of({a, b, a, b}, "abab.db") == ab);
}
