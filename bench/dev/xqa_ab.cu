// A/B timing harness for the xqa_decode kernel across template trees: built once per tree
// (-I<tree>/templates), each binary times the same shapes with the same inputs, so runs of two trees
// interleaved in one device call compare the kernels alone (no runtime, no JIT).
//   xqa_ab [reps] [TEXT]   prints "shape us TB/s" rows (TEXT: only the rows whose name contains it); only Params
//   fields every compared tree has are set. Beside the kernels: a one-wave read of the same bytes (the floor),
//   lengths 1K-8K at B64 and page sizes 16/128, and the read of the decode's 4 KB pages through a shuffled page
//   table, by 16-byte loads and by the TMA unit's 1-D bulk copies (rows "read"): whether a TMA-fed ring could
//   read the FP8 cache faster than the loads the kernel issues now.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/tma.cuh"
#include "xqa_decode/kernel.cuh"

#include "cuda_check.hpp"

#define XQA_AB_SPEC_X(NAME, G, KVT, QL, MASK, T, ST, W, PS, WG)                                         \
  namespace ktune_xqa {                                                                                   \
  struct NAME {                                                                                           \
    static constexpr int kHeadDim = 128, kNumKvHeads = 8, kGroupSize = G, kPageSize = PS;                \
    static constexpr bool kLayoutHND = true;                                                              \
    static constexpr int kQType = 0, kKVType = KVT, kOutType = 0, kMaxQLen = QL, kMask = MASK;            \
    static constexpr bool kSinks = false, kSlidingWindow = false, kSoftcap = false, kWriteLse = false;   \
    static constexpr bool kChecked = false;                                                               \
    static constexpr int kTokensPerTile = T, kStages = ST, kWarps = W, kMTilesPerCta = 0;                 \
    static constexpr bool kWgmma = WG;                                                                    \
  };                                                                                                      \
  }

#define XQA_AB_SPEC_P(NAME, G, KVT, QL, MASK, T, ST, W, PS) XQA_AB_SPEC_X(NAME, G, KVT, QL, MASK, T, ST, W, PS, false)
#define XQA_AB_SPEC(NAME, G, KVT, QL, MASK, T, ST, W) XQA_AB_SPEC_P(NAME, G, KVT, QL, MASK, T, ST, W, 32)
XQA_AB_SPEC(Bf16Q1, 4, 0, 1, 0, 32, 3, 2)
XQA_AB_SPEC(Bf16Q4, 4, 0, 4, 1, 32, 3, 2)
XQA_AB_SPEC(Fp8Q1, 4, 2, 1, 0, 64, 3, 2)
XQA_AB_SPEC(Fp8Q4, 4, 2, 4, 1, 64, 3, 2)
XQA_AB_SPEC(Fp8Q4nomask, 4, 2, 4, 0, 64, 3, 2)
XQA_AB_SPEC(Fp8Q1causal, 4, 2, 1, 1, 64, 3, 2)
XQA_AB_SPEC(Bf16Q4nomask, 4, 0, 4, 0, 32, 3, 2)
XQA_AB_SPEC(Big, 8, 0, 1, 0, 32, 3, 2)
XQA_AB_SPEC(Bf16Q8, 4, 0, 8, 1, 32, 2, 2)
XQA_AB_SPEC(Bf16Q16, 4, 0, 16, 1, 32, 2, 2)
// Page size: contiguous bytes per (page, kv head) of the HND cache (fp8 p32: 4 KB, bf16 p32: 8 KB)
XQA_AB_SPEC_P(Fp8Q1p128, 4, 2, 1, 0, 64, 3, 2, 128)
XQA_AB_SPEC_P(Bf16Q1p16, 4, 0, 1, 0, 32, 3, 2, 16)
// Hopper wgmma path (sm_90a defaults): 64 query rows a kv head on one warpgroup, 128 rows on two
XQA_AB_SPEC_X(WgQ16, 4, 0, 16, 1, 32, 2, 4, 32, true)
XQA_AB_SPEC_X(Wg128, 8, 0, 16, 1, 32, 2, 8, 32, true)
XQA_AB_SPEC_X(Wg128s3, 8, 0, 16, 1, 32, 3, 8, 32, true)
XQA_AB_SPEC_X(Wg128t64, 8, 0, 16, 1, 64, 2, 8, 32, true)

namespace {

struct Buffers {
  void* kv = nullptr;
  void* q = nullptr;
  void* out = nullptr;
  float* ws = nullptr;
  int* tables = nullptr;
  int* lens = nullptr;
};

unsigned lcg(unsigned long long& s) {
  s = s * 6364136223846793005ULL + 1442695040888963407ULL;
  return unsigned(s >> 33);
}

// Random bf16 of magnitude ~2^-7 (read as e4m3 bytes: finite, the exponent field is never all ones).
__global__ void fill_kernel(unsigned short* v, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    v[i] = (unsigned short)(0x3C00 | (h & 0x8077));
  }
}

void fill_random(void* dev, size_t bytes, unsigned seed) {
  fill_kernel<<<1024, 256>>>(static_cast<unsigned short*>(dev), bytes / 2, seed);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

// The read floor of one wave: `ctas` CTAs of 256 threads each stream a contiguous share of `bytes` with eight
// 16-byte loads in flight per thread (at 4 CTAs per SM, 128 KB per SM: what the decode's ring holds).
__global__ void __launch_bounds__(256) read_kernel(const uint4* src, size_t n16, unsigned* sink) {
  const size_t per = (n16 + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n16, lo + per);
  unsigned acc = 0;
  for (size_t i = lo + threadIdx.x; i < hi; i += 8 * 256) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = i + u * 256 < hi ? __ldcs(src + i + u * 256) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;  // keeps the loads
}

// The same read over a shuffled table of `chunk`-byte pages (4 KB: one FP8 page of 32 tokens x 128 B, what the
// decode's CTAs gather): a CTA takes a contiguous run of table entries, each of its 256 threads loading one 16
// bytes of each of 8 pages at a time (chunk = 4096: one page is one load per thread).
__global__ void __launch_bounds__(256) paged_read_kernel(const uint4* src, const int* pages, int n_pages,
                                                         unsigned* sink) {
  constexpr int kPer16 = 4096 / 16;  // 16-byte pieces per page = threads per CTA
  const int per = (n_pages + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n_pages, lo + per);
  unsigned acc = 0;
  for (int i = lo; i < hi; i += 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i + u < hi ? __ldcs(src + (size_t)pages[i + u] * kPer16 + threadIdx.x) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9E3779B9u) sink[0] = acc;
}

// The read through the TMA unit: one thread per CTA streams its run of table entries (pages == nullptr: the
// chunks in order) into a ring of `stages` shared-memory slots of `chunk` bytes with 1-D bulk copies
// (cp.async.bulk, each completing on its slot's transaction mbarrier) and refills a slot as soon as its bytes
// have landed: stages * chunk bytes in flight per CTA, no register or issue cost beyond one copy per chunk. The
// warp first copies the CTA's table entries to shared memory, so no copy waits on a table load.
__global__ void __launch_bounds__(32) bulk_read_kernel(const char* src, const int* pages, int n_chunks,
                                                       unsigned chunk, int stages, unsigned* sink) {
  namespace kc = ktune_common;
  extern __shared__ __align__(128) unsigned char ring[];
  const int per = (n_chunks + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n_chunks, lo + per);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(ring + (size_t)stages * chunk);
  int* table = reinterpret_cast<int*>(bars + stages);
  for (int i = lo + int(threadIdx.x); i < hi; i += 32) table[i - lo] = pages ? pages[i] : i;
  __syncwarp();
  if (threadIdx.x != 0 || hi <= lo) return;
  const unsigned ring_s = unsigned(__cvta_generic_to_shared(ring)), bar_s = unsigned(__cvta_generic_to_shared(bars));
  for (int s = 0; s < stages; ++s) kc::mbar_init(bar_s + 8 * s, 1);
  auto issue = [&](int k) {  // k: index in this CTA's run
    const int s = k % stages;
    kc::mbar_arrive_expect_tx(bar_s + 8 * s, chunk);
    kc::bulk_load(ring_s + s * chunk, src + (size_t)table[k] * chunk, chunk, bar_s + 8 * s);
  };
  const int n = hi - lo;
  for (int k = 0; k < n && k < stages; ++k) issue(k);
  for (int k = 0; k < n; ++k) {
    kc::mbar_wait(bar_s + 8 * (k % stages), (k / stages) & 1);
    if (k + stages < n) issue(k + stages);
  }
  if (ring[0] == 0x5Au && ring[chunk - 1] == 0xA5u && ring[(size_t)(stages - 1) * chunk] == 0x3Cu) sink[0] = 1;
}

// xqa_ab [reps] [TEXT]: only the rows whose name contains TEXT (one kernel under a profiler)
const char* g_only = nullptr;
bool wanted(const char* name) { return !g_only || std::strstr(name, g_only); }

void time_read(const char* name, size_t bytes, int ctas, int reps, Buffers& b) {
  if (!wanted(name)) return;
  const double us = median_us([&] { read_kernel<<<ctas, 256>>>(static_cast<const uint4*>(b.kv), bytes / 16,
                                                               reinterpret_cast<unsigned*>(b.ws)); }, reps);
  std::printf("%-22s %9.1f us %6.3f TB/s\n", name, us, bytes / us * 1e-6);
}

// A shuffled table of bytes / chunk page indices in b.tables (its capacity: 262144 entries); nullptr: none.
const int* shuffled_pages(size_t bytes, unsigned chunk, bool paged, Buffers& b) {
  if (!paged) return nullptr;
  const size_t n = bytes / chunk;
  if (n > 64 * 4096) std::fprintf(stderr, "xqa_ab: %zu pages exceed the table buffer\n", n), std::exit(1);
  std::vector<int> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int(i);
  unsigned long long seed = 777;
  for (size_t i = n - 1; i > 0; --i) std::swap(t[i], t[lcg(seed) % (i + 1)]);
  CK(cudaMemcpy(b.tables, t.data(), n * 4, cudaMemcpyHostToDevice));
  return b.tables;
}

void time_paged_read(const char* name, size_t bytes, int ctas, int reps, Buffers& b) {
  if (!wanted(name)) return;
  const int* pages = shuffled_pages(bytes, 4096, true, b);
  const double us = median_us([&] { paged_read_kernel<<<ctas, 256>>>(static_cast<const uint4*>(b.kv), pages,
                                                                     int(bytes / 4096), reinterpret_cast<unsigned*>(b.ws)); },
                              reps);
  std::printf("%-22s %9.1f us %6.3f TB/s\n", name, us, bytes / us * 1e-6);
}

void time_bulk_read(const char* name, size_t bytes, unsigned chunk, int stages, int ctas, bool paged, int reps,
                    Buffers& b) {
  if (!wanted(name)) return;
  const int n = int(bytes / chunk), per = (n + ctas - 1) / ctas;
  const int* pages = shuffled_pages(bytes, chunk, paged, b);
  const int smem = int(stages * chunk + 8 * stages + 4 * per);
  allow_smem(bulk_read_kernel, smem);
  const double us = median_us([&] { bulk_read_kernel<<<ctas, 32, smem>>>(static_cast<const char*>(b.kv), pages, n,
                                                                         chunk, stages, reinterpret_cast<unsigned*>(b.ws)); },
                              reps);
  std::printf("%-22s %9.1f us %6.3f TB/s\n", name, us, bytes / us * 1e-6);
}

// with_combine: the split-KV merge launched after the decode, timed together (what a split call costs).
template <class S>
double time_shape(const char* name, int batch, int seq_len, int splits, int reps, Buffers& b,
                  bool with_combine = false) {
  if (!wanted(name)) return 0;
  using namespace ktune_xqa;
  constexpr Shape sh = Traits<S>::sh;
  const int HKV = S::kNumKvHeads, D = S::kHeadDim, PS = S::kPageSize, QL = S::kMaxQLen;
  const int pages_per_req = (seq_len + PS - 1) / PS;
  const long long es = S::kKVType == 2 ? 1 : 2;
  const long long num_pages = (long long)batch * pages_per_req;
  std::vector<int> tables(num_pages), lens(batch, seq_len);
  for (long long i = 0; i < num_pages; ++i) tables[i] = int(i);
  unsigned long long seed = 12345;
  for (long long i = num_pages - 1; i > 0; --i) std::swap(tables[i], tables[lcg(seed) % (i + 1)]);
  CK(cudaMemcpy(b.tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  Params p;
  std::memset(&p, 0, sizeof p);
  p.q = b.q;
  p.kv_cache = b.kv;
  p.block_tables = b.tables;
  p.seq_lens = b.lens;
  p.out = b.out;
  p.workspace = b.ws;
  p.batch = batch;
  p.num_tokens = batch * QL;
  p.q_len_per_req = QL;
  p.max_pages_per_req = pages_per_req;
  p.num_pages = num_pages;
  p.bmm1_scale = 0.088f;
  p.bmm2_scale = 1.f;
  p.window_left = -1;
  p.num_splits = splits;
  auto kern = decode_kernel<S>;
  allow_smem(kern, sh.smem_total);
  const dim3 grid(splits, HKV * sh.m_groups, batch), block(sh.threads);
  auto comb = combine_kernel<S>;
  const dim3 cgrid(QL * S::kNumKvHeads * S::kGroupSize, batch);
  const double us = median_us(
      [&] {
        kern<<<grid, block, sh.smem_total>>>(p);
        if (with_combine) comb<<<cgrid, 128>>>(p);
      },
      reps);
  const double bytes = double(batch) * seq_len * HKV * D * 2.0 * es;
  // FNV-1a over the output rows: equal across trees means bit-identical outputs (deterministic inputs)
  std::vector<unsigned char> out(size_t(batch) * QL * S::kNumKvHeads * S::kGroupSize * D * 2);
  CK(cudaMemcpy(out.data(), b.out, out.size(), cudaMemcpyDeviceToHost));
  unsigned long long h = 1469598103934665603ULL;
  for (unsigned char c : out) h = (h ^ c) * 1099511628211ULL;
  std::printf("%-22s %9.1f us %6.3f TB/s  out %016llx\n", name, us, bytes / us * 1e-6, h);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 30;
  if (argc > 2) g_only = argv[2];
  Buffers b;
  const size_t kv_bytes = 1100ull << 20;
  CK(cudaMalloc(&b.kv, kv_bytes));
  CK(cudaMalloc(&b.q, 64 << 20));
  CK(cudaMalloc(&b.out, 64 << 20));
  CK(cudaMalloc(&b.ws, 64 << 20));
  CK(cudaMalloc(&b.tables, 64 * 4096 * 4));
  CK(cudaMalloc(&b.lens, 256 * 4));
  fill_random(b.kv, kv_bytes, 1);
  fill_random(b.q, 64 << 20, 2);
  time_shape<ktune_xqa::Bf16Q1>("B64 L4096 bf16 q1", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q4>("B64 L4096 bf16 q4c", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("B64 L4096 fp8 q1", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q4>("B64 L4096 fp8 q4c", 64, 4096, 1, reps, b);
  // FP8 q4 against q1 (the same MMAs: q1's 16 rows are 4 real and 12 zero): q4 with the query rows after the
  // first of every request zero, so its MMA operands hold q1's share of zeros (outputs differ; timing only)
  if (wanted("B64 L4096 fp8 q4c q0only")) {
    const size_t tok = size_t(ktune_xqa::Fp8Q4::kNumKvHeads) * ktune_xqa::Fp8Q4::kGroupSize * 128 * 2;
    CK(cudaMemset2D(static_cast<char*>(b.q) + tok, 4 * tok, 0, 3 * tok, 64));
    time_shape<ktune_xqa::Fp8Q4>("B64 L4096 fp8 q4c q0only", 64, 4096, 1, reps, b);
    fill_random(b.q, 64 << 20, 2);
  }
  // What the causal mask's code costs: the same kernels with the mask compiled out / in
  time_shape<ktune_xqa::Fp8Q4nomask>("B64 L4096 fp8 q4 nomask", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1causal>("B64 L4096 fp8 q1 causal", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q4nomask>("B64 L4096 bf16 q4 nomask", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Big>("B1 L128K 64/8 s33", 1, 131072, 33, reps, b);
  time_shape<ktune_xqa::Bf16Q8>("B64 L4096 bf16 q8c", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q16>("B64 L4096 bf16 q16c", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::WgQ16>("B64 L4096 q16c wg64", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Wg128>("B64 64/8 q16c wg128", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Wg128s3>("B64 64/8 q16c wg128 s3", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Wg128t64>("B64 64/8 q16c wg128 t64", 64, 4096, 1, reps, b);
  // The read floor of one wave of the same bytes, and length scaling at a fixed grid (B64: 512 CTAs, one
  // wave): a fixed cost per call shows as the intercept of time against bytes.
  time_read("read 512MiB 512 CTAs", 536870912ull, 512, reps, b);
  time_read("read 1GiB 512 CTAs", 1073741824ull, 512, reps, b);
  time_read("read 512MiB 4096 CTAs", 536870912ull, 4096, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("fp8 q1 L2048", 64, 2048, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("fp8 q1 L8192", 64, 8192, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q1>("bf16 q1 L1024", 64, 1024, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q1>("bf16 q1 L2048", 64, 2048, 1, reps, b);
  // Split-KV at B1 L128K (264 CTAs at 33 splits: two per SM): decode + combine at several split counts.
  for (int splits : {33, 44, 66, 132}) {
    char name[32];
    std::snprintf(name, sizeof name, "B1 L128K s%d +comb", splits);
    time_shape<ktune_xqa::Big>(name, 1, 131072, splits, reps, b, true);
  }
  // Grid balance (512 CTAs leave 16 of 132 SMs with 3 CTAs, the rest with 4): B66 is 528 CTAs, 4 on every SM;
  // B33 two per SM. Equal TB/s across the three: the uneven last CTAs cost nothing.
  time_read("bal read 512MiB 512 CTAs", 536870912ull, 512, reps, b);
  time_read("bal read 528MiB 528 CTAs", 553648128ull, 528, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("bal fp8 q1 B64", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("bal fp8 q1 B66", 66, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("bal fp8 q1 B33", 33, 4096, 1, reps, b);
  time_shape<ktune_xqa::Fp8Q1>("bal fp8 q1 B132", 132, 2048, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q1>("bal bf16 q1 B64", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q1>("bal bf16 q1 B66", 66, 4096, 1, reps, b);
  // The FP8 cache's bytes (512 MiB: B64 L4096, 8 kv heads, d128) in 4 KB pages, beside the contiguous load
  // rows above: the loads through a shuffled table, then bulk copies at 128 KB (the decode ring's) and 192 KB in
  // flight per SM, four CTAs per SM or one persistent CTA per SM; 1 GiB for the slope and the fixed cost.
  const size_t mib512 = 536870912ull, gib1 = 1073741824ull;
  time_paged_read("read paged 512MiB 512", mib512, 512, reps, b);
  time_bulk_read("read bulk 4Kx8 512", mib512, 4096, 8, 512, false, reps, b);
  time_bulk_read("read bulk paged 4Kx8 512", mib512, 4096, 8, 512, true, reps, b);
  time_bulk_read("read bulk paged 4Kx12 512", mib512, 4096, 12, 512, true, reps, b);
  time_bulk_read("read bulk paged 4Kx32 132", mib512, 4096, 32, 132, true, reps, b);
  time_bulk_read("read bulk paged 4Kx48 132", mib512, 4096, 48, 132, true, reps, b);
  time_bulk_read("read bulk paged 8Kx4 512", mib512, 8192, 4, 512, true, reps, b);
  time_bulk_read("read bulk 16Kx2 512", mib512, 16384, 2, 512, false, reps, b);
  time_bulk_read("read bulk paged 1G 4Kx8", gib1, 4096, 8, 512, true, reps, b);
  time_bulk_read("read bulk paged 1G 4Kx48", gib1, 4096, 48, 132, true, reps, b);
  // Small reads, where the fixed cost of a call dominates (34 MiB ~ the packed weight + scales of an MXFP4
  // N = K = 8192 GEMM): loads in one wave against bulk copies, persistent and four CTAs per SM.
  const size_t mib34 = 34ull << 20;
  time_read("read ldcs 34MiB 528", mib34, 528, reps, b);
  time_read("read ldcs 34MiB 132", mib34, 132, reps, b);
  time_bulk_read("read bulk 34MiB 4Kx48 132", mib34, 4096, 48, 132, false, reps, b);
  time_bulk_read("read bulk 34MiB 16Kx12 132", mib34, 16384, 12, 132, false, reps, b);
  time_bulk_read("read bulk 34MiB 4Kx8 528", mib34, 4096, 8, 528, false, reps, b);
  time_shape<ktune_xqa::Fp8Q1p128>("fp8 q1 page 128", 64, 4096, 1, reps, b);
  time_shape<ktune_xqa::Bf16Q1p16>("bf16 q1 page 16", 64, 4096, 1, reps, b);
  return 0;
}
