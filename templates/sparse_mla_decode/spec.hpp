// Host spec of the sparse_mla_decode family (DeepSeek V3.2 sparse MLA decode): static problem, tile config,
// validation, source generation and launch planning. Pure: it never compiles, caches or times anything.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::mla {

enum class KvFormat : int { Bf16 = 0, Fp8DsMla = 1 };

// The static specialization: every field changes the binary.
struct KTUNE_API Problem {
  int num_heads = 128;     // query heads on this GPU: 16, 32, 64 or 128
  int kv_lora_rank = 512;  // latent dim = V dim: 128, 256, 384 or 512
  int rope_dim = 64;       // 64 or 128 (Q/K dim = kv_lora_rank + rope_dim)
  int topk = 2048;         // selected slots per token: 1..131072
  int page_size = 64;      // 16, 32, 64, 128, 256, 512 or 1024 tokens per page
  KvFormat kv_format = KvFormat::Fp8DsMla;  // fp8_ds_mla (656-byte rows for 512 + 64) or bf16
  int max_q_len = 1;       // query positions per request (MTP): 1..16; every token is independent
  bool checked = false;    // device-side bounds checks of the top-k slots

  // Bytes of one cache row: fp8_ds_mla kv_lora_rank + 4 * kv_lora_rank/128 + 2 * rope_dim; bf16 2 * dim.
  int row_bytes() const;
  int dim() const { return kv_lora_rank + rope_dim; }
  // Throws ktune::Error(invalid_argument, "sparse_mla_decode", "<field>: ...") on the first bad field.
  void validate() const;
  // e.g. "h128.r512.d64.k2048.p64.bf16-fp8ds.q1" (+ ".chk"); kv "bf16" for a bf16 cache
  std::string key() const;
  static Problem from_key(const std::string& key);
  bool operator==(const Problem& o) const { return key() == o.key(); }
};

// Tile config. CUDA: "t<tokens per tile>.s<stages>.g<heads per CTA>[.w<warps>][.wg]", e.g. t64.s1.g64.w16, or
// the warp-specialized "t64.s2.g64.ws" and its paired form "t64.s2.g64.wsp".
// Host (CPU, host_kernel.h): "t<valid slots per tile>.g<heads per work item>.v<vec_width>.u<unroll>", e.g.
// t64.g16.v16.u2, with stages = warps = 0.
struct KTUNE_API Config {
  int tile = 64;           // selected slots per pipeline stage: 32 or 64 (host: 16, 32 or 64 valid slots per tile)
  int stages = 2;          // cp.async ring depth: 2..4; fp8_ds_mla also 1 (one raw tile, reloaded once dequantized)
  int heads_per_cta = 64;  // 16, 32 or 64 (divides num_heads); host: heads per work item 4, 8, 16 or 32
  int warps = 8;           // 8 or 16 warps per CTA; the key carries ".w16" when not 8
  bool wgmma = false;      // sm_90a only: S = Q K^T with wgmma from shared memory (key suffix ".wg")
  bool ws = false;         // sm_90a, fp8_ds_mla, t64.s2.g64 or t64.s2.g16 only: the warp-specialized kernel
                           // (kernel_ws.cuh; key suffix ".ws", warps = 12: three warpgroups)
  bool paired = false;     // with ws, 128 heads: the two head-group CTAs of a token as a cluster
                           // that share each tile's loads and conversion (decode_kernel_ws_pair; key suffix ".wsp")
  int vec_width = 0;       // host only: fp32 lanes per score accumulator (8 or 16); 0 = a CUDA config
  int unroll = 0;          // host only: cache rows per pass of the score loop (1, 2 or 4)
  bool host() const { return vec_width != 0; }
  static Config host_config(int tile, int heads_per_item, int vec_width, int unroll);
  // t64.s2.g64.ws / t64.s2.g64.wsp; heads_per_cta 16: t64.s2.g16.ws
  static Config warp_specialized(bool paired = false, int heads_per_cta = 64);
  std::string key() const;
  static Config from_key(const std::string& key);  // either form
  bool operator==(const Config& o) const {
    return tile == o.tile && stages == o.stages && heads_per_cta == o.heads_per_cta && warps == o.warps &&
           wgmma == o.wgmma && ws == o.ws && paired == o.paired && vec_width == o.vec_width && unroll == o.unroll;
  }
};

DeviceLimits default_limits(const Arch& arch);
Config default_config(const Problem& p, const Arch& arch);
std::vector<Config> search_space(const Problem& p, const Arch& arch);
// "" when the config can run the problem on that arch/device, else the reason.
std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim);

// A config's module on a GPU arch: entry point [0] = the config's decode kernel. Options: "-std=c++17".
// Arch "host": the CPU kernel (host_kernel.h) with entry points [0] = host_decode, [1] = host_combine, each
// void(const ktune_mla::Params&, int begin_item, int end_item).
GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch);
// The problem's shared module on a GPU arch (config key kSharedConfig): [0] = combine_kernel (kCombineEntry), the
// split merge, which no tile config changes. The host backend has none.
GeneratedKernel generate_shared(const Problem& p, const Arch& arch);
constexpr int kCombineEntry = 0;

// Host launch planning: decode items are (token, head group, split); splits are added only while there are
// fewer items than ~2 per thread, and each split keeps at least two tiles of the top-k list.
int choose_num_splits_host(const Problem& p, const Config& c, int num_tokens, int threads);
// Item counts in 64 bits: the launch refuses a count past the host pool's int (host_pipeline::work_items).
inline long long host_decode_items(const Problem& p, const Config& c, int num_tokens, int num_splits) {
  return (long long)num_tokens * (p.num_heads / c.heads_per_cta) * (num_splits > 0 ? num_splits : 1);
}
inline long long host_combine_items(const Problem& p, int num_tokens) { return (long long)num_tokens * p.num_heads; }

// Launch planning: depends only on the static problem, the config and num_tokens.
int ctas_per_sm(const Problem& p, const Config& c, const DeviceLimits& lim);
int choose_num_splits(const Problem& p, const Config& c, int num_tokens, const DeviceLimits& lim);
int max_splits(const Problem& p, const Config& c);  // one tile per split at most
size_t workspace_bytes(const Problem& p, int num_tokens, int num_splits);
LaunchDims decode_dims(const Problem& p, const Config& c, int num_tokens, int num_splits);
LaunchDims combine_dims(const Problem& p, int num_tokens);  // grid (num_heads, num_tokens), 128 threads

const char* kv_format_name(KvFormat f);  // "bf16" / "fp8ds"

}  // namespace ktune::mla
