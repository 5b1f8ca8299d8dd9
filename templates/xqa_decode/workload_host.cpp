// The xqa_decode host tuning workload: one tuning key (problem + buckets b = batch, l = seq_len) on the CPU.
// Like the GPU workload: every request holds exactly l KV tokens and max_q_len query tokens over a shuffled
// block table, values random (never zero); KV and Q are rotated over copies whose total exceeds 64 MiB (more
// than a CPU's last-level cache, at most 4 copies) so back-to-back calls do not time a warm cache. Calls run
// on every hardware thread (what a host launch uses by default).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "xqa_decode/family.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
using xqa::MaskKind;
using xqa::Problem;

constexpr int kWindowLeft = 1024;
constexpr float kSoftcap = 30.f;
constexpr size_t kRotateBytes = size_t{64} << 20;
constexpr int kMaxCopies = 4;
constexpr size_t kPoolElems = size_t{1} << 20;

[[noreturn]] void bad(const std::string& what) { throw Error(Status::invalid_argument, "xqa_decode host workload", what); }

// A pool of random elements of one dtype (about unit scale, never zero), copied around to fill large buffers.
std::vector<unsigned char> random_pool(int dtype, uint64_t seed) {
  const int es = kc::dtype_size(dtype);
  std::vector<unsigned char> pool(kPoolElems * es);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (size_t i = 0; i < kPoolElems; ++i) {
    float v = normal(rng);
    if (v == 0.f) v = 0.5f;
    unsigned char* dst = pool.data() + i * es;
    switch (dtype) {
      case kc::kBF16: { unsigned short h = kc::float_to_bf16(v); std::memcpy(dst, &h, 2); break; }
      case kc::kFP16: { unsigned short h = kc::float_to_fp16(v); std::memcpy(dst, &h, 2); break; }
      default: *dst = kc::float_to_e4m3(v); break;
    }
  }
  return pool;
}

void fill_from(std::vector<unsigned char>& dst, const std::vector<unsigned char>& pool, int es, size_t salt) {
  const size_t half = pool.size() / 2;
  size_t off = 0, i = salt;
  while (off < dst.size()) {
    const size_t n = std::min(half, dst.size() - off);
    const size_t src = ((i++ * 7919u * 16u) % half) / es * es;
    std::memcpy(dst.data() + off, pool.data() + src, n);
    off += n;
  }
}

class XqaHostWorkload final : public Workload {
 public:
  XqaHostWorkload(Runtime& rt, const std::string& problem_key,
                  const std::vector<std::pair<std::string, int64_t>>& buckets)
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
    xqa_decode_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: timing never includes it
    launch(config, nullptr);                                 // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const XqaHostPlan plan = xqa_decode_host_plan(rt_, p_, batch_, seq_len_, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    XqaDecodeArgs a = args_;
    Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    a.q = c.q.data();
    a.kv_cache = c.kv.data();
    a.out = out_.data();
    a.config = forced_config(config);
    xqa_decode_host(rt_, p_, a, 0);
  }

  double bytes_per_call() const override { return kv_bytes_read_ + q_bytes_ + out_bytes_; }
  double flops_per_call() const override { return flops_; }

 private:
  struct Copy {
    std::vector<unsigned char> q, kv;
  };

  void allocate() {
    const int D = p_.head_dim, HKV = p_.num_kv_heads, HQ = p_.num_q_heads, P = p_.page_size, QL = p_.max_q_len;
    const int kvt = int(p_.kv_dtype), qt = int(p_.q_dtype), ot = int(p_.out_dtype);
    const int pages_per_req = (seq_len_ + P - 1) / P;
    const int64_t num_pages = int64_t{batch_} * pages_per_req;
    const int num_tokens = batch_ * QL;
    const size_t kv_bytes = size_t(num_pages) * 2 * HKV * P * D * kc::dtype_size(kvt);
    const size_t q_bytes = size_t(num_tokens) * HQ * D * kc::dtype_size(qt);
    q_bytes_ = double(q_bytes);
    out_bytes_ = double(num_tokens) * HQ * D * kc::dtype_size(ot);
    const int window = p_.sliding_window ? kWindowLeft : -1;
    const int64_t kv_lo = window >= 0 ? std::max<int64_t>(0, int64_t{seq_len_} - QL - window) : 0;
    const double tokens_read = double(seq_len_ - kv_lo);
    kv_bytes_read_ = double(batch_) * tokens_read * 2 * HKV * D * kc::dtype_size(kvt);
    flops_ = 4.0 * QL * p_.group_size() * tokens_read * D * HKV * batch_;

    const size_t copy_bytes = kv_bytes + q_bytes;
    const int copies = std::max(1, std::min<int>(kMaxCopies, static_cast<int>(kRotateBytes / std::max<size_t>(copy_bytes, 1)) + 1));
    const uint64_t seed = std::random_device{}();
    const auto kv_pool = random_pool(kvt, seed);
    const auto q_pool = random_pool(qt, seed + 1);
    for (int i = 0; i < copies; ++i) {
      Copy c;
      c.kv.resize(kv_bytes);
      c.q.resize(q_bytes);
      fill_from(c.kv, kv_pool, kc::dtype_size(kvt), 3 * i);
      fill_from(c.q, q_pool, kc::dtype_size(qt), 3 * i + 1);
      copies_.push_back(std::move(c));
    }
    out_.assign(size_t(num_tokens) * HQ * D * kc::dtype_size(ot), 0);

    std::mt19937_64 rng(seed + 2);
    block_tables_.resize(static_cast<size_t>(num_pages));
    std::iota(block_tables_.begin(), block_tables_.end(), 0);
    std::shuffle(block_tables_.begin(), block_tables_.end(), rng);
    seq_lens_.assign(batch_, seq_len_);

    args_ = XqaDecodeArgs{};
    if (p_.mask == MaskKind::Explicit) {
      const int words = kc::draft_mask_words(QL);
      mask_.assign(size_t(num_tokens) * words * 2, 0);
      std::uniform_int_distribution<int> coin(0, 1);
      for (int b = 0; b < batch_; ++b)
        for (int i = 0; i < QL; ++i)
          for (int j = 0; j <= i; ++j)
            if (j == i || coin(rng)) kc::draft_mask_set(mask_.data(), int64_t{b} * QL + i, words, j);
      args_.mask = mask_.data();
    }
    if (p_.has_sinks) {
      sinks_.resize(HQ);
      std::uniform_real_distribution<float> u(-1.f, 3.f);
      for (float& s : sinks_) s = u(rng);
      args_.sinks = sinks_.data();
    }
    if (p_.write_lse) {
      lse_.assign(size_t(num_tokens) * HQ, 0.f);
      args_.lse = lse_.data();
    }
    args_.block_tables = block_tables_.data();
    args_.seq_lens = seq_lens_.data();
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

  Runtime& rt_;
  Problem p_;
  int batch_ = 0, seq_len_ = 0;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  std::vector<unsigned char> out_;
  std::vector<int32_t> block_tables_, seq_lens_;
  std::vector<uint16_t> mask_;
  std::vector<float> sinks_, lse_;
  XqaDecodeArgs args_;
  double kv_bytes_read_ = 0, q_bytes_ = 0, out_bytes_ = 0, flops_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::xqa {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::XqaHostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::xqa
