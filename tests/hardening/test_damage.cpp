// Damage at the store level: a byte changed in any column of any row, truncated files, random byte flips
// anywhere in the file, a non-SQLite file. The one promise checked everywhere: a lookup is a hit only with the
// exact bytes and metadata that were written; everything else is a miss, `damaged`, or a CacheError naming
// the file — never a wrong binary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <random>

#include "hardening_util.hpp"
#include "ktune/cache/layered.hpp"
#include "support/seed.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;

namespace {

bool same_metadata(const BinaryRecord& a, const BinaryRecord& b) {
  return a.digest == b.digest && a.family == b.family && a.name == b.name && a.arch == b.arch &&
         a.compiler == b.compiler && a.compiler_version == b.compiler_version && a.options == b.options &&
         a.source_digest == b.source_digest && a.ktune_version == b.ktune_version &&
         a.schema_version == b.schema_version && a.entry_points == b.entry_points;
}

// Every record of `expected` looked up in `db`: hit only when byte-for-byte right. Returns the number of
// lookups that were not hits (detected); a wrong hit fails the test.
int check_never_wrong(CacheDb& db, const std::vector<BinaryRecord>& expected) {
  int not_hit = 0;
  for (const auto& r : expected) {
    BinaryLookup l;
    try {
      l = db.get_binary(r.digest);
    } catch (const CacheError&) {
      ++not_hit;  // an error naming the file is a detection too
      continue;
    }
    if (l.status != LookupStatus::hit) {
      CHECK(l.record.blob.empty());
      ++not_hit;
      continue;
    }
    CHECK(l.record.blob == r.blob);
    CHECK(same_metadata(l.record, r));
  }
  return not_hit;
}

}  // namespace

TEST_CASE("hardening: a changed byte in any metadata column makes the row damaged, never a hit",
          "[hardening][damage]") {
  // Text columns get one character changed, numeric ones a changed value: what a bit flip on disk or a buggy
  // writer does. entry_points/arch/compiler_version/options are the ones that would load a wrong kernel.
  struct Edit {
    const char* column;
    const char* sql;  // SET clause
  } edits[] = {
      {"entry_points", "entry_points = replace(entry_points, 'kernel_a', 'kernel_b')"},
      {"arch", "arch = 'sm_80'"},
      {"compiler_version", "compiler_version = '13.0.89'"},
      {"options", "options = replace(options, '-O3', '-O2')"},
      {"family", "family = 'xqa_decodf'"},
      {"name", "name = name || 'x'"},
      {"compiler", "compiler = 'nvrtd'"},
      {"source_digest", "source_digest = 'src1'"},
      {"ktune_version", "ktune_version = '0.1.1'"},
      {"schema_version", "schema_version = schema_version + 1"},
      {"blob_sha256", "blob_sha256 = substr(blob_sha256, 1, 63) || 'f'"},
      {"compile_ms", "compile_ms = compile_ms + 1"},
      {"created_at", "created_at = created_at + 1"},
      {"blob_size", "blob_size = blob_size - 1"},
      {"row_digest", "row_digest = substr(row_digest, 2) || 'a'"},
      {"row_digest (emptied)", "row_digest = ''"},
  };
  for (const Edit& e : edits) {
    DYNAMIC_SECTION(e.column) {
      TempDir dir;
      const std::string path = dir.file("k.db");
      BinaryRecord victim = sample_record(1), other = sample_record(2);
      {
        auto db = CacheDb::open(path, {});
        db->put_binary(victim);
        db->put_binary(other);
      }
      raw_exec(path, std::string("UPDATE binaries SET ") + e.sql + " WHERE digest = '" + victim.digest + "'");
      auto db = CacheDb::open(path, {});
      BinaryLookup l = db->get_binary(victim.digest);
      CHECK(l.status == LookupStatus::damaged);
      CHECK(l.record.blob.empty());
      INFO(l.detail);
      CHECK_FALSE(l.detail.empty());
      CHECK(db->get_binary(other.digest).status == LookupStatus::hit);
      auto issues = db->verify();
      REQUIRE(issues.size() == 1);
      CHECK(issues[0].digest == victim.digest);
      // Layered lookups skip it and count it; put_binary repairs it.
      {
        LayeredCache layered(path, false);
        CHECK(layered.get_binary(victim.digest).status == LookupStatus::damaged);
        CHECK(layered.damaged_seen() == 1);
      }
      CHECK(db->put_binary(victim));
      CHECK(db->get_binary(victim.digest).status == LookupStatus::hit);
      CHECK(db->verify().empty());
    }
  }
}

TEST_CASE("hardening: a changed digest column orphans the row, verify names it", "[hardening][damage]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  BinaryRecord victim = sample_record(1);
  CacheDb::open(path, {})->put_binary(victim);
  raw_exec(path, "UPDATE binaries SET digest = 'x' || substr(digest, 2) WHERE digest = '" + victim.digest + "'");
  auto db = CacheDb::open(path, {});
  CHECK(db->get_binary(victim.digest).status == LookupStatus::miss);  // rebuilt by the runtime
  const std::string moved = "x" + victim.digest.substr(1);
  CHECK(db->get_binary(moved).status == LookupStatus::damaged);      // and never served under the new name
  CHECK(db->verify().size() == 1);
  CHECK(db->prune({}) == 1);
  CHECK(db->verify().empty());
}

TEST_CASE("hardening: a self-consistent forged row is refused when its columns disagree with the key",
          "[hardening][damage]") {
  // Row digests catch damage, not a writer who recomputes them; the runtime therefore also checks the row's
  // key columns against what it asked for.
  TempDir dir;
  const std::string path = dir.file("k.db");
  BinaryRecord r = sample_record(1);
  CacheDb::open(path, {})->put_binary(r);
  raw_exec(path, "UPDATE binaries SET arch = 'sm_80' WHERE digest = '" + r.digest + "'");
  reseal_binary_row(path, r.digest);
  auto db = CacheDb::open(path, {});
  CHECK(db->get_binary(r.digest).status == LookupStatus::hit);  // consistent in itself
  BinaryExpectation want;
  want.arch = "sm_90a";
  want.compiler_version = r.compiler_version;
  BinaryLookup l = db->get_binary(r.digest, want);
  CHECK(l.status == LookupStatus::damaged);
  CHECK_THAT(l.detail, Catch::Contains("column arch is 'sm_80'"));
  // A put of the genuine record replaces the forged one (same digest, different key columns).
  CHECK(db->put_binary(r));
  CHECK(db->get_binary(r.digest, want).status == LookupStatus::hit);
}

TEST_CASE("hardening: random byte flips in blobs are always detected", "[hardening][damage]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  std::vector<BinaryRecord> recs;
  {
    auto db = CacheDb::open(path, {});
    for (int i = 0; i < 8; ++i) {
      recs.push_back(sample_record(i));
      db->put_binary(recs.back());
    }
  }
  std::mt19937 rng(8);
  int detected = 0;
  for (int trial = 0; trial < 64; ++trial) {
    const BinaryRecord& r = recs[trial % recs.size()];
    std::vector<uint8_t> bad = r.blob;
    const size_t at = rng() % bad.size();
    bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + r.digest + "'", &bad);
    auto db = CacheDb::open(path, {});
    BinaryLookup l = db->get_binary(r.digest);
    if (l.status == LookupStatus::damaged) ++detected;
    CHECK(l.status == LookupStatus::damaged);
    CHECK(db->put_binary(r));  // repair for the next trial
  }
  CHECK(detected == 64);
}

TEST_CASE("hardening: a damaged tuning row is a miss, named by verify, pruned and repaired",
          "[hardening][damage]") {
  TempDir dir;
  const std::string path = dir.file("k.db");
  TuningRecord t = sample_tuning(1), u = sample_tuning(2);
  {
    auto db = CacheDb::open(path, {});
    db->put_tuning(t);
    db->put_tuning(u);
  }
  raw_exec(path, "UPDATE tuning SET winner_config = 't128.s2.w4' WHERE problem_key = '" + t.problem_key + "'");
  auto db = CacheDb::open(path, {});
  std::string problem;
  CHECK_FALSE(db->get_tuning_checked(t.family, t.problem_key, t.device_fingerprint, &problem));
  CHECK_THAT(problem, Catch::Contains("damaged") && Catch::Contains(t.problem_key));
  CHECK(db->get_tuning(u.family, u.problem_key, u.device_fingerprint));
  CHECK(db->list_tuning().size() == 1);
  auto issues = db->verify();
  REQUIRE(issues.size() == 1);
  CHECK_FALSE(issues[0].tuning_key.empty());
  CHECK_THAT(issues[0].name, Catch::Contains(t.problem_key));
  {
    LayeredCache layered(path, false);
    std::string passed_over;
    CHECK_FALSE(layered.get_tuning(t.family, t.problem_key, t.device_fingerprint, "", nullptr, &passed_over));
    CHECK(layered.damaged_seen() == 1);
    CHECK_THAT(passed_over, Catch::Contains(path) && Catch::Contains("damaged") && Catch::Contains(t.problem_key));
  }
  // export drops the damaged row instead of refusing the file
  db->export_to(dir.file("out.db"));
  auto exported = CacheDb::open(dir.file("out.db"), {});
  CHECK(exported->counts().tuning == 1);
  CHECK(exported->verify().empty());
  CHECK(db->prune({}) == 1);
  CHECK(db->verify().empty());
  db->put_tuning(t);
  CHECK(db->get_tuning(t.family, t.problem_key, t.device_fingerprint)->winner_config == t.winner_config);
}

TEST_CASE("hardening: merge never launders a damaged row into a fresh row digest", "[hardening][damage]") {
  TempDir dir;
  const std::string src = dir.file("src.db"), dst = dir.file("dst.db");
  {
    auto db = CacheDb::open(src, {});
    db->put_binary(sample_record(1));
    db->put_binary(sample_record(2));
    db->put_tuning(sample_tuning(1));
  }
  raw_exec(src, "UPDATE binaries SET entry_points = 'evil' WHERE digest = '" + sample_record(1).digest + "'");
  raw_exec(src, "UPDATE tuning SET winner_config = 'evil'");
  auto db = CacheDb::open(dst, {});
  auto m = db->merge_from(src);
  CHECK(m.binaries_added == 1);
  CHECK(m.tuning_added == 0);
  CHECK(m.damaged_skipped == 2);
  CHECK(db->get_binary(sample_record(1).digest).status == LookupStatus::miss);
}

TEST_CASE("hardening: a truncated cache file is reported, never served wrong", "[hardening][damage]") {
  TempDir dir;
  const std::string good = dir.file("good.db");
  std::vector<BinaryRecord> recs;
  {
    auto db = CacheDb::open(good, {});
    for (int i = 0; i < 40; ++i) {
      BinaryRecord r = sample_record(i);
      r.blob = cache::test::pattern_blob(6000 + 97 * i, i);  // several pages each, overflow chains included
      recs.push_back(r);
      db->put_binary(r);
    }
    db->use_rollback_journal();  // everything in the main file, as a shipped export is
  }
  const auto bytes = read_bytes(good);
  REQUIRE(bytes.size() > 200000);
  int opened = 0, refused = 0;
  for (double frac : {0.0001, 0.01, 0.1, 0.33, 0.5, 0.75, 0.9, 0.99, 0.9999}) {
    DYNAMIC_SECTION("truncated to " << frac) {
      const std::string path = dir.file("cut.db");
      std::filesystem::remove(path);
      write_bytes(path, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() * frac)));
      for (bool ro : {false, true}) {
        OpenOptions o;
        o.read_only = ro;
        std::unique_ptr<CacheDb> db;
        try {
          db = CacheDb::open(path, o);
        } catch (const CacheError& e) {
          ++refused;
          CHECK_THAT(e.what(), Catch::Contains(path));
          continue;
        }
        ++opened;
        const int missing = check_never_wrong(*db, recs);
        // verify must say something is wrong unless every entry is still served whole (a cut that only
        // removed unused space).
        std::vector<CacheDb::VerifyIssue> issues;
        try {
          issues = db->verify();
        } catch (const CacheError&) {
          issues.push_back({});
        }
        CHECK((!issues.empty() || missing == 0));
      }
      // The runtime's view: a layer that cannot be used is skipped with a note, never an exception.
      LayeredCache layered(path + "?ro", false);
      for (const auto& r : recs) {
        BinaryLookup l = layered.get_binary(r.digest);
        if (l.status == LookupStatus::hit) CHECK(l.record.blob == r.blob);
      }
    }
  }
  CHECK(opened + refused > 0);
}

TEST_CASE("hardening: random byte flips anywhere in the file never yield a wrong hit", "[hardening][damage]") {
  TempDir dir;
  const std::string good = dir.file("good.db");
  std::vector<BinaryRecord> recs;
  {
    auto db = CacheDb::open(good, {});
    for (int i = 0; i < 12; ++i) {
      BinaryRecord r = sample_record(i);
      r.blob = cache::test::pattern_blob(3000 + 131 * i, 77 + i);
      recs.push_back(r);
      db->put_binary(r);
      db->put_tuning(sample_tuning(i));
    }
    db->use_rollback_journal();
  }
  const auto bytes = read_bytes(good);
  std::mt19937 rng(static_cast<unsigned>(ktune::test::run_seed("random byte flips")));
  int trials = 0, refused = 0, not_hit = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::vector<char> bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
    const std::string path = dir.file("flip.db");
    std::filesystem::remove(path);
    write_bytes(path, bad);
    ++trials;
    std::unique_ptr<CacheDb> db;
    try {
      OpenOptions o;
      o.read_only = true;
      db = CacheDb::open(path, o);
    } catch (const CacheError&) {
      ++refused;
      continue;
    }
    not_hit += check_never_wrong(*db, recs);
    try {
      for (const auto& t : db->list_tuning()) {
        bool known = false;
        for (int i = 0; i < 12; ++i)
          known |= t.problem_key == sample_tuning(i).problem_key && t.winner_config == sample_tuning(i).winner_config;
        CHECK(known);
      }
    } catch (const CacheError&) {
    }
  }
  WARN("150 files with 1-4 random bit flips: " << refused << " refused at open, " << not_hit
                                               << " lookups not served; 0 wrong hits");
}

// Offsets of every occurrence of `pattern` in `bytes`.
std::vector<size_t> occurrences(const std::vector<char>& bytes, const std::string& pattern) {
  std::vector<size_t> out;
  for (auto it = bytes.begin(); (it = std::search(it, bytes.end(), pattern.begin(), pattern.end())) != bytes.end(); ++it)
    out.push_back(static_cast<size_t>(it - bytes.begin()));
  return out;
}

// Index cells hold a record: a header (its size, then one serial type per column) and the body (the key columns,
// then the rowid). Finds the one cell whose body is `body` (the key columns' text and a one-byte rowid, 2..127)
// and turns key column `column` (text of `len` bytes, serial type 2 len + 13) into a blob of the same length
// (2 len + 12), as one flipped bit does: the entry then sorts elsewhere, and a lookup by its key can land on a
// neighbouring entry's row.
bool blobify_index_column(std::vector<char>& bytes, const std::string& body, size_t header_size, size_t column,
                          size_t len) {
  int changed = 0;
  for (size_t p : occurrences(bytes, body)) {
    if (p < header_size) continue;
    char& type = bytes[p - header_size + 1 + column];
    if (bytes[p - header_size] == static_cast<char>(header_size) && type == static_cast<char>(2 * len + 13)) {
      type = static_cast<char>(2 * len + 12);
      ++changed;
    }
  }
  return changed == 1;
}

TEST_CASE("hardening: an index entry damaged so that a lookup lands on another row never serves that row",
          "[hardening][damage]") {
  TempDir dir;
  const std::string good = dir.file("good.db");
  std::vector<BinaryRecord> recs;
  std::vector<TuningRecord> tunings;
  {
    auto db = CacheDb::open(good, {});
    for (int i = 0; i < 8; ++i) {
      recs.push_back(sample_record(i));
      tunings.push_back(sample_tuning(i));
      db->put_binary(recs.back());
      db->put_tuning(tunings.back());
    }
    db->use_rollback_journal();
  }
  const auto bytes = read_bytes(good);
  OpenOptions ro;
  ro.read_only = true;
  int damaged_binaries = 0, damaged_tunings = 0;
  // Rows 1..8 in insertion order: record i and tuning row i have rowid i + 1 (one byte from rowid 2).
  for (int i = 1; i < 8; ++i) {
    std::vector<char> bad = bytes;
    const char rowid = static_cast<char>(i + 1);
    // the digest index (digest, rowid) and the tuning key index (family, problem_key, fingerprint, rowid)
    REQUIRE(blobify_index_column(bad, recs[i].digest + rowid, 3, 0, recs[i].digest.size()));
    const TuningRecord& t = tunings[i];
    REQUIRE(blobify_index_column(bad, t.family + t.problem_key + t.device_fingerprint + rowid, 5, 1,
                                 t.problem_key.size()));
    const std::string path = dir.file("index" + std::to_string(i) + ".db");
    write_bytes(path, bad);
    auto db = CacheDb::open(path, ro);
    for (const auto& r : recs) {
      const BinaryLookup l = db->get_binary(r.digest);
      INFO("binary " << r.digest << " with entry " << i << " damaged: " << l.detail);
      if (l.status == LookupStatus::hit) {
        CHECK(l.record.blob == r.blob);
        CHECK(same_metadata(l.record, r));
      } else {
        CHECK(l.record.blob.empty());
        damaged_binaries += l.status == LookupStatus::damaged;
      }
    }
    for (const auto& t : tunings) {
      std::string problem;
      const auto got = db->get_tuning_checked(t.family, t.problem_key, t.device_fingerprint, &problem);
      INFO("tuning " << t.problem_key << " with entry " << i << " damaged: " << problem);
      if (got) {
        CHECK(got->problem_key == t.problem_key);
        CHECK(got->winner_config == t.winner_config);
      } else {
        damaged_tunings += !problem.empty();
      }
    }
  }
  WARN("entries made blobs one at a time: " << damaged_binaries << " binary and " << damaged_tunings
                                            << " tuning lookups reported damaged, none served another row");
}

TEST_CASE("hardening: a source index entry that points at another row never serves that row as a match",
          "[hardening][damage]") {
  TempDir dir;
  const std::string good = dir.file("good.db");
  const BinaryRecord filler = sample_record(0, "13.0.88", "src9");  // rowid 1 (stored without a body byte)
  const BinaryRecord wanted = sample_record(1, "13.0.88", "src0");  // rowid 2
  const BinaryRecord other = sample_record(2, "13.0.88", "src1");   // rowid 3: another kernel source
  {
    auto db = CacheDb::open(good, {});
    for (const BinaryRecord* r : {&filler, &wanted, &other}) db->put_binary(*r);
    db->use_rollback_journal();
  }
  // binaries_by_source holds (source_digest, arch, compiler, options, ktune_version, rowid): point src0's entry
  // at rowid 3, the src1 row, which is intact in itself.
  std::vector<char> bad = read_bytes(good);
  const std::string entry =
      wanted.source_digest + wanted.arch + wanted.compiler + wanted.options + wanted.ktune_version + char(2);
  const std::vector<size_t> at = occurrences(bad, entry);
  REQUIRE(at.size() == 1);
  bad[at[0] + entry.size() - 1] = 3;
  const std::string path = dir.file("redirected.db");
  write_bytes(path, bad);
  OpenOptions ro;
  ro.read_only = true;
  auto db = CacheDb::open(path, ro);
  const BinaryLookup l =
      db->find_binary_any_compiler_version(wanted.source_digest, wanted.arch, wanted.compiler, wanted.options,
                                           wanted.ktune_version);
  INFO(l.detail);
  CHECK(l.status != LookupStatus::hit);
  CHECK(l.record.blob.empty());
  CHECK(db->get_binary(other.digest).status == LookupStatus::hit);  // the row itself is intact
}

TEST_CASE("hardening: a non-SQLite file at the cache path is reported and skipped", "[hardening][damage]") {
  TempDir dir;
  const std::string path = dir.file("ktune.db");
  write_bytes(path, std::vector<char>(4096, 'x'));
  const auto before = read_bytes(path);
  try {
    CacheDb::open(path, {});
    FAIL("opened a non-SQLite file");
  } catch (const CacheError& e) {
    CHECK_THAT(e.what(), Catch::Contains("not an SQLite database") && Catch::Contains(path));
  }
  // An SQLite database that is not a ktune cache.
  const std::string other = dir.file("other.db");
  raw_exec(other, "CREATE TABLE t(x)");
  try {
    CacheDb::open(other, {});
    FAIL("opened a foreign SQLite file");
  } catch (const CacheError& e) {
    CHECK_THAT(e.what(), Catch::Contains("not a ktune cache"));
  }
  LayeredCache layered(path + ":" + other + ":" + dir.file("user.db"), false);
  auto refused = layered.refused();
  REQUIRE(refused.size() == 2);
  CHECK_THAT(refused[0], Catch::Contains("not an SQLite database"));
  CHECK(layered.writable_layer()->path() == dir.file("user.db"));
  CHECK(layered.put_binary(sample_record(1)));
  CHECK(read_bytes(path) == before);  // never overwritten or "repaired" by ktune
}
