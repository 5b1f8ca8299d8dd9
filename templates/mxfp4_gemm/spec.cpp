#include "mxfp4_gemm/spec.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "device_source.hpp"
#include "key_parse.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "mxfp4_gemm/shape.h"
#include "spec_support.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune::mxfp4 {
namespace {

namespace kc = ::ktune_common;

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw Error(Status::invalid_argument, "mxfp4_gemm", field + ": " + what);
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "bf16") *out = kc::kBF16;
  else if (s == "fp16") *out = kc::kFP16;
  else return false;
  return true;
}

// Keys: templates/key_parse.hpp (sizes up to 7 digits: topk, n and k reach 1M).
bool parse_num(const std::string& tok, const std::string& prefix, int* out) {
  return key_parse::parse_num(tok, prefix, out, 7);
}
using key_parse::split_dots;

ktune_mxfp4::Shape shape_of(const Problem& p, const Config& c) {
  return ktune_mxfp4::make_shape(c.bm, c.tn, c.wn, c.wk, c.stages, c.depth, int(p.a_dtype), c.wgmma, c.native,
                                 c.tcgen05);
}

// Activation stages for the few-token configs: as deep as 8, within ~40 KB of shared memory per CTA.
int small_stages(int bm, int wk) { return std::max(3, std::min(8, 40960 / (bm * wk * 128))); }

}  // namespace

const char* dtype_name(DType t) { return key_parse::dtype_token(t); }

void Problem::validate() const {
  const auto num = [](long long v) { return std::to_string(v); };
  if (n < 1 || n > kMaxN) fail("n", "expected 1.." + num(kMaxN) + ", got " + num(n));
  if (k < 32 || k > kMaxK || k % 32 != 0)
    fail("k", "expected a positive multiple of 32 (one e8m0 scale per 32 values) up to " + num(kMaxK) + ", got " + num(k));
  if (num_experts < 1 || num_experts > kMaxExperts)
    fail("num_experts", "expected 1.." + num(kMaxExperts) + ", got " + num(num_experts));
  if (top_k < 1 || top_k > num_experts)
    fail("top_k", "expected 1..num_experts (" + num(num_experts) + "), got " + num(top_k));
  if (a_dtype != kc::kBF16 && a_dtype != kc::kFP16)
    fail("a_dtype", std::string("expected bf16 or fp16, got ") + dtype_name(a_dtype));
  if (out_dtype != kc::kBF16 && out_dtype != kc::kFP16)
    fail("out_dtype", std::string("expected bf16 or fp16, got ") + dtype_name(out_dtype));
}

std::string Problem::key() const {
  std::ostringstream o;
  o << 'n' << n << ".k" << k;
  if (num_experts > 1 || top_k > 1) o << ".e" << num_experts << ".top" << top_k;
  o << '.' << dtype_name(a_dtype) << '-' << dtype_name(out_dtype);
  return o.str();
}

Problem Problem::from_key(const std::string& key) {
  const auto bad = [&](const std::string& why) -> Problem {
    fail("key", "cannot parse '" + key + "' as an mxfp4_gemm problem key (" + why +
                    "); expected n<N>.k<K>[.e<experts>.top<top_k>].<a>-<out>, e.g. n5760.k2880.e128.top4.bf16-bf16");
  };
  const std::vector<std::string> t = split_dots(key);
  if (t.size() != 3 && t.size() != 5) return bad("expected 3 or 5 fields");
  Problem p;
  if (!parse_num(t[0], "n", &p.n)) return bad("field 1 '" + t[0] + "' is not n<N>");
  if (!parse_num(t[1], "k", &p.k)) return bad("field 2 '" + t[1] + "' is not k<K>");
  if (t.size() == 5) {
    if (!parse_num(t[2], "e", &p.num_experts)) return bad("field 3 '" + t[2] + "' is not e<experts>");
    if (!parse_num(t[3], "top", &p.top_k)) return bad("field 4 '" + t[3] + "' is not top<top_k>");
  }
  const std::string& d = t.back();
  const size_t dash = d.find('-');
  if (dash == std::string::npos || !parse_dtype(d.substr(0, dash), &p.a_dtype) ||
      !parse_dtype(d.substr(dash + 1), &p.out_dtype))
    return bad("last field '" + d + "' is not <a dtype>-<out dtype> (bf16 or fp16)");
  p.validate();
  if (p.key() != key) return bad("not in canonical form");
  return p;
}

Config Config::host_config(int bm, int tn, int kt) {
  Config c;
  c.bm = bm;
  c.tn = tn;
  c.wn = c.wk = c.stages = c.depth = 0;
  c.kt = kt;
  return c;
}

std::string Config::key() const {
  std::ostringstream o;
  if (host()) {
    o << "bm" << bm << ".tn" << tn << ".kt" << kt;
    return o.str();
  }
  o << "bm" << bm << ".tn" << tn << ".wn" << wn << ".wk" << wk << ".s" << stages << ".d" << depth;
  if (wgmma) o << ".wg";
  if (native) o << ".mx";
  if (tcgen05) o << ".tc";
  return o.str();
}

Config Config::from_key(const std::string& key) {
  std::vector<std::string> t = split_dots(key);
  Config c;
  if (t.size() == 7 && (t.back() == "wg" || t.back() == "mx" || t.back() == "tc")) {
    (t.back() == "wg" ? c.wgmma : t.back() == "mx" ? c.native : c.tcgen05) = true;
    t.pop_back();
  }
  if (t.size() == 3) {  // host: bm<B>.tn<T>.kt<K>
    int bm = 0, tn = 0, kt = 0;
    if (parse_num(t[0], "bm", &bm) && parse_num(t[1], "tn", &tn) && parse_num(t[2], "kt", &kt) && bm > 0 && tn > 0 &&
        kt > 0) {
      c = host_config(bm, tn, kt);
      if (c.key() == key) return c;
    }
  }
  const bool ok = t.size() == 6 && parse_num(t[0], "bm", &c.bm) && parse_num(t[1], "tn", &c.tn) &&
                  parse_num(t[2], "wn", &c.wn) && parse_num(t[3], "wk", &c.wk) && parse_num(t[4], "s", &c.stages) &&
                  parse_num(t[5], "d", &c.depth) && c.key() == key;
  if (!ok)
    fail("config key", "cannot parse '" + key +
                           "'; expected bm<tokens>.tn<tiles>.wn<warps_n>.wk<warps_k>.s<stages>.d<depth>[.wg|.mx], e.g. "
                           "bm16.tn1.wn1.wk4.s3.d8 (host: bm<rows>.tn<tiles>.kt<k_chunks>, e.g. bm4.tn2.kt4)");
  return c;
}

DeviceLimits default_limits(const Arch& arch) { return arch_limits(arch); }  // ktune/device.hpp

std::string can_implement(const Problem& p, const Config& c, const Arch& arch, const DeviceLimits& lim) {
  if (std::string bad = spec_support::problem_error(p); !bad.empty()) return bad;
  if (arch.host) {  // the CPU kernel (host_kernel.h): no device limits apply
    if (!c.host()) return "a CUDA config cannot run on the host; expected bm<rows>.tn<tiles>.kt<k_chunks>, e.g. bm4.tn2.kt4";
    if (c.bm != 1 && c.bm != 2 && c.bm != 4 && c.bm != 8) return "bm: expected 1, 2, 4 or 8 (host)";
    if (c.tn != 1 && c.tn != 2 && c.tn != 4) return "tn: expected 1, 2 or 4 (host)";
    if (c.kt != 1 && c.kt != 4 && c.kt != 16) return "kt: expected 1, 4 or 16 (host)";
    // Register block bm x 16 tn fp32 accumulators (<= 256: 16 AVX-512 / 32 AVX2 registers); the decoded tile
    // 64 kt x 16 tn fp32 (<= 64 KiB, L1/L2).
    if (c.bm * c.tn > 16) return "bm * tn: expected at most 16 (accumulator registers)";
    if (c.kt * c.tn > 16) return "kt * tn: expected at most 16 (decoded tile <= 64 KiB)";
    return "";
  }
  if (c.host()) return "a host config (bm<B>.tn<T>.kt<K>) cannot run on a CUDA arch";
  if (arch.sm() < 80) return "mxfp4_gemm needs sm_80 or newer (cp.async, bf16 mma), got " + arch.str();
  if (c.wgmma && (arch.sm() != 90 || arch.suffix != 'a')) return "wgmma (.wg): only on sm_90a, got " + arch.str();
  if (c.native && (arch.sm() != 120 || arch.suffix != 'a'))
    return "native block-scaled MMA (.mx): only on sm_120a (mma.sync kind::mxf8f6f4), got " + arch.str();
  if (c.tcgen05 && (arch.sm() != 100 || arch.suffix != 'a'))
    return "tensor-memory block-scaled MMA (.tc): only on sm_100a (tcgen05.mma kind::mxf8f6f4), got " + arch.str();
  const ktune_mxfp4::Shape s = shape_of(p, c);
  if (const char* why = ktune_mxfp4::shape_error(s)) return why;
  if (s.threads > lim.max_threads_per_block) return "threads per block exceed the device limit";
  if (s.smem_total + s.smem_static > lim.max_smem_per_block_optin)
    return "shared memory " + std::to_string(s.smem_total + s.smem_static) + " B exceeds the per-block limit " +
           std::to_string(lim.max_smem_per_block_optin) + " B";
  return "";
}

// Host default (the tuner picks per key among the rest): 4 rows x 64 columns (16 vector accumulators) and one
// 64-wide K chunk decoded per step (a 16 KiB fp32 tile that stays in L1).
static Config default_host_config(const Problem&) { return Config::host_config(4, 4, 1); }

// A wgmma tile (sm_90a, bf16): bm tokens x (64 * wn / 4) weight rows per CTA, wk warpgroups splitting each K step
// (their partial sums reduced in shared memory), `stages` activation stages (4 unless wk * bm makes a stage too
// big for four), a weight ring of `depth` slots in shared memory (refilled depth - 1 iterations ahead).
static Config wgmma_tile(int bm, int wn, int wk = 1, int stages = 4, int depth = 4) {
  Config c{bm, 1, wn, wk, stages, depth};
  c.wgmma = true;
  return c;
}

namespace {

// One row of a default table: the config for problems of at most `max_rows` rows (the tuning bucket: dense M;
// grouped, rows per expert), written as its key (bm, tn, wn, wk, s = stages, d = depth; .wg = wgmma), and why.
// The measurements behind each choice: docs/mxfp4_gemm.md ("Defaults", "Measured").
struct DefaultRow {
  int64_t max_rows;
  Config config;
  const char* why;
};
constexpr int64_t kAnyRows = INT64_MAX;

const Config& pick(const std::vector<DefaultRow>& table, int64_t rows) {
  for (const DefaultRow& r : table)
    if (rows <= r.max_rows) return r.config;
  return table.back().config;
}

// The table's tile for `rows`, or else the tile of the nearest smaller bucket that fits the problem: FP16
// activations double the mma.sync accumulators, so the widest BF16 tile (bm128.tn2) does not fit them and the
// tile of the bucket below (bm64.tn2) serves them instead of the ring fallback's 16-row tile, which would read the
// weight 4x as often. Falls back to the table's first tile when none fits (default_config then checks).
Config pick_fitting(const std::vector<DefaultRow>& table, int64_t rows, const Problem& p, const Arch& arch,
                    const DeviceLimits& lim) {
  size_t i = 0;
  while (i + 1 < table.size() && rows > table[i].max_rows) ++i;
  for (size_t j = i + 1; j-- > 0;)
    if (can_implement(p, table[j].config, arch, lim).empty()) return table[j].config;
  return table.front().config;
}

// mma.sync (sm_80+), more than 16 rows, dense or grouped.
const std::vector<DefaultRow>& mma_tiles() {
  static const std::vector<DefaultRow> t = {
      {64, Config::from_key("bm32.tn1.wn4.wk2.s6.d4"), "32-token tiles: up to 64 rows faster than bm64"},
      {1023, Config::from_key("bm64.tn2.wn4.wk1.s4.d2"), "two weight tiles per warp: a decoded weight feeds more mma"},
      {kAnyRows, Config::from_key("bm128.tn2.wn4.wk1.s4.d2"), "many tokens: the widest tile, fewest weight re-reads"},
  };
  return t;
}

// Grouped (MoE) with few rows per expert: the grid already has many CTAs, so 4-warp tiles along N, K unsplit.
const std::vector<DefaultRow>& grouped_few_row_tiles() {
  static const std::vector<DefaultRow> t = {
      {4, Config::from_key("bm8.tn4.wn2.wk1.s0.d2"), "activations straight from global memory: no CTA barrier"},
      {16, Config::from_key("bm16.tn2.wn4.wk1.s3.d2"), "the cp.async ring (s0 would hold twice the registers)"},
  };
  return t;
}

// sm_90a with bf16 activations, 32 rows or more: warpgroup MMA fed by TMA.
const std::vector<DefaultRow>& dense_wgmma_tiles() {
  static const std::vector<DefaultRow> t = {
      {63, wgmma_tile(32, 4, 4), "the m64n32k16 tile, 4 warpgroups splitting K: parallel wgmma chains"},
      {127, wgmma_tile(64, 4, 4), "4 warpgroups splitting K keep more than one wgmma chain per SM"},
      {255, wgmma_tile(128, 4, 4, 3), "as above; 3 stages fit the 4 K slices of a 128-token stage"},
      {511, wgmma_tile(256, 4, 2, 3), "256-token tiles, K over 2 warpgroups"},
      {kAnyRows, wgmma_tile(256, 8), "many tokens: 256 x 128 tiles, 2 warpgroups along N, no K split"},
  };
  return t;
}

// Grouped, sm_90a bf16, 32 rows per expert or more: grouped tiles already have many CTAs per SM, so no K split.
// The bucket is the mean rows per expert rounded up to a power of two; 64..255 rows take 128-row tiles with two
// warpgroups sharing each activation tile: the fastest measured with rows routed at random, as the tuner and
// serving see them (with exactly 64 rows per expert `bm64` tiles are 3-9% faster; docs/mxfp4_gemm.md).
const std::vector<DefaultRow>& grouped_wgmma_tiles() {
  static const std::vector<DefaultRow> t = {
      {63, wgmma_tile(64, 4), "one warpgroup, 64-token tiles"},
      {255, wgmma_tile(128, 8), "128-token tiles, 2 warpgroups along N"},
      {kAnyRows, wgmma_tile(256, 8), "256-token tiles, 2 warpgroups along N"},
  };
  return t;
}

// Dense, at most 16 tokens: the weight read is the cost, so warps split K and several weight tiles per warp
// give independent decode + mma chains.
Config dense_few_token_tile(const Problem& p, int64_t rows) {
  const int kc = (p.k + 63) / 64;
  Config c;
  c.bm = rows <= 8 ? 8 : 16;               // one or two 8-token mma tiles
  c.tn = rows <= 8 ? 2 : 4;                // weight tiles per warp: independent chains
  c.wn = 1;
  c.wk = kc >= 16 ? 8 : kc >= 8 ? 4 : 2;   // K over the CTA's warps (at most one chunk each)
  c.stages = rows <= 8 ? 0 : small_stages(c.bm, c.wk);  // <= 8 tokens: no ring, no CTA barrier in the K loop
  c.depth = 2;                             // weight chunks in flight per lane
  if (rows <= 8 && p.n >= 8192 && kc >= 128) {  // wide, deep weight: 16 warps per SM at N / 64 CTAs
    c.tn = 4;
    c.wk = 16;
  }
  return c;
}

}  // namespace

Config default_config(const Problem& p, const Arch& arch, int64_t m_hint) {
  p.validate();
  if (arch.host) return default_host_config(p);
  const DeviceLimits lim = default_limits(arch);
  const int64_t rows = m_hint > 0 ? m_hint : 16;
  const bool hopper_bf16 = arch.sm() == 90 && arch.suffix == 'a' && p.a_dtype == kc::kBF16;
  Config c;
  if (hopper_bf16 && rows >= 32) c = pick(p.grouped() ? grouped_wgmma_tiles() : dense_wgmma_tiles(), rows);
  else if (rows <= 16) c = p.grouped() ? pick(grouped_few_row_tiles(), rows) : dense_few_token_tile(p, rows);
  else c = pick_fitting(mma_tiles(), rows, p, arch, lim);
  // The smallest ring tile fits every problem can_implement accepts on sm_80+.
  if (!can_implement(p, c, arch, lim).empty()) c = Config::from_key("bm16.tn1.wn4.wk1.s3.d2");
  const std::string why = can_implement(p, c, arch, lim);
  if (!why.empty()) fail("config", "no default config fits " + p.key() + " on " + arch.str() + ": " + why);
  return c;
}

std::vector<Config> search_space(const Problem& p, const Arch& arch) {
  if (arch.host) {  // the host tunables (the default first): few-row and many-row register blocks, K step
    std::vector<Config> out = {default_host_config(p)};
    const int list[][3] = {{4, 2, 4}, {1, 4, 4}, {2, 4, 1}, {8, 2, 1}, {8, 2, 4}, {8, 1, 4}, {4, 1, 16}, {4, 4, 4}};
    for (const auto& v : list) {
      const Config c = Config::host_config(v[0], v[1], v[2]);
      if (std::find(out.begin(), out.end(), c) == out.end() && can_implement(p, c, arch, DeviceLimits{}).empty())
        out.push_back(c);
    }
    return out;
  }
  const DeviceLimits lim = default_limits(arch);
  std::vector<Config> out;
  auto add = [&](const Config& c) {
    if (std::find(out.begin(), out.end(), c) == out.end() && can_implement(p, c, arch, lim).empty()) out.push_back(c);
  };
  for (int bm : {8, 16})
    for (int wk : {2, 4, 8})
      for (int d : {4, 8}) add(Config{bm, 1, 1, wk, small_stages(bm, wk), d});
  for (int bm : {8, 16}) {
    add(Config{bm, 2, 4, 1, 8, 4});
    add(Config{bm, 1, 4, 2, 8, 8});
  }
  for (int bm : {32, 64}) {
    add(Config{bm, 1, 4, 2, 6, 4});
    add(Config{bm, 2, 4, 1, 6, 2});
  }
  for (int bm : {64, 128}) {
    add(Config{bm, 2, 4, 1, 4, 2});
    add(Config{bm, 4, 2, 1, 3, 1});
    add(Config{bm, 2, 2, 1, 4, 2});
  }
  add(Config{64, 4, 2, 1, 4, 2});
  add(Config{16, 2, 4, 1, 3, 2});
  add(Config{16, 1, 1, 4, 8, 8});
  // Several weight tiles per warp: independent decode + mma chains in one warp (ILP) and more weight bytes per
  // CTA iteration, K split over up to 8 warps to keep enough CTAs.
  for (int bm : {8, 16})
    for (int wk : {4, 8}) {
      add(Config{bm, 2, 1, wk, small_stages(bm, wk), 4});
      add(Config{bm, 4, 1, wk, small_stages(bm, wk), 2});
      add(Config{bm, 2, 2, wk / 2, small_stages(bm, wk / 2), 4});
    }
  add(Config{16, 4, 2, 1, 4, 2});
  add(Config{8, 4, 2, 1, 4, 2});
  add(Config{16, 2, 4, 1, 4, 4});
  add(Config{16, 4, 4, 1, 3, 2});
  // sm_90a, bf16: warpgroup MMA with the decoded weight as the register operand (many tokens).
  for (int bm : {256, 128, 64})
    for (int wn : {8, 4}) add(wgmma_tile(bm, wn));
  add(wgmma_tile(192, 4, 1, 3));  // MoE experts of up to 192 rows in one tile
  // ... with a deeper weight ring (more weight in flight per SM where the tile's K loop is short of it)
  for (int bm : {256, 128, 64}) add(wgmma_tile(bm, bm == 64 ? 4 : 8, 1, 4, 8));
  add(wgmma_tile(128, 4, 1, 4, 8));
  add(wgmma_tile(192, 4, 1, 3, 8));
  // ... with warpgroups splitting K (fewer weight rows per CTA than tokens want: small M, short MoE experts)
  add(wgmma_tile(64, 4, 4));
  add(wgmma_tile(64, 4, 2));
  add(wgmma_tile(128, 4, 4, 3));
  add(wgmma_tile(128, 4, 2));
  add(wgmma_tile(256, 4, 2, 3));
  // 32-token wgmma tiles (m64n32k16): MoE experts of 17..32 rows, dense 17..32 tokens
  add(wgmma_tile(32, 4));
  add(wgmma_tile(32, 8));
  add(wgmma_tile(32, 4, 2));
  add(wgmma_tile(32, 4, 4));
  // s0: activation fragments straight from global memory, no CTA barrier in the K loop (bm <= 16).
  add(Config{8, 4, 1, 16, 0, 2});  // 16 warps per CTA (<= 128 registers)
  for (int bm : {8, 16}) {
    add(Config{bm, 2, 1, 8, 0, 4});
    add(Config{bm, 2, 1, 8, 0, 2});
    add(Config{bm, 2, 1, 4, 0, 4});
    add(Config{bm, 1, 1, 8, 0, 8});
    add(Config{bm, 4, 1, 8, 0, 2});
    add(Config{bm, 2, 2, 4, 0, 4});
    add(Config{bm, 2, 4, 1, 0, 4});
    add(Config{bm, 2, 4, 1, 0, 2});
    add(Config{bm, 4, 2, 1, 0, 2});  // the grouped <= 4 rows default
  }
  return out;
}

namespace {

// The host translation unit: unlike the CUDA one, every shape value is a compile-time constant (loop trip counts,
// the K tail, the N tail), which is what the JIT buys on the CPU; so each problem key is its own binary.
GeneratedKernel generate_host(const Problem& p, const Config& c) {
  std::ostringstream s;
  s << "// ktune mxfp4_gemm " << p.key() << " / " << c.key() << " (host)\n"
    << "#include \"mxfp4_gemm/host_kernel.h\"\n"
    << "namespace ktune_mxfp4 {\n"
    << "struct Spec {\n"
    << "  static constexpr int kAType = " << int(p.a_dtype) << ", kOutType = " << int(p.out_dtype) << ";\n"
    << "  static constexpr bool kGrouped = " << (p.grouped() ? "true" : "false") << ";\n"
    << "  static constexpr int kN = " << p.n << ", kK = " << p.k << ";\n"
    << "  static constexpr int kBM = " << c.bm << ", kTN = " << c.tn << ", kKT = " << c.kt << ";\n"
    << "};\n"
    << "}  // namespace ktune_mxfp4\n";
  GeneratedKernel k;
  k.family = "mxfp4_gemm";
  k.problem_key = p.key();
  k.config_key = c.key();
  k.source = s.str();
  k.entry_points = {"ktune_mxfp4::host_gemm<ktune_mxfp4::Spec>"};
  return k;
}

}  // namespace

GeneratedKernel generate(const Problem& p, const Config& c, const Arch& arch) {
  spec_support::require_implementable("mxfp4_gemm", p, c, arch, default_limits(arch));
  if (arch.host) return generate_host(p, c);
  using device_source::flag;
  std::ostringstream members;
  members << "  static constexpr int kAType = " << int(p.a_dtype) << ", kOutType = " << int(p.out_dtype) << ";\n"
          << "  static constexpr bool kGrouped = " << flag(p.grouped()) << ";\n"
          << "  static constexpr int kBM = " << c.bm << ", kTN = " << c.tn << ", kWN = " << c.wn << ", kWK = " << c.wk
          << ", kStages = " << c.stages << ", kDepth = " << c.depth << ";\n"
          << "  static constexpr bool kWgmma = " << flag(c.wgmma) << ";\n"
          << "  static constexpr bool kNative = " << flag(c.native) << ";\n"
          << "  static constexpr bool kTcgen05 = " << flag(c.tcgen05) << ";\n";
  // Only what changes the binary goes into the source: shapes (n, k, experts) are runtime values, so every
  // problem with the same dtypes and form shares one binary per config.
  const std::string title = std::string(dtype_name(p.a_dtype)) + '-' + dtype_name(p.out_dtype) +
                            (p.grouped() ? " grouped" : " dense") + " / " + c.key();
  return device_source::generate({"mxfp4_gemm", p.key(), c.key(), title,
                                  {c.tcgen05 ? "mxfp4_gemm/kernel_tc.cuh" : "mxfp4_gemm/kernel.cuh"}, "ktune_mxfp4",
                                  members.str(),
                                  {c.tcgen05 ? "ktune_mxfp4::gemm_kernel_tc<ktune_mxfp4::Spec>"
                                             : "ktune_mxfp4::gemm_kernel<ktune_mxfp4::Spec>"}});
}

LaunchDims gemm_dims(const Problem& p, const Config& c, int64_t m) {
  const ktune_mxfp4::Shape s = shape_of(p, c);
  const int64_t n16 = (p.n + 15) / 16;
  const int64_t tiles_n = (n16 + c.tn * c.wn - 1) / (c.tn * c.wn);
  const int64_t tiles_m = (m + c.bm - 1) / c.bm + (p.grouped() ? p.num_experts : 0);
  if (tiles_m > 65535)
    fail("m", "expected at most " + std::to_string((65535 - (p.grouped() ? p.num_experts : 0)) * int64_t(c.bm)) +
                  " rows for config " + c.key() + " (grid.y limit 65535), got " + std::to_string(m));
  LaunchDims d;
  d.grid[0] = unsigned(tiles_n);
  d.grid[1] = unsigned(std::max<int64_t>(1, tiles_m));
  d.block[0] = unsigned(s.threads);
  d.dynamic_smem_bytes = unsigned(s.smem_total);
  return d;
}

}  // namespace ktune::mxfp4
