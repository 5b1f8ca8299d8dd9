// Schema v1 -> v2 migration, written by this code's own v1 path, and the refusal of files from the future.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "hardening_util.hpp"
#include "ktune/cache/layered.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;

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

// A v1 file as ktune 0.1 wrote it: binaries and tuning rows through the v1 column set, no row digests.
void write_v1_file(const std::string& path, int binaries, int tuning) {
  auto v1 = detail::open_at_schema_version(path, 1);
  REQUIRE(v1->schema_version() == 1);
  for (int i = 0; i < binaries; ++i) REQUIRE(v1->put_binary(sample_record(i)));
  for (int i = 0; i < tuning; ++i) v1->put_tuning(sample_tuning(i, 1000 + i));
}

}  // namespace

TEST_CASE("hardening: a v1 file written by the v1 schema path is migrated to v2 on a writable open",
          "[hardening][migration]") {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  write_v1_file(path, 5, 3);
  CHECK(raw_text(path, "SELECT value FROM meta WHERE key = 'schema_version'") == "1");
  CHECK(raw_int(path, "SELECT count(*) FROM pragma_table_info('binaries') WHERE name = 'row_digest'") == 0);

  // Read-only, a v1 file is refused with what to do (it cannot prove its rows are intact).
  CHECK_THAT(open_error(path, read_only()), Catch::Contains("version 1 needs upgrading") && Catch::Contains(path));

  auto db = CacheDb::open(path, {});
  CHECK(db->schema_version() == 2);
  CHECK(raw_text(path, "SELECT value FROM meta WHERE key = 'schema_version'") == "2");
  CHECK(raw_int(path, "SELECT count(*) FROM binaries WHERE length(row_digest) = 64") == 5);
  CHECK(raw_int(path, "SELECT count(*) FROM tuning WHERE length(row_digest) = 64") == 3);
  CHECK(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'signatures'") == 1);
  for (int i = 0; i < 5; ++i) {
    BinaryLookup l = db->get_binary(sample_record(i).digest);
    REQUIRE(l.status == LookupStatus::hit);
    CHECK(l.record.blob == sample_record(i).blob);
    CHECK(l.record.entry_points == sample_record(i).entry_points);
  }
  for (int i = 0; i < 3; ++i) {
    auto t = db->get_tuning(sample_tuning(i).family, sample_tuning(i).problem_key, sample_tuning(i).device_fingerprint);
    REQUIRE(t);
    CHECK(t->winner_config == sample_tuning(i).winner_config);
  }
  CHECK(db->verify().empty());
  db.reset();

  // Migrated rows are protected like new ones: a metadata byte changed afterwards is caught.
  raw_exec(path, "UPDATE binaries SET arch = 'sm_80' WHERE digest = '" + sample_record(2).digest + "'");
  db = CacheDb::open(path, {});
  BinaryLookup l = db->get_binary(sample_record(2).digest);
  CHECK(l.status == LookupStatus::damaged);
  CHECK_THAT(l.detail, Catch::Contains("row digest"));
  // And the migrated file opens read-only now.
  db.reset();
  CHECK(CacheDb::open(path, read_only())->schema_version() == 2);
}

TEST_CASE("hardening: migration keeps a v1 blob damage detectable and is idempotent", "[hardening][migration]") {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  write_v1_file(path, 3, 0);
  std::vector<uint8_t> bad = sample_record(1).blob;
  bad[10] ^= 0x40;
  raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + sample_record(1).digest + "'", &bad);
  auto db = CacheDb::open(path, {});
  CHECK(db->get_binary(sample_record(1).digest).status == LookupStatus::damaged);
  CHECK(db->get_binary(sample_record(0).digest).status == LookupStatus::hit);
  REQUIRE(db->verify().size() == 1);
  db.reset();
  // Re-running the v1 -> v2 step (a file whose version says 1 but already has the columns) is harmless.
  raw_exec(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version'");
  db = CacheDb::open(path, {});
  CHECK(db->schema_version() == 2);
  CHECK(db->get_binary(sample_record(0).digest).status == LookupStatus::hit);
  CHECK(db->verify().size() == 1);
}

TEST_CASE("hardening: 6 processes opening one v1 file at once migrate it exactly once", "[hardening][migration]") {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  write_v1_file(path, 20, 5);
  std::vector<pid_t> children;
  for (int p = 0; p < 6; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        auto db = CacheDb::open(path, {});
        if (db->schema_version() != 2) status = 2;
        for (int i = 0; i < 20; ++i)
          if (db->get_binary(sample_record(i).digest).status != LookupStatus::hit) status = 3;
        BinaryRecord mine = sample_record(100 + p);
        if (!db->put_binary(mine)) status = 4;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto db = CacheDb::open(path, {});
  CHECK(db->counts().binaries == 26);
  CHECK(db->counts().tuning == 5);
  CHECK(db->verify().empty());
}

TEST_CASE("hardening: a future schema version is refused everywhere and left untouched", "[hardening][migration]") {
  TempDir dir;
  const std::string path = dir.file("future.db");
  CacheDb::open(path, {})->put_binary(sample_record(1));
  raw_exec(path, "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  const auto before = read_bytes(path);
  CHECK_THAT(open_error(path, {}), Catch::Contains("schema version 3") && Catch::Contains("newer") &&
                                       Catch::Contains(path));
  CHECK_THAT(open_error(path, read_only()), Catch::Contains("newer"));

  LayeredCache layered(path + ":" + dir.file("user.db"), false);
  auto layers = layered.layers();
  REQUIRE(layers.size() == 2);
  CHECK_FALSE(layers[0].open);
  CHECK(layers[0].refused);
  CHECK_THAT(layers[0].note, Catch::Contains("newer"));
  CHECK(layers[1].writable);
  REQUIRE(layered.refused().size() == 1);
  CHECK_THAT(layered.refused()[0], Catch::Contains(path));
  CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::miss);
  CHECK(read_bytes(path) == before);
}
