// [gpu]: load a cached kernel onto the device and launch it through the typed launcher.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "ktune/launch.hpp"
#include "ktune/runtime.hpp"
#include "support/gpu.hpp"
#include "support/temp_dir.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;

TEST_CASE("a kernel compiled into the cache is loaded and launched with 0 compiles", "[gpu][runtime]") {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("gpu.db");
  {
    Runtime compile_only(o);  // as `ktune compile` on a machine without a GPU would
    compile_only.ensure_binary(test::scale_kernel(3, 1), compile_only.current_arch());
  }
  o.allow_jit = false;
  Runtime rt(o);
  const int n = 1 << 20;
  std::vector<float> in(n);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4, 4);
  for (auto& v : in) v = dist(rng);
  test::DeviceBuffer din(n * sizeof(float)), dout(n * sizeof(float));
  din.upload(in);
  dout.poison();
  const LoadedKernel& k = rt.get("test_scale/s3.o1", [] { return test::scale_kernel(3, 1); });
  LaunchDims dims;
  dims.grid[0] = (n + 255) / 256;
  dims.block[0] = 256;
  launch(k, 0, dims, nullptr, din.as<const float>(), dout.as<float>(), n);
  test::sync();
  auto out = dout.download<float>(n);
  // The device contracts x * 3 + 1 into one FMA (one rounding): compare with the host's fma, exactly.
  for (int i = 0; i < n; ++i) {
    float expect = std::fma(in[i], 3.0f, 1.0f);
    if (out[i] != expect) FAIL("mismatch at " << i << ": " << out[i] << " vs " << expect);
  }
  CHECK(rt.stats().compiles == 0);
  CHECK(rt.stats().cache_hits == 1);
  CHECK(rt.stats().loads == 1);
  CHECK(&rt.get("test_scale/s3.o1", [] { return test::scale_kernel(3, 1); }) == &k);
  CHECK(rt.stats().memory_hits == 1);
}
