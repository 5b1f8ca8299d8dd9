// example_scale's spec: problem and config keys, the search space, and the generated CUDA and host sources.
// Pure: nothing here compiles, caches or times anything.
#include "example_family/scale.hpp"

#include <algorithm>
#include <sstream>

#include "key_parse.hpp"
#include "ktune/error.hpp"
#include "spec_support.hpp"

namespace ktune::example {
namespace {

namespace kc = ::ktune_common;

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw Error(Status::invalid_argument, kFamily, field + ": " + what);
}

constexpr int kMaxCols = 1 << 20;

// The device code: a grid-stride loop over the flattened tensor, `vec` elements per thread and step. It is
// the family's own text (this folder is not embedded in the library); the conversions come from the embedded
// common/numerics.cuh, the same functions the host variant uses.
constexpr const char* kCudaKernel = R"(
namespace ktune_example {
template <class S>
__global__ void __launch_bounds__(S::kThreads) scale(const void* x, void* out, long long n, float alpha) {
  const long long step = (long long)gridDim.x * S::kThreads * S::kVec;
  for (long long i0 = ((long long)blockIdx.x * S::kThreads + threadIdx.x) * S::kVec; i0 < n; i0 += step) {
#pragma unroll
    for (int v = 0; v < S::kVec; ++v) {
      const long long i = i0 + v;
      if (i >= n) break;
      const float y = alpha * ktune_common::to_float(S::kDType, x, i);
      if (S::kDType == ktune_common::kBF16) static_cast<unsigned short*>(out)[i] = ktune_common::float_to_bf16(y);
      else static_cast<float*>(out)[i] = y;
    }
  }
}
}  // namespace ktune_example
)";

// The host variant: rows [begin, end) of the tensor, `unroll` elements per inner step.
constexpr const char* kHostKernel = R"(
namespace ktune_example {
template <class S>
void host_scale(const void* x, void* out, float alpha, int begin, int end) {
  for (long long r = begin; r < end; ++r) {
    const long long base = r * S::kCols;
    long long c = 0;
    for (; c + S::kUnroll <= S::kCols; c += S::kUnroll)
      for (int u = 0; u < S::kUnroll; ++u) {
        const float y = alpha * ktune_common::to_float(S::kDType, x, base + c + u);
        if (S::kDType == ktune_common::kBF16) static_cast<unsigned short*>(out)[base + c + u] = ktune_common::float_to_bf16(y);
        else static_cast<float*>(out)[base + c + u] = y;
      }
    for (; c < S::kCols; ++c) {
      const float y = alpha * ktune_common::to_float(S::kDType, x, base + c);
      if (S::kDType == ktune_common::kBF16) static_cast<unsigned short*>(out)[base + c] = ktune_common::float_to_bf16(y);
      else static_cast<float*>(out)[base + c] = y;
    }
  }
}
}  // namespace ktune_example
)";

}  // namespace

void Problem::validate() const {
  if (cols < 1 || cols > kMaxCols) fail("cols", "expected 1.." + std::to_string(kMaxCols) + ", got " + std::to_string(cols));
  if (dtype != kc::kF32 && dtype != kc::kBF16) fail("dtype", "expected f32 or bf16, got " + std::to_string(dtype));
}

std::string Problem::key() const { return "c" + std::to_string(cols) + "." + key_parse::dtype_token(dtype); }

Problem Problem::from_key(const std::string& key) {
  const std::vector<std::string> t = key_parse::split_dots(key);
  Problem p;
  if (t.size() != 2 || !key_parse::parse_num(t[0], "c", &p.cols, 7) || (t[1] != "f32" && t[1] != "bf16"))
    fail("problem key", "expected c<cols>.<f32|bf16>, e.g. c4096.bf16, got '" + key + "'");
  p.dtype = t[1] == "bf16" ? kc::kBF16 : kc::kF32;
  p.validate();
  return p;
}

std::string Config::key() const { return "t" + std::to_string(threads) + ".v" + std::to_string(vec); }

Config Config::from_key(const std::string& key) {
  const std::vector<std::string> t = key_parse::split_dots(key);
  Config c;
  if (t.size() != 2 || !key_parse::parse_num(t[0], "t", &c.threads, 4) || !key_parse::parse_num(t[1], "v", &c.vec, 1))
    fail("config key", "expected t<threads>.v<vec>, e.g. t256.v4, got '" + key + "'");
  return c;
}

Config default_config(const Problem&, const Arch& arch) { return arch.host ? Config{4, 4} : Config{256, 1}; }

std::vector<Config> search_space(const Problem& p, const Arch& arch) {
  std::vector<Config> out;
  const std::vector<int> threads = arch.host ? std::vector<int>{1, 4, 16} : std::vector<int>{64, 128, 256, 512};
  const std::vector<int> vecs = arch.host ? std::vector<int>{1, 4, 8} : std::vector<int>{1, 2, 4};
  for (int t : threads)
    for (int v : vecs)
      if (can_implement(p, Config{t, v}, arch, DeviceLimits{}).empty()) out.push_back(Config{t, v});
  return out;
}

std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& limits) {
  if (arch.host) {
    if (c.threads != 1 && c.threads != 4 && c.threads != 16) return "t: expected 1, 4 or 16 rows per work item (host)";
    if (c.vec != 1 && c.vec != 4 && c.vec != 8) return "v: expected 1, 4 or 8 (host unroll)";
    return "";
  }
  if (!key_parse::is_pow2_in(c.threads, 64, 512)) return "t: expected 64, 128, 256 or 512 threads";
  if (c.threads > limits.max_threads_per_block) return "t: more threads than the device allows per block";
  if (c.vec != 1 && c.vec != 2 && c.vec != 4) return "v: expected 1, 2 or 4";
  if (p.cols % c.vec != 0) return "v: expected a divisor of cols (" + std::to_string(p.cols) + ")";
  return "";
}

GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch) {
  spec_support::require_implementable(kFamily, p, c, arch, DeviceLimits{});
  std::ostringstream s;
  s << "// ktune example_scale " << p.key() << " / " << c.key() << (arch.host ? " (host)" : "") << "\n"
    << "#include \"common/numerics.cuh\"\n"
    << (arch.host ? kHostKernel : kCudaKernel) << "namespace ktune_example {\nstruct Spec {\n"
    << "  static constexpr int kDType = " << p.dtype << ";\n";
  if (arch.host) s << "  static constexpr long long kCols = " << p.cols << ";\n  static constexpr int kUnroll = " << c.vec << ";\n";
  else s << "  static constexpr int kThreads = " << c.threads << ", kVec = " << c.vec << ";\n";
  s << "};\n}  // namespace ktune_example\n";
  GeneratedKernel k;
  k.family = kFamily;
  k.problem_key = p.key();
  k.config_key = c.key();
  k.source = s.str();
  k.entry_points = {arch.host ? "ktune_example::host_scale<ktune_example::Spec>" : "ktune_example::scale<ktune_example::Spec>"};
  if (!arch.host) k.options = {"-std=c++17"};
  return k;
}

LaunchDims launch_dims(const Problem& p, const Config& c, int64_t rows) {
  const int64_t n = rows * p.cols, per_block = int64_t{c.threads} * c.vec;
  LaunchDims d;
  d.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block, 65535)));
  d.block[0] = static_cast<unsigned>(c.threads);
  return d;
}

}  // namespace ktune::example
