#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cache_test_util.hpp"
#include "ktune/cache/layered.hpp"
#include "support/env_guard.hpp"
#include "support/unprivileged.hpp"

using namespace ktune::cache;
using namespace ktune::cache::test;
using ktune::test::EnvGuard;
namespace fs = std::filesystem;

namespace {

// Builds a shipped-style image (exported, journal_mode=DELETE) holding records [first, first+n).
void make_image(const TempDir& dir, const std::string& out, int first, int n) {
  const std::string work = dir.file("work-" + std::to_string(first) + ".db");
  {
    auto db = CacheDb::open(work, {});
    for (int i = first; i < first + n; ++i) db->put_binary(sample_record(i));
    db->put_tuning(sample_tuning(first));
    db->export_to(out);
  }
  fs::remove(work);
}

}  // namespace

TEST_CASE("layered: new entries go to the writable layer, the read-only layer is untouched", "[cache][layered]") {
  TempDir dir;
  const std::string image = dir.file("image.db"), rw = dir.file("user/ktune.db");
  make_image(dir, image, 1, 3);
  const auto image_bytes = read_bytes(image);

  {
    LayeredCache cache(rw + ":" + image, false);
    auto layers = cache.layers();
    REQUIRE(layers.size() == 2);
    CHECK(layers[0].writable);
    CHECK(layers[0].note == "created");
    CHECK_FALSE(layers[1].writable);
    CHECK(layers[1].open);
    CHECK_THAT(layers[1].note, Catch::Contains("read-only"));
    REQUIRE(cache.writable_layer() != nullptr);
    CHECK(cache.writable_layer()->path() == rw);

    // Lookups find entries in the read-only layer.
    BinaryLookup l = cache.get_binary(sample_record(2).digest);
    REQUIRE(l.status == LookupStatus::hit);
    CHECK(l.record.blob == sample_record(2).blob);
    CHECK(cache.get_tuning("xqa_decode", sample_tuning(1).problem_key, sample_tuning(1).device_fingerprint));

    CHECK(cache.put_binary(sample_record(10)));
    cache.put_tuning(sample_tuning(10));
    CHECK(cache.get_binary(sample_record(10).digest).status == LookupStatus::hit);
    CHECK(cache.writable_layer()->counts().binaries == 1);
    CHECK(cache.get_binary("absent").status == LookupStatus::miss);
    CHECK(cache.damaged_seen() == 0);
  }
  CHECK(read_bytes(image) == image_bytes);
  CHECK_FALSE(fs::exists(image + "-wal"));
  CHECK(CacheDb::open(rw, {})->get_binary(sample_record(10).digest).status == LookupStatus::hit);
}

TEST_CASE("layered: an unwritable first layer is read, the next writable one is written", "[cache][layered]") {
  TempDir dir;
  fs::create_directories(dir.file("ro"));
  const std::string image = dir.file("ro/image.db"), rw = dir.file("rw.db");
  make_image(dir, image, 1, 2);
  fs::permissions(image, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
  const auto image_bytes = read_bytes(image);
  // Without root (as root, in a child that drops it: permissions bind nothing for root).
  const std::string failed = ktune::test::run_unprivileged(dir.path(), [&]() -> std::string {
    LayeredCache cache(image + ":" + rw + ":" + dir.file("ro/missing.db"), false);
    auto layers = cache.layers();
    if (layers.size() != 3) return "expected 3 layers, got " + std::to_string(layers.size());
    if (layers[0].writable || !layers[0].open) return "the unwritable image is not an open read-only layer";
    if (!layers[1].writable) return "the second layer is not writable";
    if (layers[2].open) return "a missing file in an unwritable directory was opened";
    if (!cache.put_binary(sample_record(5))) return "the put was not stored";
    if (cache.get_binary(sample_record(1).digest).status != LookupStatus::hit) return "the image's row was not read";
    return "";
  });
  CHECK(read_bytes(image) == image_bytes);
  if (!ktune::test::check_unprivileged(failed)) return;
  CHECK(CacheDb::open(rw, {})->get_binary(sample_record(5).digest).status == LookupStatus::hit);
}

TEST_CASE("layered: a damaged entry in the first layer is skipped for an intact copy", "[cache][layered]") {
  TempDir dir;
  const std::string first = dir.file("a.db"), second = dir.file("b.db");
  BinaryRecord r = sample_record(3);
  CacheDb::open(first, {})->put_binary(r);
  CacheDb::open(second, {})->put_binary(r);
  std::vector<uint8_t> bad = r.blob;
  bad[7] ^= 0xff;
  raw_exec(first, "UPDATE binaries SET blob = ?1 WHERE digest = '" + r.digest + "'", &bad);

  // Only damaged copies: damaged, without a blob.
  LayeredCache only_first(first, false);
  BinaryLookup l = only_first.get_binary(r.digest);
  CHECK(l.status == LookupStatus::damaged);
  CHECK(l.record.blob.empty());
  CHECK(only_first.damaged_seen() == 1);
  CHECK(l.damaged_skipped == 1);

  LayeredCache cache(first + ":" + second, false);
  CHECK(cache.writable_layer()->path() == first);
  l = cache.get_binary(r.digest);
  REQUIRE(l.status == LookupStatus::hit);
  CHECK(l.record.blob == r.blob);
  CHECK_THAT(l.detail, Catch::StartsWith(first) && Catch::Contains("damaged") && Catch::Contains(r.digest) &&
             Catch::Contains("repaired"));
  CHECK(l.damaged_skipped == 1);
  CHECK(cache.damaged_seen() == 1);

  // The intact copy was written back over the damaged one in the writable layer.
  CHECK(only_first.get_binary(r.digest).status == LookupStatus::hit);
  CHECK(cache.get_binary(r.digest).detail.empty());
  CHECK(cache.get_binary(r.digest).damaged_skipped == 0);
  CHECK(cache.damaged_seen() == 1);
  CHECK_FALSE(cache.put_binary(r));
}

TEST_CASE("layered: a lookup counts only the damage it met, whatever other threads' lookups meet",
          "[cache][layered]") {
  // The runtime warns about damage per kernel from this count: a lookup of an intact key running beside lookups
  // of a damaged one must not report their damage as its own.
  TempDir dir;
  const std::string path = dir.file("a.db");
  const BinaryRecord damaged = sample_record(4), intact = sample_record(5);
  CacheDb::open(path, {})->put_binary(damaged);
  CacheDb::open(path, {})->put_binary(intact);
  std::vector<uint8_t> bad = damaged.blob;
  bad[3] ^= 0x10;
  raw_exec(path, "UPDATE binaries SET blob = ?1 WHERE digest = '" + damaged.digest + "'", &bad);
  LayeredCache cache(path, /*force_read_only=*/true);

  constexpr int kLookups = 200;
  std::atomic<int> damaged_reports{0}, intact_reports{0};
  std::thread of_damaged([&] {
    for (int i = 0; i < kLookups; ++i)
      damaged_reports += cache.get_binary(damaged.digest).damaged_skipped == 1 ? 1 : 0;
  });
  for (int i = 0; i < kLookups; ++i) {
    const BinaryLookup l = cache.get_binary(intact.digest);
    intact_reports += (l.status == LookupStatus::hit && l.damaged_skipped == 0 && l.detail.empty()) ? 1 : 0;
  }
  of_damaged.join();
  CHECK(damaged_reports == kLookups);
  CHECK(intact_reports == kLookups);
  CHECK(cache.damaged_seen() == kLookups);
}

TEST_CASE("layered: a tuning row of another ktune version is passed over for one of the asked version",
          "[cache][layered]") {
  TempDir dir;
  const std::string image = dir.file("image.db"), rw = dir.file("rw.db");
  TuningRecord current = sample_tuning(4), old = sample_tuning(4);
  current.ktune_version = "0.2.0";
  old.ktune_version = "0.1.0";
  old.winner_config = "t32.s1.w1";
  CacheDb::open(image, {})->put_tuning(current);
  CacheDb::open(rw, {})->put_tuning(old);  // the first layer: a user's cache tuned by the previous release
  LayeredCache cache(rw + ":" + image, false);
  const auto& k = current;
  auto got = cache.get_tuning(k.family, k.problem_key, k.device_fingerprint, "0.2.0");
  REQUIRE(got);
  CHECK(got->winner_config == current.winner_config);
  got = cache.get_tuning(k.family, k.problem_key, k.device_fingerprint, "0.1.0");
  REQUIRE(got);
  CHECK(got->winner_config == "t32.s1.w1");
  std::string other;
  CHECK_FALSE(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint, "0.3.0", &other));
  CHECK(other == "0.1.0");  // the first row passed over: the first layer's
  other.clear();
  REQUIRE(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint, "0.2.0", &other));
  CHECK(other == "0.1.0");
  got = cache.get_tuning(k.family, k.problem_key, k.device_fingerprint);  // any version: the first layer's
  REQUIRE(got);
  CHECK(got->ktune_version == "0.1.0");
  CHECK(cache.damaged_seen() == 0);  // stale is not damaged
}

TEST_CASE("layered: the writable layer's tuning row stands over a read-only image's, whatever the order",
          "[cache][layered]") {
  // An image ahead of the user's cache in the search path (the documented `base.db?ro:user.db`): a key the user
  // tuned again on this machine runs the user's winner, not the shipped one.
  TempDir dir;
  const std::string image = dir.file("image.db"), user = dir.file("user.db");
  TuningRecord shipped = sample_tuning(4), mine = sample_tuning(4);
  mine.winner_config = "t32.s1.w1";
  CacheDb::open(image, {})->put_tuning(shipped);
  {
    LayeredCache cache(image + "?ro:" + user, false);
    const auto& k = shipped;
    REQUIRE(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint));
    CHECK(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint)->winner_config == shipped.winner_config);
    cache.put_tuning(mine);  // into user.db, the writable layer
    REQUIRE(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint));
    CHECK(cache.get_tuning(k.family, k.problem_key, k.device_fingerprint)->winner_config == "t32.s1.w1");
  }
  // A read-only process of the same search path (a replay, KTUNE_CACHE_READONLY=1) runs the same row: the layer a
  // writable process would write still comes first.
  LayeredCache read_only_mode(image + "?ro:" + user, true);
  REQUIRE(read_only_mode.get_tuning(shipped.family, shipped.problem_key, shipped.device_fingerprint));
  CHECK(read_only_mode.get_tuning(shipped.family, shipped.problem_key, shipped.device_fingerprint)->winner_config ==
        "t32.s1.w1");
  CHECK(read_only_mode.tuning_first_layer() == user);
  // Layers marked ?ro keep their order among themselves.
  LayeredCache ro(user + "?ro:" + image + "?ro", true);
  CHECK(ro.get_tuning(shipped.family, shipped.problem_key, shipped.device_fingerprint)->winner_config == "t32.s1.w1");
}

TEST_CASE("layered: read-only mode and unusable layers", "[cache][layered]") {
  TempDir dir;
  const std::string db = dir.file("a.db");
  CacheDb::open(db, {})->put_binary(sample_record(1));
  write_bytes(dir.file("junk.db"), std::vector<char>(300, 'j'));
  write_bytes(dir.file("plainfile"), {'x'});
  const std::string path = ":" + dir.file("junk.db") + "::" + dir.file("plainfile/sub.db") + ":" + db;

  LayeredCache ro(path, true);
  auto layers = ro.layers();
  REQUIRE(layers.size() == 3);  // empty entries ignored
  CHECK_FALSE(layers[0].open);
  CHECK_THAT(layers[0].note, Catch::Contains("not an SQLite database"));
  CHECK_FALSE(layers[1].open);
  CHECK_FALSE(layers[1].present);
  CHECK(layers[2].open);
  CHECK_FALSE(layers[2].writable);
  CHECK(ro.writable_layer() == nullptr);
  CHECK(ro.get_binary(sample_record(1).digest).status == LookupStatus::hit);
  CHECK_THROWS_WITH(ro.put_binary(sample_record(2)), Catch::Contains("no writable cache layer in KTUNE_CACHE=" + path));
  CHECK_THROWS_WITH(ro.put_tuning(sample_tuning(2)), Catch::Contains("no writable cache layer"));

  // Not read-only: a missing file under a regular file cannot be created and is skipped; the db is writable.
  LayeredCache rw(dir.file("plainfile/sub.db") + ":" + db, false);
  CHECK_FALSE(rw.layers()[0].open);
  CHECK_THAT(rw.layers()[0].note, Catch::Contains("skipped"));
  REQUIRE(rw.writable_layer() != nullptr);
  CHECK(rw.writable_layer()->path() == db);
}

TEST_CASE("layered: search path defaults and '~' expansion", "[cache][layered]") {
  TempDir dir;
  EnvGuard home("HOME", dir.path().c_str());
  EnvGuard xdg("XDG_CACHE_HOME", nullptr);
  {
    EnvGuard env("KTUNE_CACHE", nullptr);
    CHECK(LayeredCache::default_search_path() == dir.path().string() + "/.cache/ktune/ktune.db");
  }
  {
    EnvGuard env("KTUNE_CACHE", "/x/a.db:/y/b.db");
    CHECK(LayeredCache::default_search_path() == "/x/a.db:/y/b.db");
  }
  LayeredCache cache("~/.cache/ktune/ktune.db", false);
  REQUIRE(cache.layers().size() == 1);
  CHECK(cache.layers()[0].path == dir.path().string() + "/.cache/ktune/ktune.db");
  CHECK(cache.layers()[0].writable);
  CHECK(fs::exists(dir.path() / ".cache/ktune/ktune.db"));
}

TEST_CASE("layered: the default cache honours an absolute $XDG_CACHE_HOME", "[cache][layered]") {
  TempDir dir;
  EnvGuard home("HOME", dir.file("home").c_str());
  EnvGuard env("KTUNE_CACHE", nullptr);
  {
    EnvGuard xdg("XDG_CACHE_HOME", dir.file("xdg").c_str());
    CHECK(LayeredCache::default_search_path() == dir.file("xdg") + "/ktune/ktune.db");
  }
  {
    EnvGuard xdg("XDG_CACHE_HOME", "relative/cache");  // not absolute: ignored, as the XDG spec says
    CHECK(LayeredCache::default_search_path() == dir.file("home") + "/.cache/ktune/ktune.db");
  }
  {
    EnvGuard xdg("XDG_CACHE_HOME", "");
    CHECK(LayeredCache::default_search_path() == dir.file("home") + "/.cache/ktune/ktune.db");
  }
  {
    EnvGuard xdg("XDG_CACHE_HOME", dir.file("xdg").c_str());
    EnvGuard explicit_path("KTUNE_CACHE", "/x/a.db");  // KTUNE_CACHE still wins
    CHECK(LayeredCache::default_search_path() == "/x/a.db");
  }
}

TEST_CASE("layered: many threads at once", "[cache][layered][concurrency]") {
  TempDir dir;
  const std::string image = dir.file("image.db");
  make_image(dir, image, 0, 4);
  LayeredCache cache(dir.file("rw.db") + ":" + image, false);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < 50; ++j) {
        const int id = 1000 + t * 100 + j;
        BinaryRecord r = sample_record(id);
        r.blob.resize(64);
        if (!cache.put_binary(r)) ++failures;
        if (cache.get_binary(r.digest).status != LookupStatus::hit) ++failures;
        if (cache.get_binary(sample_record(j % 4).digest).status != LookupStatus::hit) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(cache.writable_layer()->counts().binaries == 300);
}
