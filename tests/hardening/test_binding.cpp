// A loaded binary is bound to the key it was asked for: a valid blob of another config of the same family,
// filed under a row with its sha, size and row digest recomputed (none is a secret), is detected by
// `cache verify` (its symbol table lacks the row's binding symbol) and by the runtime (it lacks the key's
// binding symbol), skipped and rebuilt -- never served. Host objects end to end (LLVM backend); CUBINs by
// their symbol table (NVRTC, no GPU).
#include <catch2/catch.hpp>

#include <unordered_set>

#include "binary_key.hpp"
#include "elf_symbols.hpp"
#include "hardening_util.hpp"
#include "host_kernel_util.hpp"
#include "host/host_support.hpp"
#include "host_compiler.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/cache_file.hpp"
#include "support/skip.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using namespace ktune::hardening;

namespace {

GeneratedKernel adder(int n) { return int_kernel("test_bind", "add_one", "+", "add", n); }

std::unordered_set<std::string> symbols_of(const std::vector<uint8_t>& blob) {
  std::unordered_set<std::string> names;
  std::string why;
  REQUIRE(detail::elf_defined_symbols(blob.data(), blob.size(), &names, &why));
  return names;
}

}  // namespace

TEST_CASE("binding: the binding symbol names every key input but the compiler version",
          "[attack][tamper][binding]") {
  const GeneratedKernel k = test::scale_kernel(3);
  const Arch a = Arch::parse("sm_90a");
  const auto opts90 = detail::nvrtc_options(k, a);
  const auto base = detail::derive_binary_key(k, a, "nvrtc", "13.0.88", opts90);
  CHECK_THAT(base.binding_symbol, Catch::StartsWith("ktune_bind_"));
  CHECK(base.binding_symbol.size() == 11 + 32);
  // Another NVRTC compiles the same kernel: same symbol (the driver-only lookup does not know the version).
  CHECK(detail::derive_binary_key(k, a, "nvrtc", "12.8.93", opts90).binding_symbol == base.binding_symbol);
  // Another config, arch or option: another symbol.
  CHECK(detail::derive_binary_key(test::scale_kernel(4), a, "nvrtc", "13.0.88", opts90).binding_symbol !=
        base.binding_symbol);
  const Arch b = Arch::parse("sm_100a");
  CHECK(detail::derive_binary_key(k, b, "nvrtc", "13.0.88", detail::nvrtc_options(k, b)).binding_symbol !=
        base.binding_symbol);
  auto more = opts90;
  more.push_back("-DX=1");
  CHECK(detail::derive_binary_key(k, a, "nvrtc", "13.0.88", more).binding_symbol != base.binding_symbol);
  // The source every front compiles carries it, once, whatever the family.
  const GeneratedKernel bound = detail::bound_kernel(k, base, false);
  CHECK(bound.source.find(base.binding_symbol) != std::string::npos);
  CHECK(bound.source.find("__device__") != std::string::npos);
}

TEST_CASE("binding: a CUBIN defines its key's binding symbol, and a swapped CUBIN is rebuilt, not served",
          "[attack][tamper][binding][runtime]") {
  KTUNE_REQUIRE_NVRTC();
  TempDir dir;
  const std::string db = dir.file("k.db");
  const Arch a = Arch::parse("sm_90a");
  const GeneratedKernel k3 = test::scale_kernel(3), k5 = test::scale_kernel(5);
  const auto key3 = detail::derive_binary_key(k3, a, "nvrtc", detail::nvrtc().version, detail::nvrtc_options(k3, a));
  const auto key5 = detail::derive_binary_key(k5, a, "nvrtc", detail::nvrtc().version, detail::nvrtc_options(k5, a));
  {
    Runtime rt(test::on_cache_file(db));
    rt.ensure_binary(k3, a);
    rt.ensure_binary(k5, a);
  }
  const std::vector<uint8_t> blob3 = raw_blob(db, key3.digest), blob5 = raw_blob(db, key5.digest);
  CHECK(symbols_of(blob3).count(key3.binding_symbol) == 1);
  CHECK(symbols_of(blob3).count(key5.binding_symbol) == 0);
  CHECK_THAT(raw_text(db, "SELECT entry_points FROM binaries WHERE digest = '" + key3.digest + "'"),
             Catch::EndsWith("\n" + key3.binding_symbol));
  CHECK(cache_verify(db).empty());

  // The same entry-point name in both: only the binding tells them apart.
  forge_blob(db, key3.digest, blob5);
  const auto issues = cache_verify(db);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].digest == key3.digest);
  CHECK_THAT(issues[0].problem, Catch::Contains("binding symbol"));

  const std::vector<uint8_t> forged = raw_blob(db, key3.digest);
  {
    Runtime rt(test::on_cache_file(db));
    CHECK(rt.ensure_binary(k3, a).compiled);  // rebuilt, and the swapped row replaced
    CHECK(rt.stats().quarantined == 1);
  }
  CHECK(cache_verify(db).empty());
  CHECK(raw_blob(db, key3.digest) == blob3);

  // KTUNE_JIT=0: an error naming the key and why; the swapped row is deleted from the writable layer.
  forge_blob(db, key3.digest, forged);
  Runtime strict(test::on_cache_file(db, false));
  try {
    strict.ensure_binary(k3, a);
    FAIL("a swapped CUBIN was served");
  } catch (const Error& e) {
    CHECK(e.status() == Status::jit_disabled);
    CHECK_THAT(e.what(), Catch::Contains(key3.name) && Catch::Contains("binding symbol"));
  }
  CHECK(strict.stats().quarantined == 1);
  CHECK(cache_list(db).size() == 1);
}

TEST_CASE("binding: a host object of another config under a row is never run", "[attack][tamper][binding][host]") {
  KTUNE_REQUIRE_HOST();
  TempDir dir;
  const GeneratedKernel one = adder(1), two = adder(2);
  // Both configs compiled, then one's row given two's object (same entry point `add_one`, returns x + 2).
  auto swapped_cache = [&](const std::string& db) {
    {
      Runtime rt(test::on_cache_file(db));
      rt.ensure_binary(one, Arch::host_cpu());
      rt.ensure_binary(two, Arch::host_cpu());
    }
    forge_blob(db, host_digest(one), raw_blob(db, host_digest(two)));
  };
  const std::string strict_db = dir.file("strict.db"), db = dir.file("k.db");
  swapped_cache(strict_db);
  const auto issues = cache_verify(strict_db);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].digest == host_digest(one));
  CHECK_THAT(issues[0].problem, Catch::Contains("binding symbol"));
  const CacheLoadReport loads = cache_verify_loads(strict_db);
  CHECK(loads.loaded == 1);
  CHECK(loads.failed == 1);
  {
    Runtime strict(test::on_cache_file(strict_db, false));
    try {
      strict.get_host("bind/one", [&] { return one; });
      FAIL("a swapped host object was served");
    } catch (const Error& e) {
      CHECK(e.status() == Status::jit_disabled);
      CHECK_THAT(e.what(), Catch::Contains("test_bind/host/add1") && Catch::Contains("binding symbol"));
    }
    CHECK(strict.stats().quarantined == 1);
  }
  CHECK(cache_list(strict_db).size() == 1);  // the swapped row is deleted from the writable layer

  swapped_cache(db);
  {
    Runtime rt(test::on_cache_file(db));
    const LoadedKernel& lk = rt.get_host("bind/one", [&] { return one; });
    REQUIRE(lk.functions.size() == 1);
    CHECK(reinterpret_cast<int (*)(int)>(lk.functions[0])(41) == 42);
    CHECK(rt.stats().compiles == 1);
    CHECK(rt.stats().quarantined == 1);
  }
  CHECK(cache_verify(db).empty());

  // A row that lists the other key's binding symbol (its entry points rewritten too) fails at the runtime,
  // which knows the symbol its key expects.
  forge_blob(db, host_digest(one), raw_blob(db, host_digest(two)));
  raw_exec(db, "UPDATE binaries SET entry_points = (SELECT entry_points FROM binaries WHERE digest = '" +
                   host_digest(two) + "') WHERE digest = '" + host_digest(one) + "'");
  reseal_binary_row(db, host_digest(one));
  CHECK(cache_verify(db).empty());  // consistent in itself: only the key can tell
  Runtime again(test::on_cache_file(db));
  const LoadedKernel& lk2 = again.get_host("bind/one", [&] { return one; });
  CHECK(reinterpret_cast<int (*)(int)>(lk2.functions[0])(41) == 42);
  CHECK(again.stats().quarantined == 1);
}
