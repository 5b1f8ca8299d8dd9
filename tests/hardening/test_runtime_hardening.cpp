// The runtime over damaged, stale, foreign and untrusted cache files (real NVRTC, no GPU): bad entries are
// skipped and rebuilt, or a clear error with KTUNE_JIT=0; never loaded.
#include <catch2/catch.hpp>

#include <filesystem>

#include "binary_key.hpp"
#include "hardening_util.hpp"
#include "ktune/cache/signing.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/skip.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using namespace ktune::hardening;

namespace {

bool have_nvrtc() {
  std::string why;
  if (detail::try_nvrtc(&why)) return true;
  test::skip_or_fail("nvrtc", why);
  return false;
}

RuntimeOptions opts(const std::string& path, bool jit = true) {
  RuntimeOptions o;
  o.cache_path = path;
  o.allow_jit = jit;
  return o;
}

const Arch kArch = Arch::parse("sm_90a");

std::string digest_of(const GeneratedKernel& k, const Arch& a, const std::string& compiler_version) {
  return detail::derive_binary_key(k, a, "nvrtc", compiler_version, detail::nvrtc_options(k, a)).digest;
}

std::string jit_error(const std::string& path, const GeneratedKernel& k) {
  try {
    Runtime rt(opts(path, false));
    rt.ensure_binary(k, kArch);
  } catch (const Error& e) {
    CHECK(e.status() == Status::jit_disabled);
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("hardening runtime: damaged metadata is skipped and rebuilt, or a clear KTUNE_JIT=0 error",
          "[hardening][runtime]") {
  if (!have_nvrtc()) return;
  for (const char* edit : {"entry_points = 'ktune_test::other_kernel'", "arch = 'sm_80'", "compiler_version = '12.8.93'",
                           "options = replace(options, 'sm_90a', 'sm_80')"}) {
    DYNAMIC_SECTION(edit) {
      TempDir dir;
      const std::string db = dir.file("k.db");
      const GeneratedKernel k = test::scale_kernel(61);
      { Runtime(opts(db)).ensure_binary(k, kArch); }
      const std::string digest = digest_of(k, kArch, detail::nvrtc().version);
      raw_exec(db, std::string("UPDATE binaries SET ") + edit + " WHERE digest = '" + digest + "'");
      CHECK(cache_verify(db).size() == 1);

      const std::string msg = jit_error(db, k);
      CHECK_THAT(msg, Catch::Contains("KTUNE_JIT=0") && Catch::Contains("damaged") && Catch::Contains("s61.o0"));

      Runtime rt(opts(db));
      EnsureResult r = rt.ensure_binary(k, kArch);
      CHECK(r.compiled);  // rebuilt, not loaded
      CHECK(rt.stats().damaged_skipped == 1);
      CHECK(cache_verify(db).empty());  // the rebuilt entry replaced the damaged one
      Runtime again(opts(db, false));
      CHECK_FALSE(again.ensure_binary(k, kArch).compiled);
    }
  }
}

TEST_CASE("hardening runtime: a forged self-consistent row under the right digest is never loaded",
          "[hardening][runtime]") {
  if (!have_nvrtc()) return;
  TempDir dir;
  const std::string db = dir.file("k.db");
  const GeneratedKernel k = test::scale_kernel(62);
  { Runtime(opts(db)).ensure_binary(k, kArch); }
  const std::string digest = digest_of(k, kArch, detail::nvrtc().version);
  raw_exec(db, "UPDATE binaries SET source_digest = 'feed' WHERE digest = '" + digest + "'");
  reseal_binary_row(db, digest);
  CHECK(cache_verify(db).empty());  // consistent in itself: only the key check can tell
  CHECK_THAT(jit_error(db, k), Catch::Contains("column source_digest is 'feed'"));
  Runtime rt(opts(db));
  CHECK(rt.ensure_binary(k, kArch).compiled);
  CHECK(rt.stats().damaged_skipped == 1);
}

TEST_CASE("hardening runtime: entries from another NVRTC version or arch are a miss, never loaded",
          "[hardening][runtime]") {
  if (!have_nvrtc()) return;
  TempDir dir;
  const std::string db = dir.file("k.db");
  const GeneratedKernel k = test::scale_kernel(63);
  const std::string ours = detail::nvrtc().version;
  // What an older toolkit (and another arch) left in the cache: valid rows under their own keys, with a blob
  // that must never reach cuModuleLoadData on this toolkit.
  {
    auto c = cache::CacheDb::open(db, {});
    for (auto [version, arch] : {std::pair<std::string, std::string>{"12.8.93", "sm_90a"}, {ours, "sm_80"}}) {
      const Arch a = Arch::parse(arch);
      detail::BinaryKey key = detail::derive_binary_key(k, a, "nvrtc", version, detail::nvrtc_options(k, a));
      cache::BinaryRecord r;
      r.digest = key.digest;
      r.family = key.family;
      r.name = key.name;
      r.arch = key.arch;
      r.compiler = key.compiler;
      r.compiler_version = key.compiler_version;
      r.options = key.options;
      r.source_digest = key.source_digest;
      r.ktune_version = key.ktune_version;
      r.schema_version = key.format_version;
      r.entry_points = "stale";
      r.blob = std::vector<uint8_t>(512, 0xee);
      c->put_binary(r);
    }
  }
  CHECK_THAT(jit_error(db, k), Catch::Contains("is in no cache layer"));
  Runtime rt(opts(db));
  CHECK(rt.ensure_binary(k, kArch).compiled);
  CHECK(rt.stats().damaged_skipped == 0);
  CHECK(cache_list(db).size() == 3);
  // `ktune cache prune --stale-compiler` removes the older toolkit's entry.
  CHECK(cache_prune(db, true, false) == 1);
}

TEST_CASE("hardening runtime: unusable cache files are reported and the runtime keeps working",
          "[hardening][runtime]") {
  if (!have_nvrtc()) return;
  TempDir dir;
  const GeneratedKernel k = test::scale_kernel(64);
  SECTION("a non-SQLite file") { write_bytes(dir.file("k.db"), std::vector<char>(10000, '#')); }
  SECTION("a future schema") {
    { Runtime(opts(dir.file("k.db"))).ensure_binary(k, kArch); }
    raw_exec(dir.file("k.db"), "UPDATE meta SET value = '9' WHERE key = 'schema_version'");
  }
  SECTION("a truncated file") {
    {
      Runtime rt(opts(dir.file("full.db")));
      for (int i = 0; i < 4; ++i) rt.ensure_binary(test::scale_kernel(64 + i), kArch);
    }
    cache::CacheDb::open(dir.file("full.db"), {})->use_rollback_journal();
    auto bytes = read_bytes(dir.file("full.db"));
    write_bytes(dir.file("k.db"), std::vector<char>(bytes.begin(), bytes.begin() + bytes.size() / 3));
  }
  const std::string db = dir.file("k.db");
  const auto before = read_bytes(db);
  {
    Runtime rt(opts(db));
    bool reported = false;
    for (const auto& l : rt.cache_layers()) reported |= l.find("not used") != std::string::npos;
    EnsureResult r = rt.ensure_binary(k, kArch);
    if (!reported) {
      // A truncated file may still open (its first pages are whole): then the damage shows at the lookup.
      CHECK(!cache_verify(db).empty());
    }
    CHECK((r.compiled || !reported));
  }
  const std::string msg = jit_error(db, test::scale_kernel(99));
  CHECK_THAT(msg, Catch::Contains("KTUNE_JIT=0"));
  CHECK(read_bytes(db) == before);  // a file ktune cannot read is never rewritten by it
}

TEST_CASE("hardening runtime: KTUNE_TRUSTED_KEYS refuses unsigned and tampered image layers",
          "[hardening][runtime][signing]") {
  if (!have_nvrtc()) return;
  TempDir dir;
  const std::string work = dir.file("work.db"), image = dir.file("image.db"), user = dir.file("user.db");
  const GeneratedKernel k = test::scale_kernel(70);
  { Runtime(opts(work)).ensure_binary(k, kArch); }
  cache_export(work, image);
  const std::string key = dir.file("ship.key");
  const std::string key_id = cache_keygen(key, key + ".pub");
  CHECK(key_id.size() == 16);

  RuntimeOptions o = opts(image + "?ro:" + user, false);
  o.trusted_keys = key + ".pub";
  // Unsigned: refused, and the KTUNE_JIT=0 error says why.
  try {
    Runtime rt(o);
    rt.ensure_binary(k, kArch);
    FAIL("an unsigned layer was used");
  } catch (const Error& e) {
    CHECK(e.status() == Status::jit_disabled);
    CHECK_THAT(e.what(), Catch::Contains("refused") && Catch::Contains("unsigned") && Catch::Contains(image));
  }
  // Signed: served, no compile.
  CacheSignatureInfo info = cache_sign(image, key);
  CHECK(info.key_id == key_id);
  CHECK(info.binaries == 1);
  {
    Runtime rt(o);
    CHECK_FALSE(rt.ensure_binary(k, kArch).compiled);
    auto statuses = cache_verify_signatures(image, key + ".pub");
    REQUIRE(statuses.size() == 1);
    CHECK(statuses[0].valid);
  }
  // Tampered after signing (even with a consistent row digest): refused.
  const std::string digest = digest_of(k, kArch, detail::nvrtc().version);
  raw_exec(image, "UPDATE binaries SET compile_ms = 1 WHERE digest = '" + digest + "'");
  reseal_binary_row(image, digest);
  try {
    Runtime rt(o);
    rt.ensure_binary(k, kArch);
    FAIL("a tampered layer was used");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("refused") && Catch::Contains("invalid"));
  }
  CHECK_FALSE(cache_verify_signatures(image, key + ".pub")[0].valid);
  // A key file that cannot be read is an error at start-up, not a silently unprotected runtime.
  RuntimeOptions bad = o;
  bad.trusted_keys = dir.file("nope.pub");
  try {
    Runtime rt(bad);
    FAIL("started without its trusted key");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("KTUNE_TRUSTED_KEYS") && Catch::Contains("nope.pub"));
  }
}
