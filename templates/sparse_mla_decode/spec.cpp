#include "sparse_mla_decode/spec.hpp"

#include <algorithm>
#include <sstream>

#include "device_source.hpp"
#include "key_parse.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "sparse_mla_decode/shape.h"
#include "spec_support.hpp"

namespace ktune::mla {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw Error(Status::invalid_argument, "sparse_mla_decode", field + ": " + what);
}

// Keys: templates/key_parse.hpp (sizes up to 7 digits: topk, n and k reach 1M).
bool parse_num(const std::string& tok, const std::string& prefix, int* out) {
  return key_parse::parse_num(tok, prefix, out, 7);
}
using key_parse::split_dots;

ktune_mla::Shape shape_of(const Problem& p, const Config& c) {
  return ktune_mla::make_shape(p.kv_lora_rank, p.rope_dim, p.kv_format == KvFormat::Fp8DsMla, c.heads_per_cta, c.tile,
                               c.stages, c.warps, c.ws);
}


}  // namespace

const char* kv_format_name(KvFormat f) { return f == KvFormat::Bf16 ? "bf16" : "fp8ds"; }

int Problem::row_bytes() const {
  return kv_format == KvFormat::Fp8DsMla ? kv_lora_rank + 4 * (kv_lora_rank / 128) + 2 * rope_dim : 2 * dim();
}

void Problem::validate() const {
  const auto num = [](int v) { return std::to_string(v); };
  if (num_heads != 16 && num_heads != 32 && num_heads != 64 && num_heads != 128)
    fail("num_heads", "expected 16, 32, 64 or 128, got " + num(num_heads));
  if (kv_lora_rank != 128 && kv_lora_rank != 256 && kv_lora_rank != 384 && kv_lora_rank != 512)
    fail("kv_lora_rank", "expected 128, 256, 384 or 512, got " + num(kv_lora_rank));
  if (rope_dim != 64 && rope_dim != 128) fail("rope_dim", "expected 64 or 128, got " + num(rope_dim));
  if (topk < 1 || topk > 131072) fail("topk", "expected 1..131072, got " + num(topk));
  if (page_size < 16 || page_size > 1024 || (page_size & (page_size - 1)) != 0)
    fail("page_size", "expected a power of two in 16..1024, got " + num(page_size));
  if (kv_format != KvFormat::Bf16 && kv_format != KvFormat::Fp8DsMla)
    fail("kv_dtype", "expected bf16 or fp8_ds_mla");
  if (row_bytes() % 16 != 0)
    fail("kv_lora_rank", "the fp8_ds_mla row (" + num(row_bytes()) + " bytes) must be a multiple of 16 bytes");
  if (max_q_len < 1 || max_q_len > 16) fail("max_q_len", "expected 1..16, got " + num(max_q_len));
}

std::string Problem::key() const {
  std::ostringstream o;
  o << 'h' << num_heads << ".r" << kv_lora_rank << ".d" << rope_dim << ".k" << topk << ".p" << page_size
    << ".bf16-" << kv_format_name(kv_format) << ".q" << max_q_len;
  if (checked) o << ".chk";
  return o.str();
}

Problem Problem::from_key(const std::string& key) {
  const auto bad = [&](const std::string& why) -> Problem {
    fail("key", "cannot parse '" + key + "' as a sparse_mla_decode problem key (" + why +
                    "); expected e.g. h128.r512.d64.k2048.p64.bf16-fp8ds.q1[.chk]");
  };
  const std::vector<std::string> t = split_dots(key);
  if (t.size() < 7 || t.size() > 8) return bad("expected 7 or 8 fields");
  Problem p;
  if (!parse_num(t[0], "h", &p.num_heads)) return bad("field 1 '" + t[0] + "' is not h<num_heads>");
  if (!parse_num(t[1], "r", &p.kv_lora_rank)) return bad("field 2 '" + t[1] + "' is not r<kv_lora_rank>");
  if (!parse_num(t[2], "d", &p.rope_dim)) return bad("field 3 '" + t[2] + "' is not d<rope_dim>");
  if (!parse_num(t[3], "k", &p.topk)) return bad("field 4 '" + t[3] + "' is not k<topk>");
  if (!parse_num(t[4], "p", &p.page_size)) return bad("field 5 '" + t[4] + "' is not p<page_size>");
  if (t[5] == "bf16-fp8ds") p.kv_format = KvFormat::Fp8DsMla;
  else if (t[5] == "bf16-bf16") p.kv_format = KvFormat::Bf16;
  else return bad("field 6 '" + t[5] + "' is not bf16-fp8ds or bf16-bf16");
  if (!parse_num(t[6], "q", &p.max_q_len)) return bad("field 7 '" + t[6] + "' is not q<max_q_len>");
  if (t.size() == 8) {
    if (t[7] != "chk") return bad("unknown flag '" + t[7] + "'");
    p.checked = true;
  }
  p.validate();
  if (p.key() != key) return bad("not in canonical form");
  return p;
}

Config Config::host_config(int tile, int heads_per_item, int vec_width, int unroll) {
  Config c;
  c.tile = tile;
  c.stages = 0;
  c.heads_per_cta = heads_per_item;
  c.warps = 0;
  c.wgmma = false;
  c.vec_width = vec_width;
  c.unroll = unroll;
  return c;
}

Config Config::warp_specialized(bool paired, int heads_per_cta) {
  Config c;
  c.tile = 64;
  c.stages = 2;
  c.heads_per_cta = heads_per_cta;
  c.warps = 12;
  c.ws = true;
  c.paired = paired;
  return c;
}

std::string Config::key() const {
  if (host())
    return "t" + std::to_string(tile) + ".g" + std::to_string(heads_per_cta) + ".v" + std::to_string(vec_width) +
           ".u" + std::to_string(unroll);
  std::string k = "t" + std::to_string(tile) + ".s" + std::to_string(stages) + ".g" + std::to_string(heads_per_cta);
  if (ws) return k + (paired ? ".wsp" : ".ws");  // 12 warps, implied
  if (warps != 8) k += ".w" + std::to_string(warps);
  if (wgmma) k += ".wg";
  return k;
}

Config Config::from_key(const std::string& key) {
  std::vector<std::string> t = split_dots(key);
  Config c;
  if (t.size() == 4 && t[1].size() > 1 && t[1][0] == 'g') {  // host: t<T>.g<G>.v<V>.u<U>
    int tt = 0, g = 0, v = 0, u = 0;
    if (parse_num(t[0], "t", &tt) && parse_num(t[1], "g", &g) && parse_num(t[2], "v", &v) &&
        parse_num(t[3], "u", &u) && v > 0 && u > 0) {
      c = host_config(tt, g, v, u);
      if (c.key() == key) return c;
    }
    fail("config key", "cannot parse '" + key + "'; expected a host key t<tile>.g<heads_per_item>.v<vec_width>.u<unroll>, "
                       "e.g. t32.g16.v16.u2");
  }
  if (t.size() >= 4 && t.back() == "wg") {
    c.wgmma = true;
    t.pop_back();
  } else if (t.size() >= 4 && (t.back() == "ws" || t.back() == "wsp")) {
    c.ws = true;
    c.paired = t.back() == "wsp";
    c.warps = Config::warp_specialized().warps;
    t.pop_back();
  }
  bool ok = (t.size() == 3 || t.size() == 4) && parse_num(t[0], "t", &c.tile) && parse_num(t[1], "s", &c.stages) &&
            parse_num(t[2], "g", &c.heads_per_cta);
  if (ok && t.size() == 4) ok = parse_num(t[3], "w", &c.warps);
  if (!ok || c.key() != key)
    fail("config key", "cannot parse '" + key + "'; expected t<tokens_per_tile>.s<stages>.g<heads_per_cta>"
                       "[.w<warps>][.wg], e.g. t64.s2.g64, or t64.s2.g64.ws / .wsp");
  return c;
}

DeviceLimits default_limits(const Arch& arch) { return arch_limits(arch); }  // ktune/device.hpp

std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim) {
  if (std::string bad = spec_support::problem_error(p); !bad.empty()) return bad;
  if (arch.host) {  // the CPU kernel (host_kernel.h): no device limits apply
    if (!c.host()) return "a CUDA config cannot run on the host; expected t<tile>.g<heads_per_item>.v<vec_width>.u<unroll>";
    if (c.tile != 16 && c.tile != 32 && c.tile != 64) return "tile: expected 16, 32 or 64";
    if (c.heads_per_cta != 4 && c.heads_per_cta != 8 && c.heads_per_cta != 16 && c.heads_per_cta != 32)
      return "heads_per_item: expected 4, 8, 16 or 32";
    if (p.num_heads % c.heads_per_cta != 0)
      return "heads_per_item: expected a divisor of num_heads (" + std::to_string(p.num_heads) + ")";
    if (c.vec_width != 8 && c.vec_width != 16) return "vec_width: expected 8 or 16";
    if (c.unroll != 1 && c.unroll != 2 && c.unroll != 4) return "unroll: expected 1, 2 or 4";
    return "";
  }
  if (c.host()) return "a host config (t<T>.g<G>.v<V>.u<U>) cannot run on a CUDA arch";
  if (arch.sm() < 89) return "sparse_mla_decode needs sm_89 or newer (e4m3 conversion), got sm_" + std::to_string(arch.sm());
  if (c.heads_per_cta > p.num_heads || p.num_heads % std::max(1, c.heads_per_cta) != 0)
    return "heads_per_cta: expected a divisor of num_heads (" + std::to_string(p.num_heads) + ")";
  const ktune_mla::Shape s = shape_of(p, c);
  if (const char* why = ktune_mla::shape_error(s)) return why;
  if (c.ws) {
    if (arch.sm() != 90 || arch.suffix != 'a') return "ws: only on sm_90a (wgmma, setmaxnreg)";
    if (c.wgmma) return "ws: the warp-specialized kernel has no .wg form";
    if (c.warps != 12) return "ws: 12 warps (three warpgroups)";
    if (c.paired && c.heads_per_cta != 64) return "wsp: needs 64 heads per CTA";
    if (c.paired && p.num_heads % (2 * c.heads_per_cta) != 0)
      return "wsp: needs 128 heads (the token's two 64-head CTAs form the cluster)";
  }
  if (c.paired && !c.ws) return "paired: only with the warp-specialized kernel (.wsp)";
  if (c.wgmma) {
    if (arch.sm() != 90 || arch.suffix != 'a') return "wgmma: only on sm_90a";
    if (c.heads_per_cta != 64) return "wgmma: needs 64 heads per CTA (M = 64)";
    const int n = c.tile / (s.threads / 128);
    if (n != 8 && n != 16 && n != 32) return "wgmma: tokens per warpgroup must be 8, 16 or 32";
  }
  if (s.threads > lim.max_threads_per_block) return "threads per block exceed the device limit";
  if (s.smem_total > lim.max_smem_per_block_optin)
    return "shared memory " + std::to_string(s.smem_total) + " B exceeds the per-block limit " +
           std::to_string(lim.max_smem_per_block_optin) + " B";
  return "";
}

int ctas_per_sm(const Problem& p, const Config& c, const DeviceLimits& lim) {
  const ktune_mla::Shape s = shape_of(p, c);
  const int by_smem = (lim.max_smem_per_block_optin + 1024) / (s.smem_total + 1024);
  return std::max(1, std::min({by_smem, s.min_blocks, 8}));
}

// Host default: 16 heads per item (every problem has >= 16; each decoded row serves 16 heads, and 16 heads of
// fp32 Q + O stay within L2), 32 valid slots per tile (an fp32 tile of 32 x 576 is 72 KB), 16 score lanes, 2 rows
// a pass. The tuner picks per key among the rest (docs/host_backend.md).
static Config default_host_config(const Problem&) { return Config::host_config(32, 16, 16, 2); }

Config default_config(const Problem& p, const Arch& arch) {
  p.validate();
  if (arch.host) return default_host_config(p);
  const DeviceLimits lim = default_limits(arch);
  const bool fp8 = p.kv_format == KvFormat::Fp8DsMla;
  const int g = std::min(p.num_heads, 64);
  // Largest head group (each gathered row serves the most heads), then the deepest ring that fits.
  std::vector<Config> prefs;
  // Warps (mma.sync path, measured): 8 at 64-head groups, 16 at 16-head groups; 32-head groups unmeasured: 16.
  const auto warps_for = [](int gg) { return gg >= 64 ? std::vector<int>{8, 16} : std::vector<int>{16, 8}; };
  if (fp8) {
    // 16-head groups (TP8 shards of 128 heads; memory-bound): 32-slot tiles, one raw tile, 8 warps, so two CTAs
    // share an SM (faster than the deep t64.s2.g16.w16 ring at 64 and 128 tokens).
    if (g == 16) prefs.push_back(Config::from_key("t32.s1.g16"));
    for (int gg : {g, 32, 16})
      for (int t : {64, 32})
        for (int st : {gg >= 64 ? 1 : 2, 1, 2, 3, 4})
          for (int w : warps_for(gg)) prefs.push_back(Config{t, st, gg, w});
  } else {
    for (int gg : {g, 32, 16})
      for (int t : {32, 64})
        for (int st : {2, 3, 4})
          for (int w : warps_for(gg)) prefs.push_back(Config{t, st, gg, w});
  }
  // sm_90a, fp8_ds_mla at 16-head groups (tensor-parallel shards): the 16-head warp-specialized kernel, whose two
  // producers keep more row loads in flight than the eight-warp kernel's phases allow.
  if (arch.sm() == 90 && arch.suffix == 'a' && g == 16 && fp8) {
    const Config ws16 = Config::warp_specialized(false, 16);
    if (can_implement(p, ws16, arch, lim).empty()) return ws16;
  }
  // sm_90a: S = Q K^T through wgmma when a 64-head group fits (faster than every mma.sync tile, fp8 and bf16
  // caches). fp8_ds_mla at 64-head groups: the warp-specialized kernel, which runs the dequantization beside the
  // tensor cores instead of between them (docs/sparse_mla_decode.md, "Measured"); at 128 heads its paired
  // form, where the two head groups of a token share each tile's loads and conversion.
  if (arch.sm() == 90 && arch.suffix == 'a' && g == 64 && fp8) {
    for (bool paired : {true, false}) {
      const Config ws = Config::warp_specialized(paired);
      if (can_implement(p, ws, arch, lim).empty()) return ws;
    }
  }
  if (arch.sm() == 90 && arch.suffix == 'a' && g == 64) {
    const Config wg = Config::from_key(fp8 ? "t64.s1.g64.wg" : "t32.s2.g64.wg");
    if (can_implement(p, wg, arch, lim).empty()) return wg;
  }
  for (const Config& c : prefs)
    if (can_implement(p, c, arch, lim).empty()) return c;
  throw Error(Status::internal, "sparse_mla_decode",
              "no default config fits problem " + p.key() + " on " + arch.str());
}

std::vector<Config> search_space(const Problem& p, const Arch& arch) {
  if (arch.host) {  // tile, heads per item, (lanes, rows a pass); the default first. Kept to 8 so host tuning
                    // and the [host] tests (which compile every one) stay CI-sized.
    std::vector<Config> out = {default_host_config(p)};
    for (int t : {32, 64})
      for (int g : {16, 8})
        for (const auto& vu : {std::pair<int, int>{16, 2}, std::pair<int, int>{8, 4}}) {
          const Config c = Config::host_config(t, g, vu.first, vu.second);
          if (std::find(out.begin(), out.end(), c) == out.end() && can_implement(p, c, arch, DeviceLimits{}).empty())
            out.push_back(c);
        }
    return out;
  }
  const DeviceLimits lim = default_limits(arch);
  std::vector<Config> out = {default_config(p, arch)};
  for (const Config& ws : {Config::warp_specialized(false), Config::warp_specialized(true),
                           Config::warp_specialized(false, 16)}) {
    // The 16-head form gathers every row once per 16 heads: at 128 heads 3.3x slower than the paired kernel
    // (H200), so it is a candidate for shards of up to 32 heads only.
    if (ws.heads_per_cta == 16 && p.num_heads > 32) continue;
    if (std::find(out.begin(), out.end(), ws) == out.end() && can_implement(p, ws, arch, lim).empty()) out.push_back(ws);
  }
  for (int g : {64, 32, 16})
    for (int t : {64, 32})
      for (int st : {1, 2, 3, 4})
        for (int w : {16, 8})
          for (bool wg : {false, true}) {
            const Config c{t, st, g, w, wg};
            if (std::find(out.begin(), out.end(), c) == out.end() && can_implement(p, c, arch, lim).empty())
              out.push_back(c);
          }
  return out;
}

namespace {

// The host translation unit: the shape as compile-time constants, the host tunables, and the array bounds
// (exact here). The checked flag does not change it: the host launcher checks every index before the call.
GeneratedKernel generate_host(const Problem& p, const Config& c) {
  std::ostringstream s;
  s << "// ktune sparse_mla_decode " << p.key() << " / " << c.key() << " (host)\n"
    << "#include \"sparse_mla_decode/host_kernel.h\"\n"
    << "namespace ktune_mla {\n"
    << "struct Spec {\n"
    << "  static constexpr int kNumHeads = " << p.num_heads << ", kLat = " << p.kv_lora_rank
    << ", kRope = " << p.rope_dim << ", kTopk = " << p.topk << ";\n"
    << "  static constexpr bool kFp8 = " << (p.kv_format == KvFormat::Fp8DsMla ? "true" : "false") << ";\n"
    << "  static constexpr int kTile = " << c.tile << ", kHeadsPerItem = " << c.heads_per_cta
    << ", kVecWidth = " << c.vec_width << ", kUnroll = " << c.unroll << ";\n"
    << "  static constexpr int kCapDim = kLat + kRope, kCapTile = kTile, kCapHeads = kHeadsPerItem;\n"
    << "};\n"
    << "}  // namespace ktune_mla\n";
  GeneratedKernel k;
  k.family = "sparse_mla_decode";
  k.problem_key = p.key();
  k.config_key = c.key();
  k.source = s.str();
  k.entry_points = {"ktune_mla::host_decode<ktune_mla::Spec>", "ktune_mla::host_combine<ktune_mla::Spec>"};
  return k;
}

}  // namespace

int choose_num_splits_host(const Problem& p, const Config& c, int num_tokens, int threads) {
  if (num_tokens <= 0 || !c.host() || c.heads_per_cta <= 0) return 1;
  const int items = num_tokens * (p.num_heads / c.heads_per_cta);
  const int want = 2 * std::max(1, threads);
  if (items >= want) return 1;
  const int tiles = (p.topk + c.tile - 1) / c.tile;
  const int by_threads = (want + items - 1) / items;
  return std::max(1, std::min({by_threads, tiles / 2, 64}));
}

namespace {

// The Spec members every module of the problem shares.
std::string problem_spec_members(const Problem& p) {
  std::ostringstream s;
  s << "  static constexpr int kNumHeads = " << p.num_heads << ", kLat = " << p.kv_lora_rank
    << ", kRope = " << p.rope_dim << ", kTopk = " << p.topk << ", kPageSize = " << p.page_size << ";\n"
    << "  static constexpr bool kFp8 = " << device_source::flag(p.kv_format == KvFormat::Fp8DsMla) << ";\n"
    << "  static constexpr int kMaxQLen = " << p.max_q_len << ";\n"
    << "  static constexpr bool kChecked = " << device_source::flag(p.checked) << ";\n";
  return s.str();
}

}  // namespace

GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch) {
  spec_support::require_implementable("sparse_mla_decode", p, c, arch, default_limits(arch));
  if (arch.host) return generate_host(p, c);
  std::ostringstream config;
  config << "  static constexpr int kHeadsPerCta = " << c.heads_per_cta << ", kTile = " << c.tile
         << ", kStages = " << c.stages << ", kWarps = " << c.warps << ";\n"
         << "  static constexpr bool kWgmma = " << device_source::flag(c.wgmma) << ";\n";
  return device_source::generate(
      {"sparse_mla_decode", p.key(), c.key(), p.key() + " / " + c.key(),
       {c.ws ? "sparse_mla_decode/kernel_ws.cuh" : "sparse_mla_decode/kernel.cuh"}, "ktune_mla",
       problem_spec_members(p) + config.str(),
       {c.paired ? "ktune_mla::decode_kernel_ws_pair<ktune_mla::Spec>"
        : c.ws   ? "ktune_mla::decode_kernel_ws<ktune_mla::Spec>"
                 : "ktune_mla::decode_kernel<ktune_mla::Spec>"}});
}

GeneratedKernel generate_shared(const Problem& p, const Arch& arch) {
  p.validate();
  if (arch.host) fail("config", std::string(kSharedConfig) + ": the host backend keeps the combine in every module");
  return device_source::generate({"sparse_mla_decode", p.key(), kSharedConfig, p.key() + " / " + kSharedConfig,
                                  {"sparse_mla_decode/kernel.cuh"}, "ktune_mla", problem_spec_members(p),
                                  {"ktune_mla::combine_kernel<ktune_mla::Spec>"}});
}

int max_splits(const Problem& p, const Config& c) {
  const int tiles = (p.topk + c.tile - 1) / c.tile;
  return std::max(1, std::min(tiles, 64));
}

int choose_num_splits(const Problem& p, const Config& c, int num_tokens, const DeviceLimits& lim) {
  if (num_tokens <= 0) return 1;
  const long long slots = (long long)lim.sm_count * ctas_per_sm(p, c, lim);
  const long long base = (long long)num_tokens * (p.num_heads / c.heads_per_cta);
  const int tiles = (p.topk + c.tile - 1) / c.tile;
  // Wave model in tile-times: each CTA costs its tiles plus ~2 tiles of prologue (Q load, ring fill); waves
  // beyond the resident slots run one after another; a split adds the combine pass (~2 tile-times).
  const int kmax = std::max(1, std::min(tiles / 2, 64));
  int best = 1;
  double best_cost = 1e300;
  for (int k = 1; k <= kmax; ++k) {
    const long long ctas = base * k;
    const double waves = double((ctas + slots - 1) / slots);
    const double cost = waves * (double((tiles + k - 1) / k) + 2.0) + (k > 1 ? 2.0 : 0.0);
    if (cost < best_cost * (1 - 1e-3)) {
      best_cost = cost;
      best = k;
    }
  }
  return best;
}

size_t workspace_bytes(const Problem& p, int num_tokens, int num_splits) {
  if (num_splits <= 1) return 0;
  return size_t(num_tokens) * p.num_heads * num_splits * (p.kv_lora_rank + 2) * sizeof(float);
}

LaunchDims decode_dims(const Problem& p, const Config& c, int num_tokens, int num_splits) {
  const ktune_mla::Shape s = shape_of(p, c);
  LaunchDims d;
  d.grid[0] = unsigned(p.num_heads / c.heads_per_cta);
  d.grid[1] = unsigned(std::max(1, num_splits));
  d.grid[2] = unsigned(std::max(1, num_tokens));
  d.block[0] = unsigned(s.threads);
  d.dynamic_smem_bytes = unsigned(s.smem_total);
  return d;
}

LaunchDims combine_dims(const Problem& p, int num_tokens) {
  LaunchDims d;
  d.grid[0] = unsigned(p.num_heads);
  d.grid[1] = unsigned(std::max(1, num_tokens));
  d.block[0] = 128;
  return d;
}

}  // namespace ktune::mla
