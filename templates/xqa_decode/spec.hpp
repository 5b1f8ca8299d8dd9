// Host spec of the xqa_decode family: static problem, tile config, validation, source generation and launch
// planning. Pure: it never compiles, caches or times anything.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "../common/dtype.h"  // relative: the same in the installed tree (ktune/common/)
#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::xqa {

using DType = ::ktune_common::DType;

enum class Layout : int { Hnd = 0, Nhd = 1 };
enum class MaskKind : int { None = 0, Causal = 1, Explicit = 2 };

// Largest max_q_len (query tokens per request: speculative decoding, EAGLE-style draft trees).
constexpr int kMaxQLenLimit = 64;
// The largest max_seq_len of a call: its power-of-two bucket stays an int, and no tile or page count overflows.
constexpr int kMaxSeqLen = 1 << 30;

// The static specialization: every field changes the binary.
struct KTUNE_API Problem {
  int head_dim = 128;      // 64, 128, 256
  int num_q_heads = 32;
  int num_kv_heads = 8;    // num_q_heads / num_kv_heads = group size, 1..16
  int page_size = 32;      // 16, 32, 64, 128
  Layout layout = Layout::Hnd;
  DType q_dtype = ::ktune_common::kBF16;   // bf16, fp16, e4m3 (e4m3 Q needs e4m3 KV)
  DType kv_dtype = ::ktune_common::kBF16;  // bf16, fp16 (== q dtype), e4m3
  DType out_dtype = ::ktune_common::kBF16; // bf16, fp16, e4m3
  int max_q_len = 1;       // 1..64 query tokens per request (explicit mask: ceil(max_q_len/32) words a row)
  MaskKind mask = MaskKind::Causal;  // None only with max_q_len == 1
  bool has_sinks = false;
  bool sliding_window = false;
  bool softcap = false;
  bool write_lse = false;
  bool checked = false;    // device-side bounds checks (block-table pages, seq_len vs table width)

  int group_size() const { return num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0; }
  // Throws ktune::Error(invalid_argument, "xqa_decode", "<field>: ...") on the first bad field.
  void validate() const;
  // e.g. "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.sink.win" (+ ".cap", ".lse", ".chk")
  std::string key() const;
  static Problem from_key(const std::string& key);
  bool operator==(const Problem& o) const { return key() == o.key(); }
};

// A tile config. CUDA configs use tokens_per_tile, stages, warps, m_tiles_per_cta, wgmma ("t64.s3.w4[.m2][.wg]");
// host (CPU) configs use tokens_per_tile, vec_width, unroll ("t64.v8.u4") and have stages = warps = 0.
struct KTUNE_API Config {
  int tokens_per_tile = 64;  // KV tokens per pipeline stage (host: per tile decoded to fp32)
  int stages = 3;            // cp.async ring depth (>= 2)
  int warps = 4;             // warps per CTA
  int m_tiles_per_cta = 0;   // 16-row query tiles per CTA; 0 = all rows of a kv head in one CTA
  bool wgmma = false;        // sm_90a, 64 or 128 query rows a CTA, 16-bit KV: both products on wgmma (".wg")
  int vec_width = 0;         // host only: fp32 lanes per score accumulator (4, 8, 16); 0 = a CUDA config
  int unroll = 0;            // host only: KV tokens per pass of the score loop (1, 2, 4)
  bool host() const { return vec_width != 0; }
  static Config host_config(int tokens_per_tile, int vec_width, int unroll);
  std::string key() const;   // "t64.s3.w4" (+ ".m2" when m_tiles_per_cta != 0, ".wg"); host: "t64.v8.u4"
  static Config from_key(const std::string& key);  // either form
  bool operator==(const Config& o) const {
    return tokens_per_tile == o.tokens_per_tile && stages == o.stages && warps == o.warps &&
           m_tiles_per_cta == o.m_tiles_per_cta && wgmma == o.wgmma && vec_width == o.vec_width && unroll == o.unroll;
  }
};

// Published per-arch limits used when no device is present.
DeviceLimits default_limits(const Arch& arch);

Config default_config(const Problem& p, const Arch& arch);
std::vector<Config> search_space(const Problem& p, const Arch& arch);
// "" when the config can run the problem on that arch/device, else the reason.
std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim);

// A config's module on a GPU arch: entry point [0] = decode_kernel. Options: "-std=c++17".
// Arch "host": the CPU kernel (host_kernel.h) with entry points [0] = host_decode, [1] = host_combine, each
// void(const ktune_xqa::Params&, int begin_item, int end_item).
GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch);
// The problem's shared module on a GPU arch (config key kSharedConfig; no tile config changes these kernels):
// [0] = combine_kernel (kCombineEntry), and the engine helpers (helpers.cuh) [1] = draft_mask_kernel,
// [2] = cu_seq_lens_kernel (kHelperMaskEntry, kHelperCuSeqLensEntry). The host backend has none.
GeneratedKernel generate_shared(const Problem& p, const Arch& arch);
constexpr int kCombineEntry = 0, kHelperMaskEntry = 1, kHelperCuSeqLensEntry = 2;

// Host launch planning: decode work items are (request, kv head, row group, split); splits are added only while
// there are fewer items than ~2 per thread, and each split keeps at least two tiles.
int choose_num_splits_host(const Problem& p, const Config& c, int batch, int max_seq_len, int threads);
// A host row group holds at most kHostRowsPerItem query rows of one kv head (the host kernel keeps its rows in
// stack arrays, so their size stays bounded whatever max_q_len * group is).
constexpr int kHostRowsPerItem = 256;
inline int host_rows_per_item(const Problem& p) {
  const int rows = p.max_q_len * p.group_size();
  return rows < kHostRowsPerItem ? rows : kHostRowsPerItem;
}
inline int host_row_groups(const Problem& p) {
  return (p.max_q_len * p.group_size() + kHostRowsPerItem - 1) / kHostRowsPerItem;
}
// Item counts in 64 bits: the launch refuses a count past the host pool's int (host_pipeline::work_items).
inline long long host_decode_items(const Problem& p, int batch, int num_splits) {
  return (long long)batch * p.num_kv_heads * host_row_groups(p) * (num_splits > 0 ? num_splits : 1);
}
inline long long host_combine_items(const Problem& p, int batch) {
  return (long long)batch * p.max_q_len * p.num_q_heads;
}

// Launch planning: depends only on the static problem, the config, batch and a max-seq-len bucket.
int choose_num_splits(const Problem& p, const Config& c, int batch, int max_seq_len, const DeviceLimits& lim);
size_t workspace_bytes(const Problem& p, const Config& c, int batch, int num_splits);
LaunchDims decode_dims(const Problem& p, const Config& c, int batch, int num_splits);
LaunchDims combine_dims(const Problem& p, const Config& c, int batch);  // grid (max_q_len*num_q_heads, batch), 128
// CTAs of the decode kernel that fit on one SM (smem, threads, registers estimate).
int ctas_per_sm(const Problem& p, const Config& c, const DeviceLimits& lim);

const char* dtype_name(DType t);

}  // namespace ktune::xqa
