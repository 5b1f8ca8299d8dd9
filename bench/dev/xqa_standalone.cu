// Dev harness for xqa_decode (superseded by the runtime-based test/bench): instantiates kernel.cuh with
// hand-written Specs exactly as spec.cpp's generate() writes them, checks against the CPU reference on fresh
// random inputs (poisoned outputs, NaN-filled unused pages), and times bench_xqa's shapes.
//   xqa_standalone check   # correctness matrix
//   xqa_standalone bench   # bench shapes x configs x splits, KV bytes/s
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "xqa_decode/kernel.cuh"
#include "xqa_decode/spec.hpp"
#include "random_inputs.hpp"
#include "xqa_reference.hpp"

using namespace ktune::xqa;
using namespace ktune::test;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      exit(2);                                                                                 \
    }                                                                                          \
  } while (0)

// Same constants generate() writes; NAME replaces "Spec".
#define XQA_SPEC(NAME, D, HKV, G, P, HND, QT, KVT, OT, QL, MASK, SINK, WIN, CAP, LSE, T, ST, W, MT)        \
  namespace ktune_xqa {                                                                                    \
  struct NAME {                                                                                            \
    static constexpr int kHeadDim = D, kNumKvHeads = HKV, kGroupSize = G, kPageSize = P;                   \
    static constexpr bool kLayoutHND = HND;                                                                \
    static constexpr int kQType = QT, kKVType = KVT, kOutType = OT, kMaxQLen = QL, kMask = MASK;           \
    static constexpr bool kSinks = SINK, kSlidingWindow = WIN, kSoftcap = CAP, kWriteLse = LSE;            \
    static constexpr int kTokensPerTile = T, kStages = ST, kWarps = W, kMTilesPerCta = MT;                 \
    static constexpr bool kChecked = false;                                                                \
  };                                                                                                       \
  }

enum { BF = 0, FP = 1, E4 = 2 };
// ---- correctness matrix: head_dim x group x page x layout x dtypes x q_len x mask x sinks/window/cap/lse ----
XQA_SPEC(C01, 128, 8, 4, 32, true, BF, BF, BF, 1, 0, false, false, false, true, 64, 3, 4, 0)
XQA_SPEC(C02, 128, 8, 4, 32, true, BF, BF, BF, 4, 1, true, true, false, true, 64, 3, 4, 0)
XQA_SPEC(C03, 128, 8, 4, 32, true, BF, E4, BF, 4, 1, false, false, false, true, 128, 3, 4, 0)
XQA_SPEC(C04, 64, 8, 1, 16, false, FP, FP, FP, 2, 1, false, false, false, true, 64, 3, 4, 0)
XQA_SPEC(C05, 64, 1, 16, 64, true, BF, BF, BF, 3, 2, true, false, false, true, 32, 4, 2, 0)
XQA_SPEC(C06, 256, 2, 8, 128, false, BF, BF, BF, 7, 1, true, true, false, true, 32, 3, 8, 0)
XQA_SPEC(C07, 256, 4, 2, 16, true, E4, E4, FP, 1, 0, false, false, true, true, 64, 2, 4, 0)
XQA_SPEC(C08, 128, 4, 12, 64, false, FP, E4, FP, 16, 2, true, true, true, true, 32, 2, 8, 0)
XQA_SPEC(C09, 128, 8, 16, 32, true, BF, BF, BF, 16, 1, false, false, false, true, 32, 3, 8, 0)
XQA_SPEC(C10, 256, 4, 16, 128, false, BF, BF, E4, 16, 2, true, true, true, true, 32, 3, 8, 8)
XQA_SPEC(C11, 64, 4, 8, 128, false, BF, E4, E4, 4, 1, false, true, false, true, 64, 3, 4, 0)
XQA_SPEC(C12, 128, 2, 8, 16, true, FP, FP, FP, 7, 2, false, true, false, true, 128, 2, 4, 0)
XQA_SPEC(C13, 256, 4, 1, 32, false, BF, E4, BF, 2, 1, true, false, false, true, 64, 3, 4, 0)
XQA_SPEC(C14, 64, 4, 4, 32, true, BF, E4, BF, 4, 2, true, false, false, true, 64, 3, 4, 0)
XQA_SPEC(C15, 128, 2, 6, 64, true, BF, BF, BF, 3, 2, false, false, true, true, 16, 4, 1, 0)
XQA_SPEC(C16, 64, 2, 16, 16, false, FP, E4, BF, 16, 1, true, false, false, true, 32, 2, 4, 2)
// ---- bench shapes: B=64 32/8 heads D=128 L=4096 p32; B=1/4 64/8 heads L=128K ----
XQA_SPEC(B1a, 128, 8, 4, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 32, 3, 2, 0)
XQA_SPEC(B1b, 128, 8, 4, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 64, 3, 4, 0)
XQA_SPEC(B1c, 128, 8, 4, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 32, 4, 2, 0)
XQA_SPEC(B1d, 128, 8, 4, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 32, 2, 2, 0)
XQA_SPEC(B2a, 128, 8, 4, 32, true, BF, BF, BF, 4, 1, false, false, false, false, 32, 3, 2, 0)
XQA_SPEC(B2b, 128, 8, 4, 32, true, BF, BF, BF, 4, 1, false, false, false, false, 64, 3, 4, 0)
XQA_SPEC(B2c, 128, 8, 4, 32, true, BF, BF, BF, 4, 1, false, false, false, false, 32, 4, 2, 0)
XQA_SPEC(B3a, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 128, 2, 4, 0)
XQA_SPEC(B3b, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 64, 3, 2, 0)
XQA_SPEC(B3c, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 64, 4, 2, 0)
XQA_SPEC(B3d, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 32, 6, 2, 0)
XQA_SPEC(B3e, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 64, 3, 4, 0)
XQA_SPEC(B3f, 128, 8, 4, 32, true, BF, E4, BF, 1, 0, false, false, false, false, 128, 3, 4, 0)
XQA_SPEC(B4a, 128, 8, 4, 32, true, BF, E4, BF, 4, 1, false, false, false, false, 128, 2, 4, 0)
XQA_SPEC(B4b, 128, 8, 4, 32, true, BF, E4, BF, 4, 1, false, false, false, false, 64, 3, 2, 0)
XQA_SPEC(B4c, 128, 8, 4, 32, true, BF, E4, BF, 4, 1, false, false, false, false, 64, 4, 2, 0)
XQA_SPEC(B4d, 128, 8, 4, 32, true, BF, E4, BF, 4, 1, false, false, false, false, 32, 6, 2, 0)
XQA_SPEC(B5a, 128, 8, 8, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 64, 3, 4, 0)
XQA_SPEC(B5b, 128, 8, 8, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 32, 3, 2, 0)
XQA_SPEC(B5c, 128, 8, 8, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 32, 4, 2, 0)
XQA_SPEC(B5d, 128, 8, 8, 32, true, BF, BF, BF, 1, 0, false, false, false, false, 64, 2, 4, 0)

// Conversion self-test: every e4m3 pair through the exact cvt, random words through the fragment helper.
__global__ void fp8_selftest(unsigned* pair, unsigned* kw, unsigned* vw, float* fold) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  pair[i] = ktune_common::e4m3x2_to_f16x2((unsigned short)i);
  const unsigned w = i * 0x9E3779B1u + 0x7F4A7C15u;
  ktune_common::e4m3x4_to_f16x2x2<false>(w, kw[2 * i], kw[2 * i + 1]);
  ktune_common::e4m3x4_to_f16x2x2<true>(w, vw[2 * i], vw[2 * i + 1]);
  if (i == 0) *fold = ktune_common::kE4m3Fold;
}

static int selftest() {
  const int N = 65536;
  unsigned *pair, *kw, *vw;
  float* fold;
  CK(cudaMalloc(&pair, N * 4));
  CK(cudaMalloc(&kw, N * 8));
  CK(cudaMalloc(&vw, N * 8));
  CK(cudaMalloc(&fold, 4));
  fp8_selftest<<<N / 256, 256>>>(pair, kw, vw, fold);
  CK(cudaDeviceSynchronize());
  std::vector<unsigned> hp(N), hk(2 * N), hv(2 * N);
  float f = 0;
  CK(cudaMemcpy(hp.data(), pair, N * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hk.data(), kw, N * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hv.data(), vw, N * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&f, fold, 4, cudaMemcpyDeviceToHost));
  using namespace ktune_common;
  long bad = 0;
  auto same = [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (unsigned i = 0; i < (unsigned)N; ++i) {
    const unsigned char b0 = i & 0xFF, b1 = i >> 8;
    if ((b0 & 0x7F) == 0x7F || (b1 & 0x7F) == 0x7F) continue;
    bad += !same(fp16_to_float(hp[i] & 0xFFFF), e4m3_to_float(b0)) || !same(fp16_to_float(hp[i] >> 16), e4m3_to_float(b1));
    const unsigned w = i * 0x9E3779B1u + 0x7F4A7C15u;
    unsigned char by[4] = {(unsigned char)w, (unsigned char)(w >> 8), (unsigned char)(w >> 16), (unsigned char)(w >> 24)};
    bool nan = false;
    for (unsigned char x : by) nan |= (x & 0x7F) == 0x7F;
    if (nan) continue;
    const int ko[4] = {0, 1, 2, 3}, vo[4] = {0, 2, 1, 3};
    for (int h = 0; h < 4; ++h) {
      const unsigned kk = hk[2 * i + h / 2], vv = hv[2 * i + h / 2];
      const float kf = fp16_to_float((h & 1) ? kk >> 16 : kk & 0xFFFF) * f;
      const float vf = fp16_to_float((h & 1) ? vv >> 16 : vv & 0xFFFF) * f;
      bad += !same(kf, e4m3_to_float(by[ko[h]])) + !same(vf, e4m3_to_float(by[vo[h]]));
    }
  }
  printf("fp8 selftest: fold %g, %ld mismatches\n", f, bad);
  return bad ? 1 : 0;
}

struct Entry {
  const char* name;
  Problem prob;
  Config cfg;
  const void* decode;
  const void* combine;
};

template <class S>
Entry entry(const char* name) {
  Entry e;
  e.name = name;
  Problem& p = e.prob;
  p.head_dim = S::kHeadDim;
  p.num_kv_heads = S::kNumKvHeads;
  p.num_q_heads = S::kNumKvHeads * S::kGroupSize;
  p.page_size = S::kPageSize;
  p.layout = S::kLayoutHND ? Layout::Hnd : Layout::Nhd;
  p.q_dtype = DType(S::kQType);
  p.kv_dtype = DType(S::kKVType);
  p.out_dtype = DType(S::kOutType);
  p.max_q_len = S::kMaxQLen;
  p.mask = MaskKind(S::kMask);
  p.has_sinks = S::kSinks;
  p.sliding_window = S::kSlidingWindow;
  p.softcap = S::kSoftcap;
  p.write_lse = S::kWriteLse;
  e.cfg = Config{S::kTokensPerTile, S::kStages, S::kWarps, S::kMTilesPerCta};
  e.decode = reinterpret_cast<const void*>(&ktune_xqa::decode_kernel<S>);
  e.combine = reinterpret_cast<const void*>(&ktune_xqa::combine_kernel<S>);
  return e;
}
#define E(N) entry<ktune_xqa::N>(#N)

static ktune::DeviceLimits g_lim;
static ktune::Arch g_arch{9, 0, 'a'};

struct DevCase {
  XqaRandomCase c;
  void *q = nullptr, *kv = nullptr, *out = nullptr;
  int *bt = nullptr, *sl = nullptr, *cu = nullptr;
  unsigned short* mask = nullptr;
  float *sinks = nullptr, *lse = nullptr, *ws = nullptr;
  size_t out_bytes = 0, ws_bytes = 0;
  template <class T>
  static T* up(const std::vector<T>& v) {
    T* d = nullptr;
    CK(cudaMalloc(&d, std::max<size_t>(1, v.size() * sizeof(T))));
    if (!v.empty()) CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }
  explicit DevCase(XqaRandomCase&& cc) : c(std::move(cc)) {
    q = up(c.q);
    kv = up(c.kv);
    bt = up(c.block_tables);
    sl = up(c.seq_lens);
    cu = up(c.q_cu);
    mask = up(c.mask);
    sinks = up(c.sinks);
    const Problem& p = c.problem;
    out_bytes = (size_t)std::max(1, c.num_tokens) * p.num_q_heads * p.head_dim * ktune_common::dtype_size(int(p.out_dtype));
    CK(cudaMalloc(&out, out_bytes));
    CK(cudaMalloc(&lse, (size_t)std::max(1, c.num_tokens) * p.num_q_heads * 4));
  }
  ~DevCase() {
    for (void* v : {q, kv, out, (void*)bt, (void*)sl, (void*)cu, (void*)mask, (void*)sinks, (void*)lse, (void*)ws})
      if (v) cudaFree(v);
  }
  ktune_xqa::Params params(int splits) {
    ktune_xqa::Params p = c.host_params();
    p.q = q;
    p.kv_cache = kv;
    p.block_tables = bt;
    p.seq_lens = sl;
    p.q_cu_seq_lens = c.opt.ragged ? cu : nullptr;
    p.mask = c.problem.mask == MaskKind::Explicit ? mask : nullptr;
    p.sinks = c.problem.has_sinks ? sinks : nullptr;
    p.out = out;
    p.lse = c.problem.write_lse ? lse : nullptr;
    p.num_splits = splits;
    return p;
  }
  void poison() {
    CK(cudaMemset(out, 0xFF, out_bytes));
    CK(cudaMemset(lse, 0xFF, (size_t)std::max(1, c.num_tokens) * c.problem.num_q_heads * 4));
  }
};

static void launch(const Entry& e, ktune_xqa::Params p, cudaStream_t st = 0, bool with_combine = true) {
  const ktune::LaunchDims d = decode_dims(e.prob, e.cfg, p.batch, p.num_splits);
  void* args[] = {&p};
  CK(cudaFuncSetAttribute(e.decode, cudaFuncAttributeMaxDynamicSharedMemorySize, d.dynamic_smem_bytes));
  CK(cudaLaunchKernel(e.decode, dim3(d.grid[0], d.grid[1], d.grid[2]), dim3(d.block[0]), args, d.dynamic_smem_bytes, st));
  CK(cudaGetLastError());
  if (p.num_splits > 1 && with_combine) {
    const ktune::LaunchDims c = combine_dims(e.prob, e.cfg, p.batch);
    CK(cudaLaunchKernel(e.combine, dim3(c.grid[0], c.grid[1], c.grid[2]), dim3(c.block[0]), args, 0, st));
    CK(cudaGetLastError());
  }
}

static void ensure_ws(DevCase& dc, const Entry& e, int splits) {
  const size_t need = workspace_bytes(e.prob, e.cfg, dc.c.batch, splits);
  if (need > dc.ws_bytes) {
    if (dc.ws) CK(cudaFree(dc.ws));
    CK(cudaMalloc(&dc.ws, need));
    dc.ws_bytes = need;
  }
}

static double tolerance(const Problem& p) { return p.out_dtype == ktune_common::kE4M3 ? 8e-2 : 1e-2; }

// Runs one config on a case and compares (optionally a prefix of `check_batch` requests).
static XqaCompare run_and_compare(DevCase& dc, const Entry& e, int splits, const XqaRefResult& ref, int check_batch) {
  ensure_ws(dc, e, splits);
  dc.poison();
  if (splits > 1) CK(cudaMemset(dc.ws, 0xFF, dc.ws_bytes));  // NaN: any read of an unwritten partial shows
  ktune_xqa::Params p = dc.params(splits);
  p.workspace = dc.ws;
  launch(e, p);
  CK(cudaDeviceSynchronize());
  std::vector<unsigned char> out(dc.out_bytes);
  std::vector<float> lse((size_t)std::max(1, dc.c.num_tokens) * e.prob.num_q_heads);
  CK(cudaMemcpy(out.data(), dc.out, out.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), dc.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  (void)check_batch;
  const XqaCompare r = xqa_compare(e.prob, ref, out.data(), e.prob.write_lse ? lse.data() : nullptr, 0xFF);
  if (r.rel_l2 >= tolerance(e.prob) || r.nonfinite || r.clobbered) {
    // where is the error: by head-dim column mod 16, by query index, by request
    const Problem& pr = e.prob;
    const int D = pr.head_dim, HQ = pr.num_q_heads;
    std::vector<double> dn(16), dd(16), qn(16), qd(16), bn(dc.c.batch), bd(dc.c.batch);
    for (int b = 0; b < dc.c.batch && b < (int)dc.c.q_cu.size() - 1; ++b)
      for (int t = dc.c.q_cu[b]; t < dc.c.q_cu[b + 1] && t < (int)ref.written.size(); ++t) {
        if (!ref.written[t]) continue;
        const int qi = t - dc.c.q_cu[b];
        for (int h = 0; h < HQ; ++h)
          for (int d = 0; d < D; ++d) {
            const long long i = ((long long)t * HQ + h) * D + d;
            double o = ktune_common::to_float(int(pr.out_dtype), out.data(), i), rf = ref.out[i];
            if (!std::isfinite(o)) o = 1e3;
            const double e2 = (o - rf) * (o - rf), r2 = rf * rf;
            dn[d % 16] += e2; dd[d % 16] += r2; qn[qi & 15] += e2; qd[qi & 15] += r2; bn[b] += e2; bd[b] += r2;
          }
      }
    printf("    err by d%%16:");
    for (int i = 0; i < 16; ++i) printf(" %.0e", std::sqrt(dn[i] / std::max(dd[i], 1e-30)));
    printf("\n    err by q idx:");
    for (int i = 0; i < 16; ++i) if (qd[i] > 0) printf(" %d:%.0e", i, std::sqrt(qn[i] / qd[i]));
    printf("\n    err by request (L):");
    for (int b = 0; b < dc.c.batch; ++b) if (bd[b] > 0) printf(" %d:%.0e", dc.c.seq_lens[b], std::sqrt(bn[b] / bd[b]));
    printf("\n");
  }
  return r;
}

static int check_all() {
  std::vector<Entry> es = {E(C01), E(C02), E(C03), E(C04), E(C05), E(C06), E(C07), E(C08),
                           E(C09), E(C10), E(C11), E(C12), E(C13), E(C14), E(C15), E(C16)};
  int fails = 0, runs = 0;
  uint64_t seed = (uint64_t)time(nullptr);
  printf("check seed %llu\n", (unsigned long long)seed);
  const char* only = getenv("XQA_ONLY");    // e.g. "C01,C05": a subset (for compute-sanitizer runs)
  const int max_forms = getenv("XQA_FORMS") ? atoi(getenv("XQA_FORMS")) : 5;
  for (const Entry& e : es) {
    if (only && !strstr(only, e.name)) continue;
    const std::string why = can_implement(e.prob, e.cfg, g_arch, g_lim);
    if (!why.empty()) {
      printf("%-4s %s %s: cannot implement: %s\n", e.name, e.prob.key().c_str(), e.cfg.key().c_str(), why.c_str());
      ++fails;
      continue;
    }
    const bool small_rows = e.prob.max_q_len * e.prob.group_size() <= 32;
    for (int form = 0; form < std::min(max_forms, small_rows ? 5 : 4); ++form) {
      XqaRandomOptions o;
      o.ragged = form & 1;
      o.batch = form == 4 ? 3 : 5 + form;
      o.max_seq_len = form == 4 ? 65536 : form >= 2 ? 9000 : 1500;
      if (form == 4) {
        o.min_seq_len = 30000;
        o.short_fraction = 0;
      }
      o.zero_fraction = form == 4 ? 0.0 : 0.2;
      o.seed = (++seed) * 0x2545F4914F6CDD1Dull;
      o.window_left = 40 + form * 100;
      if (!o.ragged && form == 2 && e.prob.max_q_len > 1) o.q_len = e.prob.max_q_len - 1;  // uniform q_len < max
      DevCase dc(make_xqa_case(e.prob, o));
      const XqaRefResult ref = xqa_reference(e.prob, dc.c.host_params());
      const int auto_splits = choose_num_splits(e.prob, e.cfg, dc.c.batch, dc.c.max_seq_len, g_lim);
      for (int splits : {1, form >= 3 ? auto_splits : 3 + form}) {
        const XqaCompare r = run_and_compare(dc, e, splits, ref, 0);
        const bool ok = r.rel_l2 < tolerance(e.prob) && r.nonfinite == 0 && r.clobbered == 0 &&
                        r.max_row_rel < 5 * tolerance(e.prob) &&
                        (!e.prob.write_lse || r.lse_max_abs < 2e-2);
        ++runs;
        if (!ok) ++fails;
        printf("%-4s %-58s %-10s %-7s B%d tok%-4d Lmax%-5d sp%-3d rel %.2e row %.2e lse %.1e nan %lld clob %lld %s\n",
               e.name, e.prob.key().c_str(), e.cfg.key().c_str(), o.ragged ? "ragged" : "uniform", o.batch,
               dc.c.num_tokens, dc.c.max_seq_len, splits, r.rel_l2, r.max_row_rel, r.lse_max_abs, r.nonfinite,
               r.clobbered, ok ? "PASS" : "FAIL");
        fflush(stdout);
      }
    }
  }
  printf("CHECK SUMMARY: %d/%d runs passed\n", runs - fails, runs);
  return fails ? 1 : 0;
}

struct BenchShape {
  const char* label;
  std::vector<Entry> entries;
  int batch, seq_len, q_len;
  std::vector<int> splits;  // candidates (0 = choose_num_splits)
  double bar;               // TB/s
};

static int bench_all() {
  std::vector<BenchShape> shapes = {
      {"B64 L4096 bf16 q1", {E(B1a), E(B1b), E(B1c), E(B1d)}, 64, 4096, 1, {0, 1, 2}, 4.0},
      {"B64 L4096 bf16 q4 causal", {E(B2a), E(B2b), E(B2c)}, 64, 4096, 4, {0, 1, 2}, 3.6},
      {"B64 L4096 fp8 q1", {E(B3a), E(B3b), E(B3c), E(B3d), E(B3e), E(B3f)}, 64, 4096, 1, {0, 1, 2, 3}, 3.6},
      {"B64 L4096 fp8 q4 causal", {E(B4a), E(B4b), E(B4c), E(B4d)}, 64, 4096, 4, {0, 1, 2, 3}, 3.6},
      {"B1 L128K bf16 q1 64/8", {E(B5a), E(B5b), E(B5c), E(B5d)}, 1, 131072, 1, {0, 33, 49, 66, 99}, 3.7},
      {"B4 L128K bf16 q1 64/8", {E(B5a), E(B5b), E(B5c), E(B5d)}, 4, 131072, 1, {0, 12, 16, 33}, 4.0},
  };
  struct Row {
    std::string shape, cfg;
    int splits;
    double us, tbs, rel;
    double bar;
  };
  std::vector<Row> best_rows;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (const BenchShape& bs : shapes) {
    const Problem& prob = bs.entries[0].prob;
    XqaRandomOptions o;
    o.batch = bs.batch;
    o.min_seq_len = o.max_seq_len = bs.seq_len;
    o.short_fraction = 0;
    o.q_len = bs.q_len;
    o.seed = (uint64_t)time(nullptr) + bs.batch;
    DevCase dc(make_xqa_case(prob, o));
    // reference for the first two requests only (bytes of the whole batch are what is timed)
    ktune_xqa::Params hp = dc.c.host_params();
    hp.batch = std::min(2, bs.batch);
    hp.num_tokens = dc.c.q_cu[hp.batch];
    const XqaRefResult ref = xqa_reference(prob, hp);
    double kv_bytes = 0;
    for (int L : dc.c.seq_lens)
      kv_bytes += 2.0 * L * prob.num_kv_heads * prob.head_dim * ktune_common::dtype_size(int(prob.kv_dtype));
    Row best{bs.label, "", 0, 1e30, 0, 0, bs.bar};
    for (const Entry& e : bs.entries) {
      const std::string why = can_implement(e.prob, e.cfg, g_arch, g_lim);
      if (!why.empty()) {
        printf("  %s %s: %s\n", bs.label, e.cfg.key().c_str(), why.c_str());
        continue;
      }
      const int chosen = choose_num_splits(e.prob, e.cfg, bs.batch, bs.seq_len, g_lim);
      std::vector<int> cand = bs.splits;
      for (int& s : cand)
        if (s == 0) s = chosen;
      std::sort(cand.begin(), cand.end());
      cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
      for (int splits : cand) {
        const XqaCompare r = run_and_compare(dc, e, splits, ref, hp.batch);
        ktune_xqa::Params p = dc.params(splits);
        p.workspace = dc.ws;
        for (int i = 0; i < 3; ++i) launch(e, p);
        auto time_it = [&](bool with_combine) {
          std::vector<float> ts;
          for (int i = 0; i < 15; ++i) {
            CK(cudaEventRecord(e0));
            launch(e, p, 0, with_combine);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms);
          }
          std::sort(ts.begin(), ts.end());
          return ts[ts.size() / 2] * 1e3;
        };
        const double us = time_it(true), tbs = kv_bytes / (us * 1e-6) / 1e12;
        const double us_dec = splits > 1 ? time_it(false) : us;
        const bool ok = r.rel_l2 < tolerance(e.prob) && r.nonfinite == 0;
        printf("  %-26s %-10s splits %-4d%s %9.1f us (decode %7.1f) %6.3f TB/s  rel %.2e %s\n", bs.label,
               e.cfg.key().c_str(), splits, splits == chosen ? "*" : " ", us, us_dec, tbs, r.rel_l2, ok ? "" : "WRONG");
        fflush(stdout);
        if (ok && us < best.us) best = Row{bs.label, e.cfg.key(), splits, us, tbs, r.rel_l2, bs.bar};
      }
    }
    best_rows.push_back(best);
  }
  printf("\n%-26s %-10s %6s %9s %8s %6s %s\n", "shape", "config", "splits", "us", "TB/s", "bar", "rel_err");
  for (const Row& r : best_rows)
    printf("%-26s %-10s %6d %9.1f %8.3f %6.1f %.1e %s\n", r.shape.c_str(), r.cfg.c_str(), r.splits, r.us, r.tbs, r.bar,
           r.rel, r.tbs >= r.bar ? "MEETS" : "below");
  return 0;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "check";
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_lim.sm_count = prop.multiProcessorCount;
  g_lim.max_smem_per_block_optin = (int)prop.sharedMemPerBlockOptin;
  g_lim.max_threads_per_block = prop.maxThreadsPerBlock;
  g_lim.l2_bytes = prop.l2CacheSize;
  g_arch = ktune::Arch{prop.major, prop.minor, prop.major == 9 ? 'a' : char(0)};
  printf("device %s sm_%d%d, %d SMs, smem/block %d\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
         g_lim.max_smem_per_block_optin);
  if (mode == "selftest") return selftest();
  return mode == "bench" ? bench_all() : check_all();
}
