// Trusted keys on every layer, whatever its path suffix or permissions: nothing is served that neither a
// trusted key signed nor this process stored itself; signed files are never migrated or written; an empty or
// unreadable KTUNE_TRUSTED_KEYS stops the runtime; `cache merge --pubkey` refuses unsigned sources.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "hardening_util.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "support/env_guard.hpp"
#include "support/skip.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;

namespace {

LayeredOptions trusting(const Keys& k) {
  LayeredOptions lo;
  lo.trusted_keys = {read_public_key(k.pub)};
  return lo;
}

// What an attacker with write access does to a signed export that sits at a path without "?ro": the
// signature rows are deleted, so the file no longer counts as signed and becomes the writable layer.
std::string unsigned_copy(const TempDir& dir, const Keys& k, const std::string& name) {
  const std::string path = signed_image(dir, name, &k);
  raw_exec(path, "DELETE FROM signatures");
  return path;
}

// Swaps a binary's blob for another with its sha256 and row digest recomputed: self-consistent, and evil.
std::vector<uint8_t> swap_blob(const std::string& path, const std::string& digest) {
  std::vector<uint8_t> evil(700, 0xcc);
  raw_exec(path, "UPDATE binaries SET blob = ?1, blob_size = 700 WHERE digest = '" + digest + "'", &evil);
  raw_exec(path, "UPDATE binaries SET blob_sha256 = '" + sha256_hex(evil.data(), evil.size()) +
                     "' WHERE digest = '" + digest + "'");
  reseal_binary_row(path, digest);
  return evil;
}

}  // namespace

TEST_CASE("trust: a writable layer under trusted keys serves only what this process stored",
          "[attack][trust][hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string path = unsigned_copy(dir, k, "user.db");
  LayeredCache layered(path, trusting(k));
  auto layers = layered.layers();
  REQUIRE(layers.size() == 1);
  REQUIRE(layers[0].writable);  // unsigned, no "?ro", writable by this user
  CHECK_THAT(layers[0].note, Catch::Contains("6 binaries and 2 tuning rows already in it are not used"));

  // The rows that were in the file are never served, intact as they are.
  for (int i = 0; i < 6; ++i) {
    BinaryLookup l = layered.get_binary(sample_record(i).digest);
    CHECK(l.status == LookupStatus::miss);
    CHECK(l.record.blob.empty());
  }
  const TuningRecord t1 = sample_tuning(1);
  CHECK_FALSE(layered.get_tuning(t1.family, t1.problem_key, t1.device_fingerprint));
  const BinaryRecord r0 = sample_record(0);
  CHECK(layered.find_binary_any_compiler_version(r0.source_digest, r0.arch, r0.compiler, r0.options,
                                                 r0.ktune_version)
            .status == LookupStatus::miss);
  CHECK(layered.damaged_seen() == 0);  // other writers' rows are not reported as damage

  // What this process stores is served.
  CHECK(layered.put_binary(sample_record(30)));
  BinaryLookup own = layered.get_binary(sample_record(30).digest);
  CHECK(own.status == LookupStatus::hit);
  CHECK(own.record.blob == sample_record(30).blob);
  layered.put_tuning(sample_tuning(7));
  CHECK(layered.get_tuning("xqa_decode", sample_tuning(7).problem_key, sample_tuning(7).device_fingerprint));

  // A row another process writes into the same file meanwhile is not served, nor is a tuning row it
  // overwrites; the file itself keeps both (they are only not trusted here).
  {
    auto other = CacheDb::open(path, {});
    other->put_binary(sample_record(31));
    TuningRecord t = sample_tuning(7);
    t.winner_config = "t16.s1.w1";
    t.tuned_at = 5000;
    other->put_tuning(t);
  }
  CHECK(layered.get_binary(sample_record(31).digest).status == LookupStatus::miss);
  CHECK_FALSE(layered.get_tuning("xqa_decode", sample_tuning(7).problem_key, sample_tuning(7).device_fingerprint));
  // Putting what another process already stored keeps its intact row (it is not damage to repair).
  CHECK_FALSE(layered.put_binary(sample_record(31)));
  CHECK(layered.get_binary(sample_record(31).digest).status == LookupStatus::miss);

  // Without trusted keys the same file serves everything (the unsigned trust model: write access = trust).
  LayeredCache plain(path, false);
  CHECK(plain.get_binary(sample_record(1).digest).status == LookupStatus::hit);
}

TEST_CASE("trust: a writable layer whose sizes cannot be summed still opens under trusted keys",
          "[attack][trust][hardening][signing]") {
  // Two rows claiming INT64_MAX bytes: a SQL sum() would overflow. The layer is served nothing it holds anyway, so
  // the count for its note must not stop the runtime; without trusted keys such a file opens too.
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string path = unsigned_copy(dir, k, "user.db");
  raw_exec(path, "UPDATE binaries SET blob_size = 9223372036854775807 WHERE rowid IN (SELECT rowid FROM binaries "
                 "LIMIT 2)");
  LayeredCache layered(path, trusting(k));
  auto layers = layered.layers();
  REQUIRE(layers.size() == 1);
  CHECK(layers[0].writable);
  CHECK_THAT(layers[0].note, Catch::Contains("only entries this process stores are served"));
  CHECK(layered.put_binary(sample_record(30)));
  CHECK(layered.get_binary(sample_record(30).digest).status == LookupStatus::hit);
  const auto summary = cache_layers(path);
  REQUIRE(summary.size() == 1);
  CHECK(summary[0].binaries == 7);
}

TEST_CASE("trust: a swapped blob in an unsigned writable layer is never served under trusted keys",
          "[attack][trust][hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string path = unsigned_copy(dir, k, "user.db");
  const std::string digest = sample_record(2).digest;
  const std::vector<uint8_t> evil = swap_blob(path, digest);
  {
    LayeredCache plain(path, false);  // the forgery is self-consistent: without trust it is a hit
    REQUIRE(plain.get_binary(digest).record.blob == evil);
  }
  for (const std::string& spelled : {path, path + "?ro"}) {
    INFO(spelled);
    LayeredCache layered(spelled, trusting(k));
    BinaryLookup l = layered.get_binary(digest);
    CHECK(l.status != LookupStatus::hit);
    CHECK(l.record.blob.empty());
  }
}

TEST_CASE("trust: a signed file relabelled as schema v1 is never migrated, written or served",
          "[attack][trust][tamper][hardening][signing][migration]") {
  TempDir dir;
  Keys k = make_keys(dir, "k");
  const std::string path = signed_image(dir, "image.db", &k);
  raw_exec(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version'");
  const std::string before = file_sha256(path);

  for (bool trust : {true, false}) {
    INFO("trusted keys: " << trust);
    LayeredOptions lo = trust ? trusting(k) : LayeredOptions{};
    LayeredCache layered(path + ":" + dir.file("user.db"), lo);
    auto layers = layered.layers();
    REQUIRE(layers.size() == 2);
    CHECK_FALSE(layers[0].writable);
    CHECK_FALSE(layers[0].open);
    CHECK(layers[0].refused);
    CHECK_THAT(layers[0].note, Catch::Contains("carries signatures"));
    CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::miss);
    CHECK(file_sha256(path) == before);
  }
  CHECK_THROWS_WITH(CacheDb::open(path, {}), Catch::Contains("refusing to migrate"));
  OpenOptions allow;
  allow.allow_signed = true;  // not even a signer may migrate it
  CHECK_THROWS_WITH(CacheDb::open(path, allow), Catch::Contains("refusing to migrate"));
  CHECK(file_sha256(path) == before);
  CHECK(raw_text(path, "PRAGMA journal_mode") == "delete");
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST_CASE("trust: a signed file at a writable path is used read-only and verified, never written",
          "[attack][trust][hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k"), other = make_keys(dir, "other");
  const std::string path = signed_image(dir, "image.db", &k);
  const std::string before = file_sha256(path);
  CHECK_THROWS_AS(CacheDb::open(path, {}), SignedCacheError);
  {
    LayeredCache layered(path + ":" + dir.file("user.db"), trusting(k));
    auto layers = layered.layers();
    CHECK_FALSE(layers[0].writable);
    CHECK_THAT(layers[0].signature, Catch::Contains("signed by trusted key"));
    CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::hit);
    CHECK(layers[1].writable);
  }
  {
    LayeredCache layered(path + ":" + dir.file("user.db"), trusting(other));
    CHECK(layered.layers()[0].refused);
    CHECK(layered.get_binary(sample_record(1).digest).status == LookupStatus::miss);
  }
  CHECK(file_sha256(path) == before);
}

TEST_CASE("trust: KTUNE_TRUSTED_KEYS set but empty, or unreadable, is an error at runtime creation",
          "[attack][trust][hardening][runtime]") {
  TempDir dir;
  for (const char* value : {"", ":", " , "}) {
    INFO("KTUNE_TRUSTED_KEYS='" << value << "'");
    RuntimeOptions o = [value] {  // the variable is set only while the options are read
      ktune::test::EnvGuard env("KTUNE_TRUSTED_KEYS", value);
      return RuntimeOptions::from_env();
    }();
    o.cache_path = dir.file("user.db");
    if (std::string(value) == " , ") {
      // A name that is only blanks is a file that does not exist.
      CHECK_THROWS_AS(Runtime(o), Error);
      continue;
    }
    try {
      Runtime rt(o);
      FAIL("a runtime started with KTUNE_TRUSTED_KEYS set to no key at all");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("KTUNE_TRUSTED_KEYS") && Catch::Contains("names no key file"));
    }
  }
  RuntimeOptions missing;
  missing.cache_path = dir.file("user.db");
  missing.trusted_keys = dir.file("nope.pub");
  CHECK_THROWS_WITH(Runtime(missing), Catch::Contains("KTUNE_TRUSTED_KEYS") && Catch::Contains("nope.pub"));
  RuntimeOptions unset;  // unset: no checks, and no error
  unset.cache_path = dir.file("user.db");
  CHECK_NOTHROW(Runtime(unset));
}

TEST_CASE("trust: cache merge --pubkey imports only a source validly signed by a given key",
          "[attack][trust][cli][hardening][signing]") {
  TempDir dir;
  Keys k = make_keys(dir, "k"), other = make_keys(dir, "other");
  const std::string user = dir.file("user.db");
  const std::string unsigned_src = signed_image(dir, "plain.db", nullptr);
  const std::string tampered = signed_image(dir, "tampered.db", &k);
  swap_blob(tampered, sample_record(2).digest);
  const std::string good = signed_image(dir, "good.db", &k);

  const auto refuses = [&](const std::string& src, const std::string& keys, const char* why) {
    INFO(src << " with " << keys);
    try {
      cache_merge(user, src, keys);
      FAIL("merged");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains(src) && Catch::Contains(why));
    }
    if (std::filesystem::exists(user)) CHECK(CacheDb::open(user, {})->counts().binaries == 0);
  };
  refuses(unsigned_src, k.pub, "unsigned");
  refuses(good, other.pub, "untrusted");
  refuses(tampered, k.pub, "invalid");
  refuses(good, "", "names no public key file");

  CacheMergeSummary m = cache_merge(user, good, other.pub + ":" + k.pub);
  CHECK(m.binaries_added == 6);
  CHECK(m.tuning_added == 2);
  CHECK(m.damaged_skipped == 0);
  // Without --pubkey the unsigned source is imported as before.
  CHECK(cache_merge(dir.file("second.db"), unsigned_src).binaries_added == 6);
}

TEST_CASE("trust: the runtime loads nothing from an unsigned file at a writable path under trusted keys",
          "[attack][trust][hardening][runtime]") {
  KTUNE_REQUIRE_NVRTC();
  TempDir dir;
  const std::string work = dir.file("work.db"), image = dir.file("image.db");
  const GeneratedKernel kernel = ktune::test::scale_kernel(71);
  const Arch arch = Arch::parse("sm_90a");
  {
    RuntimeOptions o;
    o.cache_path = work;
    Runtime(o).ensure_binary(kernel, arch);
  }
  cache_export(work, image);
  const std::string key = dir.file("ship.key");
  cache_keygen(key, key + ".pub");
  cache_sign(image, key);
  raw_exec(image, "DELETE FROM signatures");  // now unsigned, at a path without ?ro that this user can write

  RuntimeOptions o;
  o.cache_path = image;
  o.allow_jit = false;
  o.trusted_keys = key + ".pub";
  Runtime rt(o);
  try {
    rt.ensure_binary(kernel, arch);
    FAIL("a binary from an unsigned writable layer was used under KTUNE_TRUSTED_KEYS");
  } catch (const Error& e) {
    CHECK(e.status() == Status::jit_disabled);
  }
  CHECK(rt.stats().cache_hits == 0);
}

TEST_CASE("trust: cache verify --load loads nothing from a layer the runtime refuses under trusted keys",
          "[attack][trust][hardening]") {
  KTUNE_REQUIRE_NVRTC();
  TempDir dir;
  const std::string image = dir.file("image.db");
  {
    RuntimeOptions o;
    o.cache_path = image;
    Runtime(o).ensure_binary(ktune::test::scale_kernel(72), Arch::parse("sm_90a"));
  }
  const std::string key = dir.file("ship.key");
  cache_keygen(key, key + ".pub");
  {
    ktune::test::EnvGuard trust("KTUNE_TRUSTED_KEYS", (key + ".pub").c_str());
    const CacheLoadReport unsigned_report = cache_verify_loads(image + "?ro");
    REQUIRE(unsigned_report.refused_layers.size() == 1);
    CHECK_THAT(unsigned_report.refused_layers[0], Catch::Contains("unsigned"));
    CHECK(unsigned_report.loaded + unsigned_report.failed + unsigned_report.not_loadable_here == 0);
    cache_sign(image, key);
    const CacheLoadReport signed_report = cache_verify_loads(image + "?ro");
    CHECK(signed_report.refused_layers.empty());
    CHECK(signed_report.loaded + signed_report.failed + signed_report.not_loadable_here == 1);
  }
  // Without trusted keys nothing is refused.
  ktune::test::EnvGuard no_trust("KTUNE_TRUSTED_KEYS", nullptr);
  CHECK(cache_verify_loads(image).refused_layers.empty());
}
