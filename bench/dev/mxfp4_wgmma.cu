// Tile timing for the mxfp4_gemm wgmma path (M = 4096, N = K = 8192; `mid`: M = 64..512; `moe`: the GPT-OSS
// grouped shapes at 64 and 128 rows per expert, equal or routed at random): the library kernel
// (templates/mxfp4_gemm/kernel.cuh) built here for tiles the search space may not hold, with Specs of this file.
// Timing only: outputs are not checked (the GPU tests do that for the real configs).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev bench/dev/mxfp4_wgmma.cu \
//        -o mxfp4_wgmma -L/usr/local/cuda/lib64/stubs -lcuda
// Old against new: the same command with -DKT_OLD and -I pointing at the templates of a tree from before the
// shared-memory weight ring (`git archive REV templates`): every wgmma tile then runs d2 (two chunks in
// registers), and the rows that only vary the ring depth are left out.
#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda_check.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "mxfp4_dev_params.hpp"
#include "mxfp4_gemm/kernel.cuh"

// Weight ring slots (d) of a wgmma spec; an old tree (-DKT_OLD, weight prefetched in registers) takes d2.
#ifdef KT_OLD
#define RING(d) 2
#else
#define RING(d) d
#endif

namespace dev {
template <int kBMv, int kWNv, int kStagesv, int kDepthv, bool kWg = true, int kWKv = 1, bool kGroupedv = false>
struct Spec {
  static constexpr bool kNative = false, kTcgen05 = false;
  static constexpr int kAType = ::ktune_common::kBF16, kOutType = ::ktune_common::kBF16;
  static constexpr bool kGrouped = kGroupedv;
  static constexpr int kBM = kBMv, kTN = kWg ? 1 : 2, kWN = kWNv, kWK = kWKv, kStages = kStagesv, kDepth = kDepthv;
  static constexpr bool kWgmma = kWg;
};
}  // namespace dev

struct Bufs {
  unsigned *w, *s;
  unsigned short *a, *c;
  int m, n, k;
  int experts = 0;           // grouped (`moe`): experts of m / experts rows each
  int* offsets = nullptr;    // device expert_offsets
};

// Device buffers: a packed weight of wb random bytes, sb scale bytes in 2^(lo-127) .. 2^(lo-120), a_elems bf16
// activations of magnitude 0.5..1 with random signs, and an output of c_elems bf16.
void fill_buffers(Bufs& b, size_t wb, size_t sb, unsigned lo, size_t a_elems, size_t c_elems) {
  std::vector<unsigned char> hw(wb), hs(sb);
  unsigned x = 12345;
  for (auto& v : hw) v = (x = x * 1664525u + 1013904223u) >> 24;
  for (auto& v : hs) v = lo + ((x = x * 1664525u + 1013904223u) >> 29);
  std::vector<unsigned short> ha(a_elems);
  for (auto& v : ha) v = 0x3F00 | ((x = x * 1664525u + 1013904223u) >> 25) | (x & 0x8000u);
  CK(cudaMalloc(&b.w, wb));
  CK(cudaMalloc(&b.s, sb));
  CK(cudaMalloc(&b.a, ha.size() * 2));
  CK(cudaMalloc(&b.c, c_elems * 2));
  CK(cudaMemcpy(b.w, hw.data(), wb, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.s, hs.data(), sb, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b.a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
}

template <int BM, int WN, int ST, int D, bool WG = true, int WK = 1>
void run(const Bufs& b, const char* what) {
  using S = dev::Spec<BM, WN, ST, D, WG, WK>;
  using G = dev::Spec<BM, WN, ST, D, WG, WK, true>;
  constexpr ktune_mxfp4::Shape sh = ktune_mxfp4::K<S>::kS;
  auto kern = b.experts ? ktune_mxfp4::gemm_kernel<G> : ktune_mxfp4::gemm_kernel<S>;
  const cudaFuncAttributes fa = allow_smem(kern, sh.smem_total);
  ktune_mxfp4::Params p = packed_dev_params(b.a, b.c, b.w, b.s, b.m, b.n, b.k, b.experts, b.offsets);
  if (WG) {  // the launch's TMA view of A (templates/mxfp4_gemm/launch.cpp encode_a_map)
    const cuuint64_t dims[2] = {cuuint64_t(b.k), cuuint64_t(b.m)};
    const cuuint64_t strides[1] = {cuuint64_t(b.k) * 2};
    const cuuint32_t box[2] = {64, cuuint32_t(BM)};
    const cuuint32_t es[2] = {1, 1};
    CUtensorMap map;
    if (cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, b.a, dims, strides, box, es,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::printf("cuTensorMapEncodeTiled failed\n");
      std::exit(2);
    }
    std::memcpy(p.a_tmap, &map, sizeof(map));
  }
  // grouped: the launch's upper bound on (expert, m tile) pairs (launch.cpp)
  const dim3 grid((p.n16 + S::kTN * WN - 1) / (S::kTN * WN), (b.m + BM - 1) / BM + b.experts);
  const int reps = 10;
  std::vector<cudaEvent_t> ev(reps + 1);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 2; ++i) kern<<<grid, sh.threads, sh.smem_total>>>(p);
  CK(cudaEventRecord(ev[0]));
  for (int i = 0; i < reps; ++i) {
    kern<<<grid, sh.threads, sh.smem_total>>>(p);
    CK(cudaEventRecord(ev[i + 1]));
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[i], ev[i + 1]));
  std::sort(t.begin(), t.end());
  const double us = t[reps / 2] * 1e3;
  std::printf("bm%-3d wn%d wk%d s%d d%d %-3s %-34s %8.1f us %6.1f TFLOP/s  regs %3d local %d\n", BM, WN, WK, ST,
              D, WG ? "wg" : "mma", what, us, 2.0 * b.m * b.n * b.k / us / 1e6, fa.numRegs,
              int(fa.localSizeBytes));
  for (auto& e : ev) CK(cudaEventDestroy(e));
}

// `mxfp4_wgmma mid` runs M = 64, 128, 256 and 512 instead: tiles with warpgroups splitting K (wk2, wk4) against
// one warpgroup per 64 weight rows (bench/results/2026-11-30-h200-mxfp4-mid-m.md).
void mid(Bufs& b);
// `mxfp4_wgmma moe` runs the GPT-OSS-120B MoE shapes (128 experts, gate_up n 5760 / down n 2880, k 2880) at 64 and
// 128 rows per expert: the weight (1.1 GB for gate_up) streams from DRAM, once per m tile.
int moe();

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc > 1 && std::strcmp(argv[1], "moe") == 0) return moe();
  Bufs b{};
  b.m = argc > 1 && std::strcmp(argv[1], "mid") == 0 ? 512 : 4096;  // buffers sized for the largest M
  b.n = 8192;
  b.k = 8192;
  fill_buffers(b, size_t(b.n) * b.k / 2, size_t(b.n) * b.k / 32, 120, size_t(b.m) * b.k, size_t(b.m) * b.n);
  using namespace ktune_mxfp4;
  if (b.m == 512) {
    mid(b);
    return 0;
  }
  run<128, 4, 4, 2, false>(b, "mma.sync bm128.tn2.wn4");
  run<256, 8, 4, RING(4)>(b, "bm256 wn8 (the default)");
  run<128, 8, 4, RING(4)>(b, "bm128 wn8");
#ifndef KT_OLD
  run<256, 8, 4, 2>(b, "bm256 wn8 d2");
  run<256, 8, 4, 8>(b, "bm256 wn8 d8");
  run<256, 8, 3, 8>(b, "bm256 wn8 s3 d8");
  run<128, 8, 4, 8>(b, "bm128 wn8 d8");
#endif
  return 0;
}

void mid(Bufs& b) {
  using namespace ktune_mxfp4;
  for (int m : {64, 128, 256, 512}) {
    b.m = m;
    std::printf("M = %d\n", m);
    if (m <= 128) {
      run<64, 4, 4, RING(4), true, 2>(b, "bm64 wn4 wk2");
      run<64, 4, 4, RING(4), true, 4>(b, "bm64 wn4 wk4");
    }
    if (m >= 128) {
      run<128, 4, 3, RING(4), true, 4>(b, "bm128 wn4 wk4 s3 (M = 128 default)");
      run<128, 4, 4, RING(4), true, 2>(b, "bm128 wn4 wk2");
#ifndef KT_OLD
      run<128, 4, 3, 2, true, 4>(b, "bm128 wn4 wk4 s3 d2");
#endif
    }
    if (m >= 256) {
      run<256, 4, 3, RING(4), true, 2>(b, "bm256 wn4 wk2 s3 (M = 256 default)");
      run<256, 8, 4, RING(4)>(b, "bm256 wn8 (the M >= 512 default)");
#ifndef KT_OLD
      run<256, 4, 3, 2, true, 2>(b, "bm256 wn4 wk2 s3 d2");
      run<256, 8, 4, 8>(b, "bm256 wn8 d8");
#endif
    }
  }
}

int moe() {
  const int experts = 128, k = 2880, max_rows = 192;
  Bufs b{};
  b.k = k;
  b.experts = experts;
  size_t wb = 0, sb = 0;
  packed_dev_bytes(5760, k, experts, &wb, &sb);
  fill_buffers(b, wb, sb, 118, size_t(experts) * max_rows * k, size_t(experts) * max_rows * 5760);  // 2^-9 .. 2^-2
  CK(cudaMalloc(&b.offsets, (experts + 1) * sizeof(int)));
  for (int n : {5760, 2880})
    for (int rows : {128, 64})
      for (bool uneven : {false, true}) {
        b.n = n;
        b.m = experts * rows;
        // uniform: every expert `rows` rows; uneven: the same total routed uniformly at random (a multinomial
        // draw, as the tuner's workload and bench_mxfp4 route), so about half the experts have more than `rows`
        std::vector<int> count(experts, uneven ? 0 : rows), off(experts + 1, 0);
        unsigned r = 777u + unsigned(rows);
        if (uneven)
          for (int i = 0; i < b.m; ++i) ++count[((r = r * 1664525u + 1013904223u) >> 8) % experts];
        for (int e = 0; e < experts; ++e) off[e + 1] = off[e] + count[e];
        CK(cudaMemcpy(b.offsets, off.data(), off.size() * sizeof(int), cudaMemcpyHostToDevice));
        std::printf("n %d k %d, %d experts x %d rows %s (max %d)\n", n, k, experts, rows,
                    uneven ? "routed at random" : "each", *std::max_element(count.begin(), count.end()));
        run<128, 8, 4, RING(4)>(b, "bm128 wn8 (the 64..255-row default)");
        run<128, 4, 4, RING(4)>(b, "bm128 wn4");
        run<64, 4, 4, RING(4)>(b, "bm64 wn4");
        run<192, 4, 3, RING(4)>(b, "bm192 wn4 s3");
        run<256, 8, 4, RING(4)>(b, "bm256 wn8");
#ifndef KT_OLD
        run<128, 8, 4, 2>(b, "bm128 wn8 d2");
        run<128, 8, 4, 8>(b, "bm128 wn8 d8");
        run<128, 8, 3, 8>(b, "bm128 wn8 s3 d8");
        run<128, 4, 4, 8>(b, "bm128 wn4 d8");
        run<64, 4, 4, 8>(b, "bm64 wn4 d8");
        run<192, 4, 3, 8>(b, "bm192 wn4 s3 d8");
#endif
      }
  return 0;
}
