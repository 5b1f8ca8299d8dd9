// The engine helpers of xqa_decode (ktune/xqa_helpers.hpp): argument checks, the host forms, and the launches of
// the helper entry points of the problem's shared module. Nothing here reads device memory, allocates or
// synchronizes.
#include "ktune/xqa_helpers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "ktune/launch.hpp"
#include "launch_support.hpp"
#include "xqa_decode/helpers_host.hpp"

namespace ktune::xqa {
namespace {

constexpr const char* kFamily = "xqa_decode";
using launch_support::bad_arg;

void need_host_ptr(const void* p, const char* field) {
  if (!p) bad_arg(kFamily, field, "a host pointer", "null");
}

void check_mask_args(const Problem& p, const DraftMaskArgs& a, bool device) {
  if (p.mask != MaskKind::Explicit)
    bad_arg(kFamily, "mask", "an op of a problem with mask explicit (the draft-mask words are its input)",
            p.mask == MaskKind::Causal ? "causal" : "none");
  const int src = static_cast<int>(a.source);
  if (src < 0 || src > 2) bad_arg(kFamily, "source", "FromBool (0), Causal (1) or Full (2)", std::to_string(src));
  if (a.batch < 1 || a.batch > 65535) bad_arg(kFamily, "batch", "1..65535", std::to_string(a.batch));
  if (a.q_len < 1 || a.q_len > p.max_q_len)
    bad_arg(kFamily, "q_len", fmt::format("1..{} (problem max_q_len)", p.max_q_len), std::to_string(a.q_len));
  if (a.q_cu_seq_lens) {
    const int64_t most = int64_t{a.batch} * p.max_q_len;
    if (a.rows < 0 || a.rows > most)
      bad_arg(kFamily, "rows", fmt::format("0..{} (ragged: at most batch * max_q_len)", most), std::to_string(a.rows));
  } else {
    const int64_t want = int64_t{a.batch} * a.q_len;
    if (a.rows != want)
      bad_arg(kFamily, "rows", fmt::format("exactly batch * q_len = {} (uniform form; pass q_cu_seq_lens for ragged)", want),
              std::to_string(a.rows));
  }
  const bool from_bool = a.source == DraftMaskSource::FromBool;
  if (!from_bool && a.bool_mask)
    bad_arg(kFamily, "bool_mask", "null (source is Causal or Full)", launch_support::ptr_text(a.bool_mask));
  if (a.rows == 0) return;  // ragged, no rows: nothing is read or written (an empty tensor may have no address)
  if (device) {
    if (from_bool) launch_support::need_device_ptr(kFamily, a.bool_mask, "bool_mask", 1);
    if (a.q_cu_seq_lens) launch_support::need_device_ptr(kFamily, a.q_cu_seq_lens, "q_cu_seq_lens", 4);
    launch_support::need_device_ptr(kFamily, a.out, "out", 4);
  } else {
    if (from_bool) need_host_ptr(a.bool_mask, "bool_mask");
    need_host_ptr(a.out, "out");
  }
}

void check_cu_args(const int32_t* q_lens, int batch, const int32_t* q_cu_seq_lens, bool device) {
  if (batch < 0 || batch > kMaxHelperBatch)
    bad_arg(kFamily, "batch", fmt::format("0..{}", kMaxHelperBatch), std::to_string(batch));
  if (device) {
    if (batch > 0) launch_support::need_device_ptr(kFamily, q_lens, "q_lens", 4);
    launch_support::need_device_ptr(kFamily, q_cu_seq_lens, "q_cu_seq_lens", 4);
  } else {
    if (batch > 0) need_host_ptr(q_lens, "q_lens");
    need_host_ptr(q_cu_seq_lens, "q_cu_seq_lens");
  }
}

ktune_xqa::DraftMaskParams mask_params(const DraftMaskArgs& a) {
  ktune_xqa::DraftMaskParams prm{};
  prm.bool_mask = a.bool_mask;
  prm.q_cu_seq_lens = a.q_cu_seq_lens;
  prm.out = a.out;
  prm.source = static_cast<int>(a.source);
  prm.q_len = a.q_len;
  prm.rows = a.rows;
  prm.batch = a.batch;
  return prm;
}

}  // namespace

int draft_mask_words(const Problem& problem) { return (problem.max_q_len + 31) / 32; }

void draft_mask_rows_host(const ktune_xqa::DraftMaskParams& prm, int words, int max_q_len) {
  auto* out = reinterpret_cast<unsigned char*>(prm.out);
  for (int b = 0; b < prm.batch; ++b) {
    const int64_t start = prm.q_cu_seq_lens ? prm.q_cu_seq_lens[b] : int64_t{b} * prm.q_len;
    int n = prm.q_cu_seq_lens ? prm.q_cu_seq_lens[b + 1] - prm.q_cu_seq_lens[b] : prm.q_len;
    n = n < 0 ? 0 : (n > max_q_len ? max_q_len : n);
    for (int i = 0; i < n; ++i) {
      const int64_t row = start + i;
      if (row < 0 || row >= prm.rows) continue;
      for (int w = 0; w < words; ++w) {
        const unsigned word = ktune_xqa::draft_mask_row_word(prm, row, i, n, w);
        unsigned char* dst = out + (row * words + w) * 4;  // uint16 pair, low half first
        const uint16_t lo = uint16_t(word & 0xffffu), hi = uint16_t(word >> 16);
        std::memcpy(dst, &lo, 2);
        std::memcpy(dst + 2, &hi, 2);
      }
    }
  }
}

void pack_draft_mask_host(const Problem& problem, const DraftMaskArgs& a) {
  problem.validate();
  check_mask_args(problem, a, false);
  if (a.rows == 0) return;
  if (a.q_cu_seq_lens) {
    const int32_t* cu = a.q_cu_seq_lens;
    if (cu[0] != 0) bad_arg(kFamily, "q_cu_seq_lens[0]", "0", std::to_string(cu[0]));
    for (int b = 0; b < a.batch; ++b) {
      const int32_t lo = cu[b], hi = cu[b + 1];
      if (hi < lo || hi > a.rows || hi - lo > problem.max_q_len)
        bad_arg(kFamily, fmt::format("q_cu_seq_lens[{}] (request {})", b + 1, b),
                fmt::format("a value in [{}, {}] (non-decreasing, at most max_q_len {} tokens a request, total <= "
                            "rows {})", lo, std::min<int64_t>(a.rows, int64_t{lo} + problem.max_q_len),
                            problem.max_q_len, a.rows),
                std::to_string(hi));
    }
  }
  draft_mask_rows_host(mask_params(a), draft_mask_words(problem), problem.max_q_len);
}

void build_q_cu_seq_lens_host(const Problem& problem, const int32_t* q_lens, int batch, int32_t* q_cu_seq_lens) {
  problem.validate();
  check_cu_args(q_lens, batch, q_cu_seq_lens, false);
  for (int b = 0; b < batch; ++b)
    if (q_lens[b] < 0 || q_lens[b] > problem.max_q_len)
      bad_arg(kFamily, fmt::format("q_lens[{}]", b), fmt::format("0..{} (problem max_q_len)", problem.max_q_len),
              std::to_string(q_lens[b]));
  int32_t total = 0;
  for (int b = 0; b < batch; ++b) {
    q_cu_seq_lens[b] = total;
    total += q_lens[b];
  }
  q_cu_seq_lens[batch] = total;
}

void pack_draft_mask(const XqaDecodeOp& op, const DraftMaskArgs& a, void* stream) {
  const Problem& p = op.problem();
  if (host_device_current()) return pack_draft_mask_host(p, a);
  check_mask_args(p, a, true);
  if (a.rows == 0) return;
  // the helpers are in the problem's shared module, which every warmup of the problem compiles
  const LoadedKernel& k = op.shared_module();
  const int items = p.max_q_len * draft_mask_words(p);
  LaunchDims d;
  d.grid[0] = unsigned(a.batch);
  d.block[0] = unsigned((items + 31) / 32 * 32);  // HelperTraits::kMaskThreads
  launch(k, kHelperMaskEntry, d, stream, mask_params(a));
}

void build_q_cu_seq_lens(const XqaDecodeOp& op, const int32_t* q_lens, int batch, int32_t* q_cu_seq_lens,
                         void* stream) {
  const Problem& p = op.problem();
  if (host_device_current()) return build_q_cu_seq_lens_host(p, q_lens, batch, q_cu_seq_lens);
  check_cu_args(q_lens, batch, q_cu_seq_lens, true);
  const LoadedKernel& k = op.shared_module();
  ktune_xqa::CuSeqLensParams prm{};
  prm.q_lens = q_lens;
  prm.q_cu_seq_lens = q_cu_seq_lens;
  prm.batch = batch;
  LaunchDims d;
  d.block[0] = unsigned(std::min(1024, std::max(32, (batch + 31) / 32 * 32)));  // one CTA scans any batch
  launch(k, kHelperCuSeqLensEntry, d, stream, prm);
}

}  // namespace ktune::xqa
