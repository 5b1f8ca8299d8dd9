#include "xqa_decode/spec.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

#include "device_source.hpp"
#include "key_parse.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "spec_support.hpp"
#include "xqa_decode/shape.h"

namespace ktune::xqa {
namespace {

namespace kc = ::ktune_common;
using key_parse::is_pow2_in;
using key_parse::parse_num;
using key_parse::split_dots;

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw Error(Status::invalid_argument, "xqa_decode", field + ": " + what);
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "bf16") *out = kc::kBF16;
  else if (s == "fp16") *out = kc::kFP16;
  else if (s == "e4m3") *out = kc::kE4M3;
  else return false;
  return true;
}

ktune_xqa::Shape shape_of(const Problem& p, const Config& c) {
  return ktune_xqa::make_shape(p.head_dim, p.group_size(), p.max_q_len, p.page_size, int(p.kv_dtype),
                               c.tokens_per_tile, c.stages, c.warps, c.m_tiles_per_cta, c.wgmma);
}


}  // namespace

const char* dtype_name(DType t) { return key_parse::dtype_token(t); }

void Problem::validate() const {
  const auto num = [](int v) { return std::to_string(v); };
  if (head_dim != 64 && head_dim != 128 && head_dim != 256)
    fail("head_dim", "expected 64, 128 or 256, got " + num(head_dim));
  if (num_kv_heads < 1 || num_kv_heads > 1024) fail("num_kv_heads", "expected 1..1024, got " + num(num_kv_heads));
  if (num_q_heads < 1 || num_q_heads % num_kv_heads != 0)
    fail("num_q_heads", "expected a positive multiple of num_kv_heads (" + num(num_kv_heads) + "), got " +
                            num(num_q_heads));
  if (group_size() > 16)
    fail("num_q_heads", "expected num_q_heads / num_kv_heads in 1..16, got " + num(group_size()));
  if (page_size != 16 && page_size != 32 && page_size != 64 && page_size != 128)
    fail("page_size", "expected 16, 32, 64 or 128, got " + num(page_size));
  if (layout != Layout::Hnd && layout != Layout::Nhd) fail("layout", "expected hnd or nhd");
  const auto dt_ok = [](DType t) { return t == kc::kBF16 || t == kc::kFP16 || t == kc::kE4M3; };
  if (!dt_ok(q_dtype)) fail("q_dtype", std::string("expected bf16, fp16 or e4m3, got ") + dtype_name(q_dtype));
  if (!dt_ok(kv_dtype)) fail("kv_dtype", std::string("expected bf16, fp16 or e4m3, got ") + dtype_name(kv_dtype));
  if (!dt_ok(out_dtype)) fail("out_dtype", std::string("expected bf16, fp16 or e4m3, got ") + dtype_name(out_dtype));
  if (kv_dtype != kc::kE4M3 && q_dtype != kv_dtype)
    fail("q_dtype", std::string("with ") + dtype_name(kv_dtype) + " KV expected q_dtype " + dtype_name(kv_dtype) +
                        ", got " + dtype_name(q_dtype));
  if (max_q_len < 1 || max_q_len > kMaxQLenLimit)
    fail("max_q_len", "expected 1.." + num(kMaxQLenLimit) + ", got " + num(max_q_len));
  if (mask != MaskKind::None && mask != MaskKind::Causal && mask != MaskKind::Explicit)
    fail("mask", "expected none, causal or explicit");
  if (mask == MaskKind::None && max_q_len != 1)
    fail("mask", "none is only valid with max_q_len 1 (got max_q_len " + num(max_q_len) + "); use causal or explicit");
}

std::string Problem::key() const {
  std::ostringstream o;
  o << 'd' << head_dim << ".h" << num_q_heads << ".kv" << num_kv_heads << ".p" << page_size << '.'
    << (layout == Layout::Hnd ? "hnd" : "nhd") << '.' << dtype_name(q_dtype) << '-' << dtype_name(kv_dtype) << '-'
    << dtype_name(out_dtype) << ".q" << max_q_len << '.'
    << (mask == MaskKind::None ? "none" : mask == MaskKind::Causal ? "causal" : "mask");
  if (has_sinks) o << ".sink";
  if (sliding_window) o << ".win";
  if (softcap) o << ".cap";
  if (write_lse) o << ".lse";
  if (checked) o << ".chk";
  return o.str();
}

Problem Problem::from_key(const std::string& key) {
  const auto bad = [&](const std::string& why) -> Problem {
    fail("key", "cannot parse '" + key + "' as an xqa_decode problem key (" + why +
                    "); expected e.g. d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.sink.win.cap.lse.chk");
  };
  const std::vector<std::string> t = split_dots(key);
  if (t.size() < 8) return bad("too few fields");
  Problem p;
  if (!parse_num(t[0], "d", &p.head_dim)) return bad("field 1 '" + t[0] + "' is not d<head_dim>");
  if (!parse_num(t[1], "h", &p.num_q_heads)) return bad("field 2 '" + t[1] + "' is not h<num_q_heads>");
  if (!parse_num(t[2], "kv", &p.num_kv_heads)) return bad("field 3 '" + t[2] + "' is not kv<num_kv_heads>");
  if (!parse_num(t[3], "p", &p.page_size)) return bad("field 4 '" + t[3] + "' is not p<page_size>");
  if (t[4] == "hnd") p.layout = Layout::Hnd;
  else if (t[4] == "nhd") p.layout = Layout::Nhd;
  else return bad("field 5 '" + t[4] + "' is not hnd or nhd");
  {
    const std::string& s = t[5];
    const size_t a = s.find('-'), b2 = a == std::string::npos ? a : s.find('-', a + 1);
    if (a == std::string::npos || b2 == std::string::npos || s.find('-', b2 + 1) != std::string::npos ||
        !parse_dtype(s.substr(0, a), &p.q_dtype) || !parse_dtype(s.substr(a + 1, b2 - a - 1), &p.kv_dtype) ||
        !parse_dtype(s.substr(b2 + 1), &p.out_dtype))
      return bad("field 6 '" + s + "' is not <q>-<kv>-<out> dtypes");
  }
  if (!parse_num(t[6], "q", &p.max_q_len)) return bad("field 7 '" + t[6] + "' is not q<max_q_len>");
  if (t[7] == "none") p.mask = MaskKind::None;
  else if (t[7] == "causal") p.mask = MaskKind::Causal;
  else if (t[7] == "mask") p.mask = MaskKind::Explicit;
  else return bad("field 8 '" + t[7] + "' is not none, causal or mask");
  static const char* const kFlags[] = {"sink", "win", "cap", "lse", "chk"};
  bool* const flag_fields[] = {&p.has_sinks, &p.sliding_window, &p.softcap, &p.write_lse, &p.checked};
  size_t next = 0;
  for (size_t i = 8; i < t.size(); ++i) {
    size_t f = next;
    while (f < 5 && t[i] != kFlags[f]) ++f;
    if (f == 5) return bad("unknown or out-of-order flag '" + t[i] + "'");
    *flag_fields[f] = true;
    next = f + 1;
  }
  p.validate();
  if (p.key() != key) return bad("not in canonical form");
  return p;
}

Config Config::host_config(int tokens_per_tile, int vec_width, int unroll) {
  Config c;
  c.tokens_per_tile = tokens_per_tile;
  c.stages = 0;
  c.warps = 0;
  c.m_tiles_per_cta = 0;
  c.vec_width = vec_width;
  c.unroll = unroll;
  return c;
}

std::string Config::key() const {
  if (host())
    return "t" + std::to_string(tokens_per_tile) + ".v" + std::to_string(vec_width) + ".u" + std::to_string(unroll);
  std::string k = "t" + std::to_string(tokens_per_tile) + ".s" + std::to_string(stages) + ".w" + std::to_string(warps);
  if (m_tiles_per_cta != 0) k += ".m" + std::to_string(m_tiles_per_cta);
  if (wgmma) k += ".wg";
  return k;
}

Config Config::from_key(const std::string& key) {
  const std::vector<std::string> t = split_dots(key);
  Config c;
  bool ok;
  if (t.size() == 3 && t[1].size() > 1 && t[1][0] == 'v') {  // host: t<T>.v<V>.u<U>
    int tt = 0, v = 0, u = 0;
    ok = parse_num(t[0], "t", &tt) && parse_num(t[1], "v", &v) && parse_num(t[2], "u", &u) && v > 0 && u > 0;
    if (ok) c = host_config(tt, v, u);
  } else {
    std::vector<std::string> f = t;
    c.wgmma = !f.empty() && f.back() == "wg";
    if (c.wgmma) f.pop_back();
    ok = (f.size() == 3 || f.size() == 4) && parse_num(f[0], "t", &c.tokens_per_tile) &&
         parse_num(f[1], "s", &c.stages) && parse_num(f[2], "w", &c.warps);
    if (ok && f.size() == 4) ok = parse_num(f[3], "m", &c.m_tiles_per_cta) && c.m_tiles_per_cta > 0;
  }
  if (!ok || c.key() != key)
    fail("config key", "cannot parse '" + key + "'; expected t<tokens_per_tile>.s<stages>.w<warps>[.m<m_tiles>][.wg], e.g. t64.s3.w4 "
                       "(host: t<tokens_per_tile>.v<vec_width>.u<unroll>, e.g. t64.v8.u4)");
  return c;
}

DeviceLimits default_limits(const Arch& arch) { return arch_limits(arch); }  // ktune/device.hpp

std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim) {
  if (std::string bad = spec_support::problem_error(p); !bad.empty()) return bad;
  if (arch.host) {  // the CPU kernel (host_kernel.h): no device limits apply
    if (!c.host()) return "a CUDA config cannot run on the host; expected t<tokens_per_tile>.v<vec_width>.u<unroll>";
    if (!is_pow2_in(c.tokens_per_tile, 16, 128)) return "tokens_per_tile: expected 16, 32, 64 or 128";
    if (c.vec_width != 4 && c.vec_width != 8 && c.vec_width != 16) return "vec_width: expected 4, 8 or 16";
    if (c.unroll != 1 && c.unroll != 2 && c.unroll != 4) return "unroll: expected 1, 2 or 4";
    return "";
  }
  if (c.host()) return "a host config (t<T>.v<V>.u<U>) cannot run on a CUDA arch";
  if (arch.sm() < 80) return "xqa_decode needs sm_80 or newer (cp.async, bf16 mma), got sm_" + std::to_string(arch.sm());
  if (!is_pow2_in(c.tokens_per_tile, 16, 256)) return "tokens_per_tile: expected 16, 32, 64, 128 or 256";
  if (c.stages < 2 || c.stages > 8) return "stages: expected 2..8";
  if (!is_pow2_in(c.warps, 1, 16)) return "warps: expected 1, 2, 4, 8 or 16";
  if (c.m_tiles_per_cta < 0 || c.m_tiles_per_cta > 16) return "m_tiles_per_cta: expected 0..16";
  if (c.wgmma && (arch.sm() != 90 || arch.suffix != 'a')) return "wg: wgmma runs only on sm_90a, got " + arch.str();
  const ktune_xqa::Shape s = shape_of(p, c);
  if (const char* why = ktune_xqa::shape_error(s)) return why;
  if (s.threads > lim.max_threads_per_block) return "threads per block exceed the device limit";
  if ((long long)p.num_kv_heads * s.m_groups > 65535)
    return "num_kv_heads * row groups (" + std::to_string(p.num_kv_heads) + " * " + std::to_string(s.m_groups) +
           ") exceed grid.y 65535 (use more m tiles per CTA)";
  if (s.smem_total > lim.max_smem_per_block_optin)
    return "shared memory " + std::to_string(s.smem_total) + " B exceeds the per-block limit " +
           std::to_string(lim.max_smem_per_block_optin) + " B";
  return "";
}

int ctas_per_sm(const Problem& p, const Config& c, const DeviceLimits& lim) {
  const ktune_xqa::Shape s = shape_of(p, c);
  const int by_smem = (lim.max_smem_per_block_optin + 1024) / (s.smem_total + 1024);
  const int by_threads = 2048 / s.threads;
  const int regs = std::max(65536 / (s.threads * s.min_blocks), 32);  // the compiler's cap
  const int by_regs = 65536 / (s.threads * std::min(regs, (s.est_regs + 7) / 8 * 8));
  return std::max(1, std::min({by_smem, by_threads, by_regs, 32}));
}

// Host default (measured on AVX-512 x86-64, docs/host_backend.md): 16 score lanes (one 512-bit or two 256-bit
// registers per accumulator) beat 8; 64-token tiles keep the fp32 K/V tiles in L1/L2; 4 tokens a pass reuse
// each load of Q. The tuner picks per key among the rest.
static Config default_host_config(const Problem&) { return Config::host_config(64, 16, 4); }

Config default_config(const Problem& p, const Arch& arch) {
  p.validate();
  if (arch.host) return default_host_config(p);
  const DeviceLimits lim = default_limits(arch);
  const int m_tiles = (p.max_q_len * p.group_size() + 15) / 16;
  const bool fp8 = kc::dtype_size(int(p.kv_dtype)) == 1;
  // 64 or 128 query rows a kv head on sm_90a with 16-bit KV: the wgmma path, a warpgroup per 64 rows with
  // 32-token tiles and two stages (64 rows: 4 CTAs per SM). On the H200 at B64 L4096 (docs/xqa_decode.md): q16 x
  // group 4 263-270 us against 288-294 for the mma.sync default, q16 x group 8 372 us against 545.
  // can_implement refuses it on other arches, dtypes and head dims.
  if (m_tiles == 4 || m_tiles == 8) {
    Config wg{32, 2, m_tiles, 0};
    wg.wgmma = true;
    if (can_implement(p, wg, arch, lim).empty()) return wg;
  }
  // Small CTAs that keep 4 per SM resident win on a memory-bound decode (measured against 4-warp tiles:
  // docs/xqa_decode.md). With more row tiles, one warp per row tile first, then larger tiles; rows are split
  // over CTAs only when registers force it.
  int w0 = 2;
  while (w0 < m_tiles && w0 < 8) w0 *= 2;
  std::vector<int> warps = {w0};
  for (int w : {2, 4, 8, 1, 16})
    if (w != w0) warps.push_back(w);
  const std::vector<int> tiles = fp8 ? std::vector<int>{64, 32, 128, 16} : std::vector<int>{32, 64, 16, 128};
  for (int mt : {0, 8, 4, 2, 1}) {
    if (mt != 0 && mt >= m_tiles) continue;
    std::vector<Config> fits;
    for (int w : warps)
      for (int t : tiles)
        for (int st : {3, 2, 4}) {
          const Config c{t, st, w, mt};
          if (can_implement(p, c, arch, lim).empty()) fits.push_back(c);
        }
    // Bytes in flight per SM (stages - 1 tiles per resident CTA) is what keeps HBM busy.
    const auto in_flight = [&](const Config& c) {
      return (long long)ctas_per_sm(p, c, lim) * (c.stages - 1) * shape_of(p, c).smem_stage;
    };
    const auto warps_per_sm = [&](const Config& c) { return ctas_per_sm(p, c, lim) * c.warps; };
    for (const Config& c : fits)
      if (ctas_per_sm(p, c, lim) >= 4 && warps_per_sm(c) >= 8 && in_flight(c) >= 64 * 1024) return c;
    for (const Config& c : fits)
      if (ctas_per_sm(p, c, lim) >= 2 && warps_per_sm(c) >= 4 && in_flight(c) >= 32 * 1024) return c;
    if (!fits.empty()) return fits.front();
  }
  throw Error(Status::internal, "xqa_decode", "no default config fits problem " + p.key() + " on " + arch.str());
}

std::vector<Config> search_space(const Problem& p, const Arch& arch) {
  if (arch.host) {  // the host tunables: tile, lanes, tokens per pass (the default first)
    std::vector<Config> out = {default_host_config(p)};
    for (int t : {32, 64, 128})
      for (int v : {8, 16})
        for (int u : {1, 4}) {
          const Config c = Config::host_config(t, v, u);
          if (std::find(out.begin(), out.end(), c) == out.end() && can_implement(p, c, arch, DeviceLimits{}).empty())
            out.push_back(c);
        }
    return out;
  }
  const DeviceLimits lim = default_limits(arch);
  std::vector<Config> out;
  const int m_tiles = (p.max_q_len * p.group_size() + 15) / 16;
  for (int mt : {0, 8, 4, 2, 1}) {
    if (mt != 0 && mt >= m_tiles) continue;
    for (int warps : {2, 4, 8})
      for (int t : {32, 64, 128})
        for (int st : {2, 3, 4, 6}) {
          Config c{t, st, warps, mt};
          if (can_implement(p, c, arch, lim).empty()) out.push_back(c);
        }
    // sm_90a, 64 or 128 rows a CTA: the wgmma path (can_implement refuses it for other arches and shapes)
    for (int warps : {4, 8})
      for (int t : {32, 64})
        for (int st : {2, 3, 4}) {
          Config c{t, st, warps, mt};
          c.wgmma = true;
          if (can_implement(p, c, arch, lim).empty()) out.push_back(c);
        }
  }
  const Config d = default_config(p, arch);
  if (std::find(out.begin(), out.end(), d) == out.end()) out.insert(out.begin(), d);
  return out;
}

namespace {

// The host translation unit: the same Spec constants as the CUDA one where they mean the same, plus the host
// tunables and the array bounds (exact here: every shape value is a compile-time constant).
GeneratedKernel generate_host(const Problem& p, const Config& c) {
  std::ostringstream s;
  const auto b = [](bool v) { return v ? "true" : "false"; };
  s << "// ktune xqa_decode " << p.key() << " / " << c.key() << " (host)\n"
    << "#include \"xqa_decode/host_kernel.h\"\n"
    << "namespace ktune_xqa {\n"
    << "struct Spec {\n"
    << "  static constexpr int kHeadDim = " << p.head_dim << ";\n"
    << "  static constexpr int kNumKvHeads = " << p.num_kv_heads << ";\n"
    << "  static constexpr int kGroupSize = " << p.group_size() << ";\n"
    << "  static constexpr int kPageSize = " << p.page_size << ";\n"
    << "  static constexpr bool kLayoutHND = " << b(p.layout == Layout::Hnd) << ";\n"
    << "  static constexpr int kQType = " << int(p.q_dtype) << ", kKVType = " << int(p.kv_dtype)
    << ", kOutType = " << int(p.out_dtype) << ";\n"
    << "  static constexpr int kMaxQLen = " << p.max_q_len << ";\n"
    << "  static constexpr int kMask = " << int(p.mask) << ";\n"
    << "  static constexpr bool kSinks = " << b(p.has_sinks) << ", kSlidingWindow = " << b(p.sliding_window)
    << ", kSoftcap = " << b(p.softcap) << ", kWriteLse = " << b(p.write_lse) << ";\n"
    << "  static constexpr int kTokensPerTile = " << c.tokens_per_tile << ", kVecWidth = " << c.vec_width
    << ", kUnroll = " << c.unroll << ";\n"
    << "  static constexpr int kCapHeadDim = kHeadDim, kCapRows = " << host_rows_per_item(p)
    << ", kCapTile = kTokensPerTile;\n"
    << "};\n"
    << "}  // namespace ktune_xqa\n";
  GeneratedKernel k;
  k.family = "xqa_decode";
  k.problem_key = p.key();
  k.config_key = c.key();
  k.source = s.str();
  k.entry_points = {"ktune_xqa::host_decode<ktune_xqa::Spec>", "ktune_xqa::host_combine<ktune_xqa::Spec>"};
  return k;
}

}  // namespace

int choose_num_splits_host(const Problem& p, const Config& c, int batch, int max_seq_len, int threads) {
  if (batch <= 0 || max_seq_len <= 0) return 1;
  const int items = batch * p.num_kv_heads * host_row_groups(p);
  const int want = 2 * std::max(1, threads);
  if (items >= want) return 1;
  const int tiles = (max_seq_len + c.tokens_per_tile - 1) / c.tokens_per_tile;
  const int by_threads = (want + items - 1) / items;
  return std::max(1, std::min({by_threads, tiles / 2, 64}));
}

namespace {

// The Spec members every module of the problem shares (kernel.cuh's ProblemTraits reads only these).
std::string problem_spec_members(const Problem& p) {
  using device_source::flag;
  std::ostringstream s;
  s << "  static constexpr int kHeadDim = " << p.head_dim << ";\n"
    << "  static constexpr int kNumKvHeads = " << p.num_kv_heads << ";\n"
    << "  static constexpr int kGroupSize = " << p.group_size() << ";\n"
    << "  static constexpr int kPageSize = " << p.page_size << ";\n"
    << "  static constexpr bool kLayoutHND = " << flag(p.layout == Layout::Hnd) << ";\n"
    << "  static constexpr int kQType = " << int(p.q_dtype) << ", kKVType = " << int(p.kv_dtype)
    << ", kOutType = " << int(p.out_dtype) << ";\n"
    << "  static constexpr int kMaxQLen = " << p.max_q_len << ";\n"
    << "  static constexpr int kMask = " << int(p.mask) << ";\n"
    << "  static constexpr bool kSinks = " << flag(p.has_sinks) << ", kSlidingWindow = " << flag(p.sliding_window)
    << ", kSoftcap = " << flag(p.softcap) << ", kWriteLse = " << flag(p.write_lse) << ";\n"
    << "  static constexpr bool kChecked = " << flag(p.checked) << ";\n";
  return s.str();
}

}  // namespace

GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch) {
  spec_support::require_implementable("xqa_decode", p, c, arch, default_limits(arch));
  if (arch.host) return generate_host(p, c);
  std::ostringstream config;
  config << "  static constexpr int kTokensPerTile = " << c.tokens_per_tile << ", kStages = " << c.stages
         << ", kWarps = " << c.warps << ", kMTilesPerCta = " << c.m_tiles_per_cta << ";\n"
         << "  static constexpr bool kWgmma = " << device_source::flag(c.wgmma) << ";\n";
  return device_source::generate({"xqa_decode", p.key(), c.key(), p.key() + " / " + c.key(), {"xqa_decode/kernel.cuh"},
                                  "ktune_xqa", problem_spec_members(p) + config.str(),
                                  {"ktune_xqa::decode_kernel<ktune_xqa::Spec>"}});
}

GeneratedKernel generate_shared(const Problem& p, const Arch& arch) {
  p.validate();
  if (arch.host) fail("config", std::string(kSharedConfig) + ": the host backend keeps the combine in every module");
  return device_source::generate(
      {"xqa_decode", p.key(), kSharedConfig, p.key() + " / " + kSharedConfig,
       {"xqa_decode/kernel.cuh", "xqa_decode/helpers.cuh"}, "ktune_xqa", problem_spec_members(p),
       {"ktune_xqa::combine_kernel<ktune_xqa::Spec>", "ktune_xqa::draft_mask_kernel<ktune_xqa::Spec>",
        "ktune_xqa::cu_seq_lens_kernel<ktune_xqa::Spec>"}});
}

int choose_num_splits(const Problem& p, const Config& c, int batch, int max_seq_len, const DeviceLimits& lim) {
  if (batch <= 0 || max_seq_len <= 0) return 1;
  const ktune_xqa::Shape s = shape_of(p, c);
  const long long slots = (long long)lim.sm_count * ctas_per_sm(p, c, lim);
  const long long base = (long long)batch * p.num_kv_heads * s.m_groups;
  const int tiles = (max_seq_len + c.tokens_per_tile - 1) / c.tokens_per_tile;
  if (tiles <= 1) return 1;
  // Time model in token-times (fit to H200 measurements): HBM saturates once ~2 CTAs per SM stream, so a wave
  // of w CTAs each streaming W tokens takes W * max(w, sat) / sat; waves beyond the resident slots run one
  // after another; each CTA has a fixed cost of ~256 tokens (prologue latency); splitting adds the combine.
  const double sat = 2.0 * lim.sm_count;
  const int max_splits = (int)std::min<long long>({(long long)tiles, 256, 8 * slots / base + 1});
  int best = 1;
  double best_cost = 1e300;
  for (int k = 1; k <= std::max(1, max_splits); ++k) {
    const double W = double((tiles + k - 1) / k) * c.tokens_per_tile + 256.0;
    long long left = base * k;
    double cost = 0;
    while (left > 0) {
      const long long w = std::min(left, slots);
      cost += W * std::max<double>(double(w), sat) / sat;
      left -= w;
    }
    if (k > 1) cost += 128.0 + 2.0 * k;
    if (cost < best_cost * (1 - 1e-3)) {
      best_cost = cost;
      best = k;
    }
  }
  return best;
}

size_t workspace_bytes(const Problem& p, const Config&, int batch, int num_splits) {
  if (num_splits <= 1) return 0;
  return size_t(batch) * p.max_q_len * p.num_q_heads * num_splits * (p.head_dim + 2) * sizeof(float);
}

LaunchDims decode_dims(const Problem& p, const Config& c, int batch, int num_splits) {
  const ktune_xqa::Shape s = shape_of(p, c);
  LaunchDims d;
  d.grid[0] = unsigned(std::max(1, num_splits));
  d.grid[1] = unsigned(p.num_kv_heads * s.m_groups);
  d.grid[2] = unsigned(std::max(1, batch));
  d.block[0] = unsigned(s.threads);
  d.dynamic_smem_bytes = unsigned(s.smem_total);
  return d;
}

LaunchDims combine_dims(const Problem& p, const Config&, int batch) {
  LaunchDims d;
  d.grid[0] = unsigned(p.max_q_len * p.num_q_heads);
  d.grid[1] = unsigned(std::max(1, batch));
  d.block[0] = 128;
  return d;
}

}  // namespace ktune::xqa
