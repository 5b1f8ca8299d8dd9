// Tiny generated kernels for runtime tests: real NVRTC inputs without depending on a kernel family.
#pragma once

#include <string>

#include "ktune/kernel_spec.hpp"

namespace ktune::test {

// out[i] = in[i] * kScale + kOffset; the constants are written into the source like a spec would.
inline GeneratedKernel scale_kernel(int scale, int offset = 0, const std::string& extra_source = "") {
  GeneratedKernel k;
  k.family = "test_scale";
  k.problem_key = "s" + std::to_string(scale) + ".o" + std::to_string(offset);
  k.config_key = "default";
  k.source = R"(
namespace ktune_test {
struct Spec { static constexpr int kScale = )" + std::to_string(scale) +
             "; static constexpr int kOffset = " + std::to_string(offset) + R"(; };
template <class S>
__global__ void scale_kernel(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * S::kScale + S::kOffset;
}
}  // namespace ktune_test
)" + extra_source;
  k.entry_points = {"ktune_test::scale_kernel<ktune_test::Spec>"};
  return k;
}

}  // namespace ktune::test
