// The runtime over real NVRTC and a real cache file (no GPU needed).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "support/sqlite_poke.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/test_kernels.hpp"
#include "support/unprivileged.hpp"

using namespace ktune;

namespace {

RuntimeOptions opts_for(const std::string& path) {
  RuntimeOptions o;
  o.cache_path = path;
  return o;
}

bool have_nvrtc() {
  std::string why;
  if (detail::try_nvrtc(&why)) return true;
  test::skip_or_fail("nvrtc", why);
  return false;
}

}  // namespace

TEST_CASE("compiled binaries round-trip through the cache file", "[runtime][cache]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  std::string db = dir.file("k.db");
  Arch arch = Arch::parse("sm_90a");
  {
    Runtime rt(opts_for(db));
    auto r = rt.ensure_binary(test::scale_kernel(2), arch);
    CHECK(r.compiled);
    CHECK(r.name == "test_scale/sm_90a/s2.o0/default");
    CHECK(rt.stats().compiles == 1);
    CHECK_FALSE(rt.ensure_binary(test::scale_kernel(2), arch).compiled);  // memory
    CHECK(rt.stats().compiles == 1);
  }
  Runtime second(opts_for(db));  // a new process would see the same
  auto r = second.ensure_binary(test::scale_kernel(2), arch);
  CHECK_FALSE(r.compiled);
  CHECK(second.stats().cache_hits == 1);
  CHECK(second.stats().compiles == 0);
  auto entries = cache_list(db);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].compiler == "nvrtc");
  CHECK(entries[0].compiler_version == detail::nvrtc().version);
  CHECK(entries[0].blob_size > 0);
}

TEST_CASE("KTUNE_JIT=0 turns a miss into an error and a hit into a load", "[runtime][cache]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  std::string db = dir.file("k.db");
  RuntimeOptions o = opts_for(db);
  o.allow_jit = false;
  Runtime no_jit(o);
  try {
    no_jit.ensure_binary(test::scale_kernel(5), Arch::parse("sm_90a"));
    FAIL("expected jit_disabled");
  } catch (const Error& e) {
    CHECK(e.status() == Status::jit_disabled);
    CHECK_THAT(e.what(), Catch::Contains("KTUNE_JIT=0") && Catch::Contains("test_scale/sm_90a/s5.o0"));
  }
  Runtime jit(opts_for(db));
  jit.ensure_binary(test::scale_kernel(5), Arch::parse("sm_90a"));
  Runtime no_jit_again(o);
  CHECK_FALSE(no_jit_again.ensure_binary(test::scale_kernel(5), Arch::parse("sm_90a")).compiled);
}

TEST_CASE("a failed compile carries the NVRTC log, options and kernel name", "[runtime][compiler]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  GeneratedKernel bad = test::scale_kernel(1, 0, "\nnamespace { __global__ void broken() { undefined_symbol(); } }\n");
  try {
    rt.ensure_binary(bad, Arch::parse("sm_80"));
    FAIL("expected a compile error");
  } catch (const CompileError& e) {
    CHECK(e.status() == Status::compile_error);
    CHECK_THAT(e.log(), Catch::Contains("undefined_symbol"));
    CHECK_THAT(e.options(), Catch::Contains("--gpu-architecture=sm_80"));
    CHECK(e.kernel_name() == "test_scale/sm_80/s1.o0/default");
    CHECK_THAT(e.what(), Catch::Contains("undefined_symbol"));
  }
  CHECK(rt.stats().compile_failures == 1);
  CHECK(cache_list(dir.file("k.db")).empty());  // nothing half-made is stored
}

TEST_CASE("every default arch compiles to CUBIN", "[runtime][compiler]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  for (const auto& a : supported_cuda_arches()) {
    INFO(a);
    CHECK(rt.ensure_binary(test::scale_kernel(7), Arch::parse(a)).compiled);
  }
  CHECK(cache_list(dir.file("k.db")).size() == supported_cuda_arches().size());
  // CUBIN (ELF), never PTX text.
  for (const auto& e : cache_list(dir.file("k.db"))) {
    const cache::BinaryLookup l = cache::LayeredCache(dir.file("k.db"), false).get_binary(e.digest);
    REQUIRE(l.status == cache::LookupStatus::hit);
    const uint8_t elf[4] = {0x7f, 'E', 'L', 'F'};
    REQUIRE(l.record.blob.size() > 4);
    CHECK(std::equal(elf, elf + 4, l.record.blob.begin()));
  }
}

TEST_CASE("a damaged blob is named by verify and never served", "[runtime][cache]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  std::string db = dir.file("k.db");
  { Runtime rt(opts_for(db)); rt.ensure_binary(test::scale_kernel(3), Arch::parse("sm_90a")); rt.ensure_binary(test::scale_kernel(4), Arch::parse("sm_90a")); }
  CHECK(cache_verify(db).empty());
  REQUIRE(test::flip_blob_byte(db, "s3.o0") == 1);
  auto issues = cache_verify(db);
  REQUIRE(issues.size() == 1);
  CHECK_THAT(issues[0].name, Catch::Contains("s3.o0"));

  RuntimeOptions no_jit = opts_for(db);
  no_jit.allow_jit = false;
  Runtime strict(no_jit);
  CHECK_THROWS_AS(strict.ensure_binary(test::scale_kernel(3), Arch::parse("sm_90a")), Error);
  CHECK(strict.stats().damaged_skipped >= 1);
  CHECK_FALSE(strict.ensure_binary(test::scale_kernel(4), Arch::parse("sm_90a")).compiled);  // the intact one

  Runtime healing(opts_for(db));
  CHECK(healing.ensure_binary(test::scale_kernel(3), Arch::parse("sm_90a")).compiled);  // rebuilt, not loaded
}

TEST_CASE("layered caches read the read-only layer and write the writable one", "[runtime][cache]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  std::string base = dir.file("base.db"), user = dir.file("user.db");
  { Runtime rt(opts_for(base)); rt.ensure_binary(test::scale_kernel(11), Arch::parse("sm_90a")); }
  std::filesystem::permissions(base, std::filesystem::perms::owner_read | std::filesystem::perms::group_read,
                               std::filesystem::perm_options::replace);
  auto before = std::filesystem::file_size(base);
  {
    Runtime rt(opts_for(base + "?ro:" + user));  // ?ro: read-only even for root (containers)
    CHECK_FALSE(rt.ensure_binary(test::scale_kernel(11), Arch::parse("sm_90a")).compiled);  // from base
    CHECK(rt.ensure_binary(test::scale_kernel(12), Arch::parse("sm_90a")).compiled);        // into user
  }
  CHECK(std::filesystem::file_size(base) == before);
  CHECK(cache_list(base).size() == 1);
  CHECK(cache_list(user).size() == 1);
  CHECK(cache_list(base + "?ro:" + user).size() == 2);
  // Without the marker a file that is not writable is read-only too (as root, in a child that drops root: root
  // writes any file).
  const std::string failed = test::run_unprivileged(dir.path(), [&]() -> std::string {
    Runtime rt(opts_for(base + ":" + user));
    if (!rt.ensure_binary(test::scale_kernel(13), Arch::parse("sm_90a")).compiled) return "kernel 13 was not compiled";
    return "";
  });
  CHECK(std::filesystem::file_size(base) == before);
  if (!test::check_unprivileged(failed)) return;
  CHECK(cache_list(base).size() == 1);
  CHECK(cache_list(user).size() == 2);  // 12, then 13 from the child
}

TEST_CASE("many threads asking for one missing kernel cause exactly one compile", "[runtime][cache][threads]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  Runtime rt(opts_for(dir.file("k.db")));
  std::vector<std::thread> threads;
  std::atomic<int> compiled_flags{0}, errors{0};
  for (int t = 0; t < 32; ++t)
    threads.emplace_back([&] {
      try {
        if (rt.ensure_binary(test::scale_kernel(21), Arch::parse("sm_90a")).compiled) compiled_flags++;
      } catch (...) {
        errors++;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(errors == 0);
  CHECK(rt.stats().compiles == 1);
  CHECK(compiled_flags == 1);
  CHECK(cache_list(dir.file("k.db")).size() == 1);
}

TEST_CASE("export and merge move intact entries between files", "[runtime][cache]") {
  if (!have_nvrtc()) return;
  test::TempDir dir;
  std::string a = dir.file("a.db"), shipped = dir.file("shipped.db"), b = dir.file("b.db");
  { Runtime rt(opts_for(a)); rt.ensure_binary(test::scale_kernel(31), Arch::parse("sm_90a")); rt.ensure_binary(test::scale_kernel(32), Arch::parse("sm_90a")); }
  auto exported = cache_export(a, shipped);
  CHECK(exported.binaries_added == 2);
  CHECK_THROWS_AS(cache_export(a, shipped), Error);  // never overwrites
  { Runtime rt(opts_for(b)); rt.ensure_binary(test::scale_kernel(33), Arch::parse("sm_90a")); }
  auto merged = cache_merge(b, shipped);
  CHECK(merged.binaries_added == 2);
  CHECK(cache_list(b).size() == 3);
  CHECK(cache_merge(b, shipped).binaries_added == 0);
}
