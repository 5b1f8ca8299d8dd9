// Opening cache files: never waiting for a writer, never silently read-only, never writing a file it refuses,
// never serving part of a file (a -wal it cannot read), never creating a file at a dangling link's target,
// and exports that are one self-contained file.
#include <sqlite3.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "hardening_util.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "support/unprivileged.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;
namespace fs = std::filesystem;

namespace {

// Another process's writer in the middle of a transaction: holds the write lock until destroyed.
class HeldWriteLock {
 public:
  explicit HeldWriteLock(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~HeldWriteLock() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }

 private:
  sqlite3* db_ = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Header bytes 18 and 19: 1 and 1 for a rollback journal, 2 and 2 for WAL.
std::pair<int, int> journal_bytes(const std::string& path) {
  const std::vector<char> b = read_bytes(path);
  REQUIRE(b.size() >= 100);
  return {b[18], b[19]};
}

}  // namespace

TEST_CASE("lock: opening a current-schema layer never waits for another writer, a put says it is locked",
          "[attack][lock][hardening][layered]") {
  TempDir dir;
  const std::string path = dir.file("user.db");
  CacheDb::open(path, {})->put_binary(sample_record(1));
  HeldWriteLock lock(path);

  auto t0 = std::chrono::steady_clock::now();
  LayeredCache layered(path, false);
  const double open_s = seconds_since(t0);
  CHECK(open_s < 3.0);
  REQUIRE(layered.writable_layer() != nullptr);  // not silently read-only
  CHECK(layered.write_problem().empty());
  CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::hit);  // readers never wait

  // A store while the lock is held fails within seconds, naming the file and the reason.
  t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(layered.put_binary(sample_record(2)),
                    Catch::Contains(path) && Catch::Contains("locked by another writer"));
  const double put_s = seconds_since(t0);
  CHECK(put_s < kLockWaitSeconds + 5.0);
}

TEST_CASE("lock: a layer that cannot be opened writable says why, and no other layer silently takes its place",
          "[attack][lock][hardening][layered][migration]") {
  TempDir dir;
  const std::string v1 = dir.file("old.db"), next = dir.file("next.db");
  detail::open_at_schema_version(v1, 1)->put_binary(sample_record(1));  // needs the write lock to migrate
  HeldWriteLock lock(v1);

  const auto t0 = std::chrono::steady_clock::now();
  LayeredCache layered(v1 + ":" + next, false);
  CHECK(seconds_since(t0) < kLockWaitSeconds + 5.0);
  auto layers = layered.layers();
  REQUIRE(layers.size() == 2);
  CHECK_FALSE(layers[0].writable);
  CHECK_THAT(layers[0].write_problem, Catch::Contains(v1) && Catch::Contains("locked by another writer"));
  CHECK_FALSE(layers[1].writable);  // entries never silently go to another file
  CHECK(layered.writable_layer() == nullptr);
  CHECK_THAT(layered.write_problem(), Catch::Contains(v1) && Catch::Contains("locked by another writer"));
  CHECK_THROWS_WITH(layered.put_binary(sample_record(2)), Catch::Contains("locked by another writer"));
  // Opened read-only on purpose: no problem to report.
  CHECK(LayeredCache(v1 + ":" + next, true).write_problem().empty());
  // Every layer read-only: the problem names each one.
  CHECK_THAT(LayeredCache(next + "?ro", false).write_problem(),
             Catch::Contains("no writable cache layer") && Catch::Contains(next));
}

TEST_CASE("tamper: a file ktune refuses is left byte-for-byte as it was", "[attack][tamper][hardening]") {
  TempDir dir;
  const std::string foreign = dir.file("foreign.db");
  raw_exec(foreign, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)");
  raw_exec(foreign, "INSERT INTO notes(body) VALUES ('someone else''s data')");
  const std::string other_app = dir.file("other_app.db");
  raw_exec(other_app, "CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)");
  raw_exec(other_app, "INSERT INTO meta VALUES ('schema_version', '2')");
  raw_exec(other_app, "PRAGMA application_id = 1234");
  const std::string future = signed_image(dir, "future.db", nullptr);
  raw_exec(future, "UPDATE meta SET value = '9' WHERE key = 'schema_version'");
  // A signed file whose signatures table became a view over a renamed copy: the view answers the signature
  // check, but a count of signature *tables* sees none, so it would have passed for unsigned and been written.
  const std::string view = signed_image(dir, "view.db", nullptr);
  raw_exec(view, "ALTER TABLE signatures RENAME TO sigs_t");
  raw_exec(view, "CREATE VIEW signatures AS SELECT * FROM sigs_t");

  for (const std::string& path : {foreign, other_app, future, view}) {
    INFO(path);
    const std::string before = file_sha256(path);
    CHECK_THROWS_AS(CacheDb::open(path, {}), CacheError);
    OpenOptions ro;
    ro.read_only = true;
    CHECK_THROWS_AS(CacheDb::open(path, ro), CacheError);
    {
      LayeredCache layered(path + ":" + dir.file("user.db"), false);
      auto layers = layered.layers();
      CHECK(layers[0].refused);
      CHECK(layers[0].write_problem.empty());  // no usable cache: skipped, the next layer takes entries
      CHECK(layers[1].writable);
    }
    CHECK(file_sha256(path) == before);
    CHECK(journal_bytes(path) == std::make_pair(1, 1));
    CHECK_FALSE(fs::exists(path + "-wal"));
  }
}

TEST_CASE("readonly: commits in a -wal that cannot be read are refused, never served in part",
          "[attack][readonly][hardening]") {
  TempDir dir;
  const std::string live = dir.file("live.db");
  fs::create_directories(dir.file("ship"));
  const std::string shipped = dir.file("ship/cache.db");
  {
    auto db = CacheDb::open(live, {});
    db->put_binary(sample_record(1));
    db->put_binary(sample_record(2));
    db->use_rollback_journal();  // 1 and 2 in the main file
  }
  {
    auto db = CacheDb::open(live, {});  // WAL again; 3 and 4 stay in the -wal while it is open
    db->put_binary(sample_record(3));
    db->put_binary(sample_record(4));
    REQUIRE(fs::file_size(live + "-wal") > 0);
    fs::copy_file(live, shipped);
    fs::copy_file(live + "-wal", shipped + "-wal");  // shipped without its -shm
  }
  REQUIRE_FALSE(fs::exists(shipped + "-shm"));

  // The lock-free (immutable) open, used where no -shm can be made, would see only 1 and 2.
  OpenOptions frozen;
  frozen.read_only = true;
  frozen.immutable = true;
  CHECK_THROWS_WITH(CacheDb::open(shipped, frozen), Catch::Contains(shipped + "-wal") &&
                                                        Catch::Contains("ktune cache export"));

  // In a directory this process cannot write, that is the only open left: the layer is refused. Without root (as
  // root, in a child that drops it: root can write any directory).
  fs::permissions(dir.file("ship"), fs::perms::owner_read | fs::perms::owner_exec);
  const std::string failed = ktune::test::run_unprivileged(dir.path(), [&]() -> std::string {
    LayeredCache layered(shipped, false);
    if (!layered.layers()[0].refused) return "the layer was not refused";
    if (layered.layers()[0].note.find("-wal") == std::string::npos)
      return "the refusal does not name the -wal: " + layered.layers()[0].note;
    return "";
  });
  ktune::test::check_unprivileged(failed);
  fs::permissions(dir.file("ship"), fs::perms::owner_all);
  // Where the -shm can be made (here: the directory is writable again), every commit is read: all four, never two.
  LayeredCache layered(shipped + "?ro", false);
  REQUIRE(layered.layers()[0].open);
  for (int i = 1; i <= 4; ++i) CHECK(layered.get_binary(sample_record(i).digest).status == LookupStatus::hit);
}

TEST_CASE("export: cache export writes one self-contained file, even from a live WAL cache",
          "[attack][export][readonly][hardening]") {
  TempDir dir;
  const std::string live = dir.file("live.db"), out = dir.file("out/image.db");
  auto db = CacheDb::open(live, {});
  for (int i = 0; i < 4; ++i) db->put_binary(sample_record(i));
  db->put_tuning(sample_tuning(1));
  REQUIRE(fs::file_size(live + "-wal") > 0);  // committed rows still only in the -wal

  CacheMergeSummary m = cache_export(live, out);
  CHECK(m.binaries_added == 4);
  CHECK(journal_bytes(out) == std::make_pair(1, 1));
  for (const char* suffix : {"-wal", "-shm", "-journal"}) CHECK_FALSE(fs::exists(out + suffix));
  OpenOptions frozen;
  frozen.read_only = true;
  auto shipped = CacheDb::open(out, frozen);  // what a read-only filesystem allows
  CHECK(shipped->counts().binaries == 4);
  CHECK(shipped->counts().tuning == 1);
  CHECK(shipped->verify().empty());

  // Two layers holding the same rows: the summary counts the rows the file holds, once.
  const std::string copy = dir.file("copy.db"), twice = dir.file("twice.db");
  auto second = CacheDb::open(copy, {});
  for (int i = 0; i < 4; ++i) second->put_binary(sample_record(i));
  second->put_tuning(sample_tuning(1));
  m = cache_export(live + ":" + copy, twice);
  CHECK(m.binaries_added == 4);
  CHECK(m.tuning_added == 1);
  CHECK(m.tuning_updated == 0);

  // A layer the path names that is not there (a typo): refused, naming it, and no file written.
  const std::string typo = dir.file("typo.db"), partial = dir.file("partial.db");
  CHECK_THROWS_WITH(cache_export(live + ":" + typo, partial),
                    Catch::Contains("no cache file at " + typo) && Catch::Contains("nothing exported"));
  CHECK_FALSE(fs::exists(partial));
}

TEST_CASE("readonly: a dangling symbolic link at a cache path is an error, never a file at its target",
          "[attack][readonly][hardening][layered]") {
  TempDir dir;
  fs::create_directories(dir.file("real"));
  const std::string link = dir.file("link.db"), target = dir.file("real/target.db");
  fs::create_symlink(target, link);

  CHECK_THROWS_WITH(CacheDb::open(link, {}), Catch::Contains("symbolic link") && Catch::Contains(target));
  {
    LayeredCache layered(link, false);
    auto layers = layered.layers();
    CHECK(layers[0].refused);
    CHECK_FALSE(layers[0].open);
    CHECK_THAT(layers[0].note, Catch::Contains("symbolic link"));
    CHECK_THAT(layered.write_problem(), Catch::Contains(link));
    REQUIRE(layered.refused().size() == 1);
  }
  CHECK_FALSE(fs::exists(target));
  CHECK_THROWS_WITH(cache_export(dir.file("nothing.db?ro"), link), Catch::Contains("exists"));
  CHECK_FALSE(fs::exists(target));
  // A link to an existing file is followed as before.
  CacheDb::open(target, {})->put_binary(sample_record(1));
  CHECK(LayeredCache(link, false).get_binary(sample_record(1).digest).status == LookupStatus::hit);
}
