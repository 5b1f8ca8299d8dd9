// Hash-valid but unusable entries (random or truncated bytes, or an object that passes every check but does
// not load) with correct digests: quarantined by the runtime (skipped for the rest of the process, deleted
// from the writable layer, rebuilt once with JIT; a clear error naming the key and why with KTUNE_JIT=0), found
// by `cache verify` / `cache verify --load`, and passed over by the driver-only lookup for an older row.
#include <catch2/catch.hpp>

#include <random>

#include "binary_key.hpp"
#include "hardening_util.hpp"
#include "host_kernel_util.hpp"
#include "host/host_support.hpp"
#include "host_compiler.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "support/cache_file.hpp"

using namespace ktune;
using namespace ktune::hardening;

namespace {

GeneratedKernel times(int n) { return int_kernel("test_poison", "times_n", "*", "mul", n); }

int call(Runtime& rt, const GeneratedKernel& k, int x) {
  const LoadedKernel& lk = rt.get_host("poison/" + k.problem_key, [&] { return k; });
  REQUIRE(lk.functions.size() == 1);
  return reinterpret_cast<int (*)(int)>(lk.functions[0])(x);
}

// The three kinds of poison: bytes that are no object at all, a cut-off object, and an object whose symbol
// table is whole (so only loading can tell) but which is built for another machine.
std::vector<uint8_t> poisoned(const std::vector<uint8_t>& good, const std::string& kind) {
  std::vector<uint8_t> b = good;
  if (kind == "random") {
    std::mt19937 rng(7);
    for (auto& c : b) c = static_cast<uint8_t>(rng());
  } else if (kind == "truncated") {
    b.resize(b.size() / 2);
  } else {
    REQUIRE(b.size() > 20);
    b[18] = b[18] == 0x3e ? 0xb7 : 0x3e;  // e_machine: x86-64 <-> AArch64
    b[19] = 0;
  }
  return b;
}

}  // namespace

TEST_CASE("poison: an unloadable host object with correct digests is quarantined, deleted and rebuilt once",
          "[attack][poison][host]") {
  KTUNE_REQUIRE_HOST();
  for (const char* kind : {"random", "truncated", "foreign machine"}) {
    DYNAMIC_SECTION(kind) {
      TempDir dir;
      const GeneratedKernel k = times(3);
      auto poisoned_cache = [&](const std::string& db) {
        {
          Runtime rt(test::on_cache_file(db));
          CHECK(call(rt, k, 5) == 15);
        }
        forge_blob(db, host_digest(k), poisoned(raw_blob(db, host_digest(k)), kind));
      };
      const std::string strict_db = dir.file("strict.db"), db = dir.file("k.db");
      poisoned_cache(strict_db);
      // Random and cut-off bytes show in the symbol table; an object for another machine only when loaded.
      const bool static_check_sees_it = std::string(kind) != "foreign machine";
      CHECK(cache_verify(strict_db).size() == (static_check_sees_it ? 1u : 0u));
      const CacheLoadReport loads = cache_verify_loads(strict_db);
      if (!static_check_sees_it) {
        CHECK(loads.failed == 1);
        REQUIRE(loads.failures.size() == 1);
        CHECK(loads.failures[0].digest == host_digest(k));
      }

      // KTUNE_JIT=0: a clear error naming the key and why, on every call (never a crash, never a launch); the
      // poisoned row is deleted from the writable layer.
      {
        Runtime strict(test::on_cache_file(strict_db, false));
        for (int attempt = 0; attempt < 2; ++attempt) {
          try {
            call(strict, k, 5);
            FAIL("a poisoned entry was used");
          } catch (const Error& e) {
            CHECK(e.status() == Status::jit_disabled);
            CHECK_THAT(e.what(), Catch::Contains("test_poison/host/mul3") && Catch::Contains("quarantined"));
          }
        }
        CHECK(strict.stats().quarantined == 1);
      }
      CHECK(cache_list(strict_db).empty());

      // With JIT: quarantined, deleted from the writable layer, compiled once; the next process just loads.
      poisoned_cache(db);
      {
        Runtime rt(test::on_cache_file(db));
        CHECK(call(rt, k, 5) == 15);
        CHECK(call(rt, k, 6) == 18);
        CHECK(rt.stats().quarantined == 1);
        CHECK(rt.stats().compiles == 1);
      }
      CHECK(cache_verify(db).empty());
      CHECK(cache_verify_loads(db).failed == 0);
      Runtime after(test::on_cache_file(db, false));
      CHECK(call(after, k, 7) == 21);
      CHECK(after.stats().compiles == 0);
      CHECK(after.stats().quarantined == 0);
    }
  }
}

TEST_CASE("poison: a poisoned read-only layer is passed over for the writable layer's copy",
          "[attack][poison][host][layered]") {
  KTUNE_REQUIRE_HOST();
  TempDir dir;
  const std::string image = dir.file("image.db"), user = dir.file("user.db");
  const GeneratedKernel k = times(4);
  { Runtime rt(test::on_cache_file(image)); CHECK(call(rt, k, 2) == 8); }
  forge_blob(image, host_digest(k), poisoned(raw_blob(image, host_digest(k)), "foreign machine"));
  const auto image_bytes = read_bytes(image);
  const std::string path = image + "?ro:" + user;
  {
    Runtime rt(test::on_cache_file(path));
    CHECK(call(rt, k, 2) == 8);  // the image's copy fails to load: quarantined; compiled into user.db
    CHECK(rt.stats().quarantined == 1);
    CHECK(rt.stats().compiles == 1);
  }
  CHECK(read_bytes(image) == image_bytes);  // a read-only layer is never written, not even to delete poison
  Runtime again(test::on_cache_file(path, false));
  CHECK(call(again, k, 3) == 12);  // image first: quarantined again, then the user layer's copy
  CHECK(again.stats().compiles == 0);
}

TEST_CASE("poison: the driver-only lookup falls back to an older compiler's row when the newest is quarantined",
          "[attack][poison][layered]") {
  TempDir dir;
  const std::string db = dir.file("k.db");
  cache::BinaryRecord older = cache::test::sample_record(1, "12.8.93", "src");
  cache::BinaryRecord newer = cache::test::sample_record(2, "13.0.88", "src");
  older.created_at = 1000;
  newer.created_at = 2000;
  newer.source_digest = older.source_digest;
  newer.options = older.options;
  newer.family = older.family;
  {
    auto c = cache::CacheDb::open(db, {});
    c->put_binary(older);
    c->put_binary(newer);
  }
  cache::LayeredCache layered(db, false);
  auto find = [&] {
    return layered.find_binary_any_compiler_version(older.source_digest, older.arch, older.compiler, older.options,
                                                    older.ktune_version);
  };
  cache::BinaryLookup first = find();
  REQUIRE(first.status == cache::LookupStatus::hit);
  CHECK(first.record.compiler_version == "13.0.88");
  layered.quarantine(first.record.digest, first.record.blob_sha256, "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE");
  cache::BinaryLookup second = find();
  REQUIRE(second.status == cache::LookupStatus::hit);
  CHECK(second.record.compiler_version == "12.8.93");
  CHECK(layered.get_binary(newer.digest).status != cache::LookupStatus::hit);  // gone for this process
  layered.quarantine(second.record.digest, second.record.blob_sha256, "bad too");
  CHECK(find().status != cache::LookupStatus::hit);
}
