// Host spec of the mxfp4_gemm family (W4A16 GEMM with OCP MXFP4 weights, dense or grouped over MoE experts):
// static problem, tile config, validation, source generation and launch planning. Pure: it never compiles,
// caches or times anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/dtype.h"  // relative: the same in the installed tree (ktune/common/)
#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::mxfp4 {

using DType = ::ktune_common::DType;

// The largest weight a problem (and the prepack) takes: n and k up to 2^20, up to 4096 experts.
inline constexpr int kMaxN = 1 << 20, kMaxK = 1 << 20, kMaxExperts = 4096;

// The static problem. n, k, num_experts and top_k name the weight (and the tuning key); the generated kernel
// depends only on the dtypes and on grouped (num_experts > 1), so every shape shares one binary per config.
struct KTUNE_API Problem {
  int n = 0;                // output features (rows of W), >= 1
  int k = 0;                // input features, a positive multiple of 32
  int num_experts = 1;      // 1 = dense GEMM; > 1 = grouped (MoE) form with expert_offsets
  int top_k = 1;            // experts per token (grouped tuning buckets: rows = tokens * top_k); <= num_experts
  DType a_dtype = ::ktune_common::kBF16;    // bf16 or fp16
  DType out_dtype = ::ktune_common::kBF16;  // bf16 or fp16
  bool grouped() const { return num_experts > 1; }
  // Throws ktune::Error(invalid_argument, "mxfp4_gemm", "<field>: ...") on the first bad field.
  void validate() const;
  // "n8192.k8192.bf16-bf16" (dense) or "n5760.k2880.e128.top4.bf16-bf16" (grouped)
  std::string key() const;
  static Problem from_key(const std::string& key);
  bool operator==(const Problem& o) const { return key() == o.key(); }
};

// A tile config "bm16.tn1.wn4.wk2.s3.d4": bm tokens per CTA (8..128), tn 16-row weight tiles per warp, wn warps
// along N (tile N = 16 * tn * wn), wk warps along K (intra-CTA split-K, tile K = 64 * wk, reduced in shared
// memory in a fixed order), s activation pipeline stages, d weight chunks prefetched into registers.
// ".wg" (sm_90a, bf16): warpgroup MMA, e.g. bm256.tn1.wn8.wk1.s4.d4.wg: bm (32, 64, 128, 192, 256) tokens are the
// wgmma N, each warpgroup of 4 warps owns 64 weight rows; wk > 1: warpgroups along K (bm64.tn1.wn4.wk4.s4.d4.wg);
// d (2, 4, 8) is the weight ring's slots in shared memory instead of chunks in registers.
// ".mx" (sm_120a only, opt-in): the native block-scaled MMA (mma.sync kind::mxf8f6f4, e2m1 weight x e4m3
// activations, ue8m0 scales applied by the tensor core). The kernel quantizes the activations to MXFP8 (each
// 32-block of a token row: one e8m0 scale, e4m3 elements; common/mxfp4.h mxfp8_scale_byte), so results differ
// from the exact W4A16 ones by that rounding: never a default, never in the search space; an engine asks for it
// with Mxfp4GemmArgs::config. Compiled for sm_120a in CI, never run (no sm_120 device here).
// ".tc" (sm_100a only, opt-in, same MXFP8 activations and the same reasons): the tensor-memory block-scaled MMA
// (tcgen05.mma kind::mxf8f6f4.block_scale, templates/mxfp4_gemm/kernel_tc.cuh), only as bm{16,32,64,128}.tn2.wn4.
// wk1.s2.d1.tc: 128 weight rows x bm tokens per CTA. Compiled for sm_100a in CI, never run (no sm_100 device).
//
// Host (CPU, Arch "host") configs "bm4.tn2.kt4" (templates/mxfp4_gemm/host_kernel.h) reuse bm and tn and add kt:
// bm activation rows per register block (1, 2, 4, 8), tn 16-row weight tiles per work item (N tile = 16 * tn
// output columns, the vectorized dimension), kt 64-wide K chunks decoded to fp32 per step (1, 4, 16). A host
// config has wn = wk = stages = depth = 0.
struct KTUNE_API Config {
  int bm = 16, tn = 1, wn = 4, wk = 2, stages = 3, depth = 4;
  bool wgmma = false;  // sm_90a, bf16 activations: warpgroup MMA (key suffix ".wg"; bm 32..256, tn1, wk 1/2/4)
  bool native = false; // sm_120a: block-scaled e2m1 x e4m3 MMA, activations quantized to MXFP8 (suffix ".mx")
  bool tcgen05 = false; // sm_100a: block-scaled tcgen05.mma, activations quantized to MXFP8 (suffix ".tc")
  int kt = 0;  // host only: K chunks per decode step
  std::string key() const;
  static Config from_key(const std::string& key);
  static Config host_config(int bm, int tn, int kt);
  bool host() const { return wn == 0; }
  int warps() const { return wn * wk; }
  int tile_n() const { return host() ? 16 * tn : 16 * tn * wn; }
  bool operator==(const Config& o) const {
    return bm == o.bm && tn == o.tn && wn == o.wn && wk == o.wk && stages == o.stages && depth == o.depth &&
           wgmma == o.wgmma && native == o.native && tcgen05 == o.tcgen05 && kt == o.kt;
  }
};

DeviceLimits default_limits(const Arch& arch);

// m: the tuning bucket's token rows (dense: M; grouped: rows per expert on average). 0 = no hint.
Config default_config(const Problem& p, const Arch& arch, int64_t m_hint = 0);
std::vector<Config> search_space(const Problem& p, const Arch& arch);
std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim);

// Entry point [0] = ktune_mxfp4::gemm_kernel<Spec>. Options: "-std=c++17". Arch "host": entry point [0] =
// ktune_mxfp4::host_gemm<Spec> (void(const HostWork&, int begin, int end)), n, k and the tunables as constants.
GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch);

// Host work items (host_kernel.h): rows are cut into slabs of at most host_slab_rows() rows of one expert; an item
// is (slab, N tile of 16 * tn columns).
constexpr int host_slab_rows() { return 64; }
inline int host_n_tiles(const Problem& p, const Config& c) { return ((p.n + 15) / 16 + c.tn - 1) / c.tn; }

// Grid: x = N tiles, y = M tiles (dense: ceil(m / bm); grouped: ceil(m / bm) + num_experts, an upper bound of
// the (expert, m tile) pairs; spare CTAs exit at once). Throws when y exceeds 65535.
LaunchDims gemm_dims(const Problem& p, const Config& c, int64_t m);

const char* dtype_name(DType t);

// ---- prepacked weights (prepack.cpp). Canonical input: w_packed [E, N, K/2] (low nibble = even k),
// w_scale [E, N, K/32] e8m0. Packed: see templates/mxfp4_gemm/params.h (kLayoutVersion).
KTUNE_API int packed_layout_version();
KTUNE_API size_t packed_weight_bytes(int n, int k, int num_experts);
KTUNE_API size_t packed_scale_bytes(int n, int k, int num_experts);
// Host reorder of canonical -> packed (out buffers of the sizes above). Throws on bad sizes / null pointers.
KTUNE_API void prepack_host(const uint8_t* w_packed, const uint8_t* w_scale, int n, int k, int num_experts,
                            uint8_t* out_weight, uint8_t* out_scale);
// Inverse (tests, tools): packed -> canonical.
KTUNE_API void unpack_host(const uint8_t* packed_weight, const uint8_t* packed_scale, int n, int k, int num_experts,
                           uint8_t* w_packed, uint8_t* w_scale);


// A prepacked weight file (what `ktune prepack` writes): magic "KTMXFP4\0", then little-endian int32
// layout_version, n, k, num_experts, int64 weight bytes, int64 scale bytes, then the two blobs.
struct KTUNE_API PackedFile {
  int layout_version = 0;
  int n = 0, k = 0, num_experts = 1;
  std::vector<uint8_t> weight, scales;
};
KTUNE_API void write_packed_file(const std::string& path, const PackedFile& f);
// Throws Error(invalid_argument) naming what is wrong: not a ktune MXFP4 file, a layout_version other than
// packed_layout_version() ("repack with this ktune"), or sizes that do not match n, k, num_experts.
KTUNE_API PackedFile read_packed_file(const std::string& path);

}  // namespace ktune::mxfp4
