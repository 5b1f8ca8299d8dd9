// example_scale's tuning workloads: one key is (problem, m = rows); inputs are random, rotated over enough
// copies that back-to-back GPU launches stream from memory rather than L2. The calls are the engine's
// (ktune::example::scale), with the candidate config forced.
#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/dtype.h"
#include "example_family/family.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/gpu.hpp"

namespace ktune::example {
namespace {

using autotune::ChosenConfig;
using autotune::forced_config;

namespace ws = autotune::workload_support;
constexpr const char* kWho = "example_scale workload";

int64_t rows_of(const TuningBuckets& buckets) {
  const auto b = ws::read_buckets(buckets, kWho, {"m"}, "example_scale tunes m = rows");
  const int64_t rows = b.count("m") ? b.at("m") : 0;
  if (rows < 1 || rows > (1 << 20))
    throw Error(Status::invalid_argument, kWho, fmt::format("bucket m: expected 1..{}, got {}", 1 << 20, rows));
  return rows;
}

// Counts the workloads alive (a member of each), and the most that were at once.
std::atomic<int> g_alive{0}, g_most_alive{0};
struct AliveCount {
  AliveCount() {
    const int now = ++g_alive;
    for (int most = g_most_alive.load(); now > most && !g_most_alive.compare_exchange_weak(most, now);) {
    }
  }
  AliveCount(const AliveCount&) = delete;
  AliveCount& operator=(const AliveCount&) = delete;
  ~AliveCount() { --g_alive; }
};

// Random elements of the problem's dtype (bf16 or fp32), about unit scale.
std::vector<unsigned char> random_tensor(const Problem& p, int64_t rows) {
  return ws::random_values(p.dtype, size_t(rows) * p.cols, std::random_device{}());
}

class GpuWorkload final : public autotune::Workload {
 public:
  GpuWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)), rows_(rows_of(buckets)) {
    const size_t bytes = size_t(rows_) * p_.cols * ::ktune_common::dtype_size(p_.dtype);
    const int copies = ws::gpu_copies(2.0 * bytes, 16, kWho, fmt::format("m{}", rows_));
    const std::vector<unsigned char> host = random_tensor(p_, rows_);
    for (int i = 0; i < copies; ++i) {
      Copy c{internal::DeviceBuffer(bytes, "cuMemAlloc (example_scale workload)"),
             internal::DeviceBuffer(bytes, "cuMemAlloc (example_scale workload)")};
      c.x.upload(host.data(), bytes);
      copies_.push_back(std::move(c));
    }
    bytes_ = 2.0 * bytes;
  }

  void prepare(const std::string& config) override {
    launch(config, nullptr);  // loads (or compiles) the kernel; timing never includes it
    internal::synchronize_device("example_scale workload: first call");
  }
  ChosenConfig chosen(const std::string& config) override {
    const Plan plan = scale_plan(rt_, p_, rows_, forced_config(config));
    return {plan.config, plan.source};
  }
  void launch(const std::string& config, void* stream) override {
    const Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    Args a;
    a.x = c.x.get();
    a.out = c.out.get();
    a.rows = rows_;
    a.alpha = 0.5f;
    a.config = forced_config(config);
    scale(rt_, p_, a, stream);
  }
  double bytes_per_call() const override { return bytes_; }
  double flops_per_call() const override { return double(rows_) * p_.cols; }

 private:
  struct Copy {
    internal::DeviceBuffer x, out;
  };
  AliveCount alive_;
  Runtime& rt_;
  Problem p_;
  int64_t rows_;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  double bytes_ = 0;
};

// The host workload: one pair of host buffers (the host call is synchronous; `stream` is ignored).
class HostWorkload final : public autotune::Workload {
 public:
  HostWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)), rows_(rows_of(buckets)), x_(random_tensor(p_, rows_)) {
    out_.resize(x_.size());
  }
  void prepare(const std::string& config) override { launch(config, nullptr); }
  ChosenConfig chosen(const std::string& config) override {
    const Plan plan = scale_host_plan(rt_, p_, rows_, forced_config(config));
    return {plan.config, plan.source};
  }
  void launch(const std::string& config, void*) override {
    Args a;
    a.x = x_.data();
    a.out = out_.data();
    a.rows = rows_;
    a.alpha = 0.5f;
    a.config = forced_config(config);
    scale_host(rt_, p_, a);
  }
  double bytes_per_call() const override { return 2.0 * double(x_.size()); }
  double flops_per_call() const override { return double(rows_) * p_.cols; }

 private:
  AliveCount alive_;
  Runtime& rt_;
  Problem p_;
  int64_t rows_;
  std::vector<unsigned char> x_, out_;
};

}  // namespace

int most_workloads_alive() { return g_most_alive.load(); }
void reset_most_workloads_alive() { g_most_alive = g_alive.load(); }

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets) {
  return std::make_unique<GpuWorkload>(rt, problem_key, buckets);
}

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                       const TuningBuckets& buckets) {
  return std::make_unique<HostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::example
