// The xqa_decode tuning workload: one tuning key (problem + buckets b = batch, l = seq_len) on the current
// device. Every request holds exactly l KV tokens and max_q_len query tokens (the bucket's worst case) over a
// shuffled block table; KV, Q and outputs are rotated over enough copies that their total exceeds 2x L2, so
// back-to-back launches stream from HBM. Values are random (never zeros): a seeded host pool of random
// elements uploaded once per buffer through the driver API.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/xqa_decode.hpp"
#include "ktune_internal/gpu.hpp"
#include "xqa_decode/family.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune::autotune {

namespace {

namespace kc = ::ktune_common;
using xqa::MaskKind;
using xqa::Problem;

constexpr int kWindowLeft = 1024;      // sliding-window problems: a typical local-attention window
constexpr float kSoftcap = 30.f;       // softcap problems: Gemma-style cap
constexpr int kMaxCopies = 64;
constexpr size_t kPoolBytes = 32u << 20;

[[noreturn]] void bad(const std::string& what) { throw Error(Status::invalid_argument, "xqa_decode workload", what); }

// Random elements of one dtype (about unit scale, never all zero), generated on a few threads.
std::vector<unsigned char> random_pool(int dtype, size_t bytes, uint64_t seed) {
  const int es = kc::dtype_size(dtype);
  const size_t count = bytes / es;
  std::vector<unsigned char> pool(count * es);
  const int threads = static_cast<int>(std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool_threads;
  for (int t = 0; t < threads; ++t)
    pool_threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + t);
      std::normal_distribution<float> normal(0.f, 1.f);
      const size_t lo = count * t / threads, hi = count * (t + 1) / threads;
      for (size_t i = lo; i < hi; ++i) {
        float v = normal(rng);
        if (v == 0.f) v = 0.5f;
        unsigned char* dst = pool.data() + i * es;
        switch (dtype) {
          case kc::kBF16: { unsigned short h = kc::float_to_bf16(v); std::memcpy(dst, &h, 2); break; }
          case kc::kFP16: { unsigned short h = kc::float_to_fp16(v); std::memcpy(dst, &h, 2); break; }
          case kc::kE4M3: *dst = kc::float_to_e4m3(v); break;
          default: std::memcpy(dst, &v, 4); break;
        }
      }
    });
  for (auto& th : pool_threads) th.join();
  return pool;
}

class DeviceAlloc {
 public:
  DeviceAlloc() = default;
  explicit DeviceAlloc(size_t bytes) : mem_(bytes, "cuMemAlloc (xqa_decode workload)") {}
  void* get() const { return mem_.get(); }
  size_t bytes() const { return mem_.bytes(); }
  void upload(const void* src, size_t n, size_t offset = 0) { mem_.upload(src, n, offset); }
  // Fills the whole buffer from `pool`, each chunk starting at a different pool offset (element aligned).
  void fill_from(const std::vector<unsigned char>& pool, int elem_bytes) {
    const size_t chunk = pool.size() / 2;
    size_t off = 0, i = 0;
    while (off < bytes()) {
      const size_t n = std::min(chunk, bytes() - off);
      const size_t src = ((i++ * 7919u * 16u) % chunk) / elem_bytes * elem_bytes;
      upload(pool.data() + src, n, off);
      off += n;
    }
  }

 private:
  internal::DeviceBuffer mem_;
};

class XqaWorkload final : public Workload {
 public:
  XqaWorkload(Runtime& rt, const std::string& problem_key, const std::vector<std::pair<std::string, int64_t>>& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)) {
    for (const auto& [dim, value] : buckets) {
      if (dim == "b") batch_ = static_cast<int>(value);
      else if (dim == "l") seq_len_ = static_cast<int>(value);
      else bad(fmt::format("unknown bucket '{}' (xqa_decode tunes b = batch and l = seq_len)", dim));
    }
    if (batch_ < 1 || batch_ > 65535) bad(fmt::format("bucket b: expected 1..65535, got {}", batch_));
    if (seq_len_ < 1) bad(fmt::format("bucket l: expected >= 1, got {}", seq_len_));
    allocate();
  }

  void prepare(const std::string& config) override {
    const XqaDecodePlan plan = xqa_decode_plan(rt_, p_, batch_, seq_len_, forced_config(config));
    grow_workspace(plan.workspace_bytes);
    // One real call loads (or compiles) the kernel; timing never includes it.
    launch(config, nullptr);
    internal::synchronize_device("xqa_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const XqaDecodePlan plan = xqa_decode_plan(rt_, p_, batch_, seq_len_, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void* stream) override {
    XqaDecodeArgs a = args_;
    const Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    a.q = c.q.get();
    a.kv_cache = c.kv.get();
    a.out = c.out.get();
    a.config = forced_config(config);
    xqa_decode(rt_, p_, a, stream);
  }

  double bytes_per_call() const override { return kv_bytes_read_ + q_bytes_ + out_bytes_; }
  double flops_per_call() const override { return flops_; }

 private:
  struct Copy {
    DeviceAlloc q, kv, out;
  };

  void allocate() {
    const int D = p_.head_dim, HKV = p_.num_kv_heads, HQ = p_.num_q_heads, P = p_.page_size, QL = p_.max_q_len;
    const int kvt = int(p_.kv_dtype), qt = int(p_.q_dtype), ot = int(p_.out_dtype);
    const int pages_per_req = (seq_len_ + P - 1) / P;
    const int64_t num_pages = int64_t{batch_} * pages_per_req;
    const int num_tokens = batch_ * QL;
    const size_t kv_bytes = size_t(num_pages) * 2 * HKV * P * D * kc::dtype_size(kvt);
    q_bytes_ = double(num_tokens) * HQ * D * kc::dtype_size(qt);
    out_bytes_ = double(num_tokens) * HQ * D * kc::dtype_size(ot);

    const int window = p_.sliding_window ? kWindowLeft : -1;
    const int64_t kv_lo = window >= 0 ? std::max<int64_t>(0, int64_t{seq_len_} - QL - window) : 0;
    const double tokens_read = double(seq_len_ - kv_lo);
    kv_bytes_read_ = double(batch_) * tokens_read * 2 * HKV * D * kc::dtype_size(kvt);
    flops_ = 4.0 * QL * p_.group_size() * tokens_read * D * HKV * batch_;

    // Rotating copies: their total exceeds 2x L2 (one copy of a large shape already does).
    const DeviceLimits lim = device_limits(internal::current_device_ordinal());
    const double copy_bytes = double(kv_bytes) + q_bytes_ + out_bytes_;
    int copies = std::min<int>(kMaxCopies, static_cast<int>(2.0 * lim.l2_bytes / copy_bytes) + 1);
    const size_t free_b = internal::device_memory_info().free_bytes;
    const double usable = 0.85 * double(free_b);
    if (copy_bytes > usable)
      throw Error(Status::unsupported, "xqa_decode workload",
                  fmt::format("b{} l{} needs {:.2f} GB of inputs, {:.2f} GB free", batch_, seq_len_, copy_bytes / 1e9,
                              free_b / 1e9));
    copies = std::max(1, std::min<int>(copies, static_cast<int>(usable / copy_bytes)));

    const uint64_t seed = std::random_device{}();
    const auto kv_pool = random_pool(kvt, std::min<size_t>(kPoolBytes, std::max<size_t>(kv_bytes, 4096)), seed);
    const auto q_pool = random_pool(qt, std::min<size_t>(kPoolBytes, std::max<size_t>(size_t(q_bytes_), 4096)), seed + 1);
    for (int i = 0; i < copies; ++i) {
      Copy c{DeviceAlloc(size_t(q_bytes_)), DeviceAlloc(kv_bytes), DeviceAlloc(size_t(out_bytes_))};
      c.kv.fill_from(kv_pool, kc::dtype_size(kvt));
      c.q.fill_from(q_pool, kc::dtype_size(qt));
      copies_.push_back(std::move(c));
    }

    // Shuffled block table (one table for every copy: pages index within each copy's cache), full-length requests.
    std::mt19937_64 rng(seed + 2);
    std::vector<int32_t> perm(static_cast<size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    block_tables_ = DeviceAlloc(perm.size() * sizeof(int32_t));
    block_tables_.upload(perm.data(), perm.size() * sizeof(int32_t));
    std::vector<int32_t> lens(batch_, seq_len_);
    seq_lens_ = DeviceAlloc(lens.size() * sizeof(int32_t));
    seq_lens_.upload(lens.data(), lens.size() * sizeof(int32_t));

    args_ = XqaDecodeArgs{};
    if (p_.mask == MaskKind::Explicit) {
      const int words = kc::draft_mask_words(QL);
      std::vector<unsigned short> mask(size_t(num_tokens) * words * 2, 0);
      std::uniform_int_distribution<int> coin(0, 1);
      for (int b = 0; b < batch_; ++b)
        for (int i = 0; i < QL; ++i)
          for (int j = 0; j <= i; ++j)
            if (j == i || coin(rng)) kc::draft_mask_set(mask.data(), int64_t{b} * QL + i, words, j);
      mask_ = DeviceAlloc(mask.size() * sizeof(unsigned short));
      mask_.upload(mask.data(), mask.size() * sizeof(unsigned short));
      args_.mask = static_cast<const uint16_t*>(mask_.get());
    }
    if (p_.has_sinks) {
      std::vector<float> sinks(HQ);
      std::uniform_real_distribution<float> u(-1.f, 3.f);
      for (float& s : sinks) s = u(rng);
      sinks_ = DeviceAlloc(sinks.size() * sizeof(float));
      sinks_.upload(sinks.data(), sinks.size() * sizeof(float));
      args_.sinks = static_cast<const float*>(sinks_.get());
    }
    if (p_.write_lse) {
      lse_ = DeviceAlloc(size_t(num_tokens) * HQ * sizeof(float));
      args_.lse = static_cast<float*>(lse_.get());
    }

    // Workspace for the largest split count any candidate config plans for this bucket.
    size_t ws = 0;
    const Arch arch = rt_.current_arch();
    for (const xqa::Config& c : xqa::search_space(p_, arch))
      if (xqa::can_implement(p_, c, arch, lim).empty())
        ws = std::max(ws, xqa_decode_plan(rt_, p_, batch_, seq_len_, c.key().c_str()).workspace_bytes);
    grow_workspace(ws);

    args_.block_tables = static_cast<const int32_t*>(block_tables_.get());
    args_.seq_lens = static_cast<const int32_t*>(seq_lens_.get());
    args_.batch = batch_;
    args_.num_tokens = num_tokens;
    args_.q_len_per_req = QL;
    args_.max_pages_per_req = pages_per_req;
    args_.num_pages = num_pages;
    args_.max_seq_len = seq_len_;
    args_.softmax_scale = 1.f / std::sqrt(float(D));
    args_.softcap = p_.softcap ? kSoftcap : 0.f;
    args_.window_left = window;
  }

  void grow_workspace(size_t bytes) {
    if (bytes <= workspace_.bytes() && workspace_.get()) return;
    if (bytes == 0) return;
    workspace_ = DeviceAlloc(bytes);
    args_.workspace = workspace_.get();
    args_.workspace_bytes = bytes;
  }

  Runtime& rt_;
  Problem p_;
  int batch_ = 0, seq_len_ = 0;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  DeviceAlloc block_tables_, seq_lens_, mask_, sinks_, lse_, workspace_;
  XqaDecodeArgs args_;
  double kv_bytes_read_ = 0, q_bytes_ = 0, out_bytes_ = 0, flops_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::xqa {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets) {
  return std::make_unique<autotune::XqaWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::xqa
