// example_scale: the smallest complete kernel family, out = alpha * x over a [rows, cols] tensor. It exists to
// show (docs/new_family.md) and to test that a family is one plugin: everything the runtime, the tuner, the
// CLI, the C API and Python ask of it lives in this folder, and it is registered with one call
// (register.cpp). It is built only into the test targets (ktune_tests, and libktune_example.so + the
// ktune_example CLI of CMakeLists.txt here), never into libktune.
//
//   ktune::example::Problem p;  p.cols = 4096;  p.dtype = ktune_common::kBF16;
//   auto op = ktune::example::prepare(rt, p);
//   ktune::example::Args a;  a.x = x;  a.out = out;  a.rows = 64;  a.alpha = 0.5f;
//   op.run(a, stream);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"
#include "ktune/op.hpp"
#include "ktune/runtime.hpp"

namespace ktune::example {

constexpr const char* kFamily = "example_scale";

// The static problem: every field changes the binary. Key "c<cols>.<dtype>", e.g. "c4096.bf16".
struct Problem {
  int cols = 1024;                       // elements per row: 1..1048576
  int dtype = ::ktune_common::kF32;      // x and out: kF32 or kBF16
  void validate() const;                 // Error(invalid_argument, "example_scale", "<field>: ...")
  std::string key() const;
  static Problem from_key(const std::string& key);
};

// Tile config "t<threads>.v<vec>". CUDA: threads per block (64..512) and elements per thread per step (1, 2, 4).
// Host: rows per work item (1, 4, 16) and the inner unroll (1, 4, 8).
struct Config {
  int threads = 256;
  int vec = 1;
  std::string key() const;
  static Config from_key(const std::string& key);
  bool operator==(const Config& o) const { return threads == o.threads && vec == o.vec; }
};

Config default_config(const Problem& p, const Arch& arch);
std::vector<Config> search_space(const Problem& p, const Arch& arch);
// "" when `c` can run `p` on `arch`, else the reason.
std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& limits);
// CUDA: entry point [0] = ktune_example::scale<Spec>(const void* x, void* out, long long n, float alpha).
// Host: entry point [0] = ktune_example::host_scale<Spec>(const void* x, void* out, float alpha, int begin_row,
// int end_row). Both include the embedded "common/numerics.cuh" (no file of this folder is embedded).
GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch);
LaunchDims launch_dims(const Problem& p, const Config& c, int64_t rows);

// Run-time arguments. GPU: device pointers of the current context; on a use_device(kHostDevice) thread: host
// pointers (the host call, synchronous).
struct Args {
  const void* x = nullptr;     // [rows, cols] dtype, 16-byte aligned
  void* out = nullptr;         // [rows, cols] dtype, 16-byte aligned (may equal x)
  int64_t rows = 0;            // >= 0; picks the tuning bucket m = next power of two
  float alpha = 1.f;           // finite
  const char* config = nullptr;  // force a config key (the tuner); nullptr = tuned or default
};

using Plan = LaunchPlan;  // config and source ("forced", "tuned" or "default"); never split

struct Family {
  using Problem = example::Problem;
  using Args = example::Args;
  using Plan = example::Plan;
  static constexpr const char* kName = example::kFamily;
};
using ScaleOp = Op<Family>;
inline ScaleOp prepare(Runtime& rt, const Problem& p) { return ScaleOp::prepare(rt, p); }

// The one-shot call (an op the runtime keeps per problem; on a use_device(kHostDevice) thread the host call)
// and what a call of `rows` rows runs on the current GPU / on the host CPU.
void scale(Runtime& rt, const Problem& p, const Args& a, void* stream);
void scale_host(Runtime& rt, const Problem& p, const Args& a);  // host pointers, on any thread
Plan scale_plan(Runtime& rt, const Problem& p, int64_t rows, const char* config = nullptr);
Plan scale_host_plan(Runtime& rt, const Problem& p, int64_t rows, const char* config = nullptr);

// The C argument struct of ktune_op_run (ktune.h style: struct_size and family_id first).
struct CArgs {
  uint32_t struct_size;
  uint32_t family_id;
  const void* x;
  void* out;
  int64_t rows;
  float alpha;
  const char* config;
};
CArgs c_args_default();

}  // namespace ktune::example
