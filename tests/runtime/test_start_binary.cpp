// launch_support::start_binary, which an op's first call uses to find or compile its shared module's binary
// beside the config's: real NVRTC and a real cache file, no GPU.
#include <catch2/catch.hpp>

#include <future>

#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "launch_support.hpp"
#include "nvrtc_api.hpp"
#include "support/cache_file.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;

namespace {

const Arch kArch = Arch::parse("sm_90a");

}  // namespace

TEST_CASE("start_binary compiles on a thread of its own while the caller compiles another", "[runtime][cache]") {
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  Runtime rt(test::on_cache_file(dir.file("k.db")));
  std::future<void> started = launch_support::start_binary(rt, [] { return test::scale_kernel(3); }, kArch);
  REQUIRE(started.valid());
  const EnsureResult own = rt.ensure_binary(test::scale_kernel(5), kArch);
  started.get();
  CHECK(own.compiled);
  CHECK(rt.stats().compiles == 2);
  // The started one is stored: found again, not compiled again, also by another runtime on the same file.
  CHECK_FALSE(rt.ensure_binary(test::scale_kernel(3), kArch).compiled);
  Runtime later(test::on_cache_file(dir.file("k.db"), false));
  CHECK_FALSE(later.ensure_binary(test::scale_kernel(3), kArch).compiled);
  CHECK(rt.stats().compiles == 2);
  CHECK(later.stats().compiles == 0);
}

TEST_CASE("start_binary: one compile when the caller asks for the same binary meanwhile, errors come back",
          "[runtime][cache]") {
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  Runtime rt(test::on_cache_file(dir.file("k.db")));
  std::future<void> started = launch_support::start_binary(rt, [] { return test::scale_kernel(7); }, kArch);
  rt.ensure_binary(test::scale_kernel(7), kArch);
  started.get();
  CHECK(rt.stats().compiles == 1);  // single flight: whichever came second waited for the first

  SECTION("a miss with JIT off is the runtime's own error, from get()") {
    Runtime no_jit(test::on_cache_file(dir.file("k.db"), false));
    std::future<void> f = launch_support::start_binary(no_jit, [] { return test::scale_kernel(11); }, kArch);
    CHECK_THROWS_WITH(f.get(), Catch::Contains("KTUNE_JIT=0"));
    CHECK(no_jit.stats().compiles == 0);
  }
  SECTION("a generator that throws: its error, from get()") {
    std::future<void> f = launch_support::start_binary(
        rt, []() -> GeneratedKernel { throw Error(Status::invalid_argument, "test", "no such spec"); }, kArch);
    CHECK_THROWS_WITH(f.get(), Catch::Contains("no such spec"));
  }
  SECTION("a source that does not compile: NVRTC's error, from get()") {
    std::future<void> f = launch_support::start_binary(
        rt, [] { return test::scale_kernel(13, 0, "this is not C++;"); }, kArch);
    CHECK_THROWS_AS(f.get(), Error);
    CHECK(rt.stats().compile_failures == 1);
  }
}
