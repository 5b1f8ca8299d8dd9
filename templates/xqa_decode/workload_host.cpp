// The xqa_decode host tuning workload: the key's inputs (workload_inputs.hpp) in host memory, on the CPU. KV and
// Q are rotated over copies whose total exceeds 64 MiB (more than a CPU's last-level cache, at most 4 copies) so
// back-to-back calls do not time a warm cache; values random (never zero). Calls run on every hardware thread
// (what a host launch uses by default).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
#include "ktune/xqa_decode_host.hpp"
#include "xqa_decode/family.hpp"
#include "xqa_decode/spec.hpp"
#include "xqa_decode/workload_inputs.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
namespace ws = workload_support;
using xqa::Problem;

constexpr const char* kWho = "xqa_decode host workload";
constexpr int kMaxCopies = 4;
constexpr size_t kPoolElems = size_t{1} << 20;

struct XqaHostCopy {
  std::vector<unsigned char> q, kv;
};

class XqaHostWorkload final : public RotatingWorkload<Problem, XqaInputs, XqaHostCopy> {
 public:
  XqaHostWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key, [&](const Problem& p, uint64_t seed) {
          return xqa_inputs(p, buckets, kWho, seed);
        }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    xqa_decode_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: timing never includes it
    launch(config, nullptr);                                 // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const XqaHostPlan plan = xqa_decode_host_plan(rt_, p_, in_.batch, in_.seq_len, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    XqaDecodeArgs a = args_;
    const XqaHostCopy& c = next_copy();
    a.q = c.q.data();
    a.kv_cache = c.kv.data();
    a.config = forced_config(config);
    xqa_decode_host(rt_, p_, a, 0);
  }

 private:
  void allocate() {
    const int kvt = int(p_.kv_dtype), qt = int(p_.q_dtype);
    const size_t lse_bytes = p_.write_lse ? size_t(in_.args.num_tokens) * p_.num_q_heads * sizeof(float) : 0;
    const int copies = ws::host_copies(in_.kv_bytes + in_.q_bytes, in_.out_bytes + lse_bytes, kMaxCopies, kWho,
                                       fmt::format("b{} l{}", in_.batch, in_.seq_len));
    const auto kv_pool = ws::random_values(kvt, kPoolElems, seed_ + 1);
    const auto q_pool = ws::random_values(qt, kPoolElems, seed_ + 2);
    for (int i = 0; i < copies; ++i) {
      XqaHostCopy c;
      c.kv.resize(in_.kv_bytes);
      c.q.resize(in_.q_bytes);
      ws::tile_pool(c.kv.data(), c.kv.size(), kv_pool, kc::dtype_size(kvt), 3 * i);
      ws::tile_pool(c.q.data(), c.q.size(), q_pool, kc::dtype_size(qt), 3 * i + 1);
      copies_.push_back(std::move(c));
    }
    out_.assign(in_.out_bytes, 0);
    if (p_.write_lse) lse_.assign(size_t(in_.args.num_tokens) * p_.num_q_heads, 0.f);

    args_ = in_.args;
    args_.block_tables = in_.block_tables.data();
    args_.seq_lens = in_.seq_lens.data();
    args_.mask = in_.mask.empty() ? nullptr : in_.mask.data();
    args_.sinks = in_.sinks.empty() ? nullptr : in_.sinks.data();
    args_.lse = p_.write_lse ? lse_.data() : nullptr;
    args_.out = out_.data();
  }

  std::vector<unsigned char> out_;
  std::vector<float> lse_;
  XqaDecodeArgs args_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::xqa {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::XqaHostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::xqa
