// How fast can an SM gather random fp8_ds_mla rows (656 bytes each, one per top-k entry) from HBM? A probe for
// the sparse MLA kernels' load side, with no attention math: every CTA walks its token's top-k list in tiles of
// 64 rows and only folds the bytes into a checksum (so nothing is optimized away).
//   ring D: cp.async 16-byte chunks into a ring of D raw tiles in shared memory (D - 1 tiles in flight while
//           one is read), one CTA barrier per tile.
//   regs:   16-byte register loads, all of a tile's issued before any is used, no barrier (the loads of the
//           warp-specialized kernel's producer, without its conversion or hand-offs).
// Same inputs as the MLA dev harnesses (bench/dev/mla_dev_inputs.hpp): 4096 pages x 64 slots, random entries,
// top-k 2048, grid (heads / 64 = 2 CTAs per token, tokens). Bytes counted once per CTA (as the kernels read).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev bench/dev/gather_probe.cu \
//        -o .devbuild/gather_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

constexpr int kRow = 656, kChunks = kRow / 16, kTile = 64, kTopk = 2048;

__device__ unsigned g_sink;

template <int D, int T>
__global__ void __launch_bounds__(T) ring_gather(const unsigned char* kv, const int* idx) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int token = blockIdx.y, tid = threadIdx.x;
  const int* ix = idx + (long long)token * kTopk;
  const unsigned sb = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  constexpr int NT = kTopk / kTile;
  auto issue = [&](int j) {
    const unsigned dst0 = sb + (j % D) * kTile * kRow;
    for (int i = tid; i < kTile * kChunks; i += T) {
      const int r = i / kChunks, c = i - r * kChunks;
      const int slot = ix[j * kTile + r];
      const unsigned char* src = kv + (long long)(slot < 0 ? 0 : slot) * kRow + c * 16;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst0 + (r * kChunks + c) * 16), "l"(src),
                   "r"(slot < 0 ? 0 : 16)
                   : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int j = 0; j < D - 1; ++j) issue(j);
  unsigned acc = 0;
  for (int j = 0; j < NT; ++j) {
    if (j + D - 1 < NT) issue(j + D - 1);
    else asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group %0;" ::"n"(D - 1) : "memory");
    __syncthreads();
    const unsigned* t = reinterpret_cast<const unsigned*>(smem + (j % D) * kTile * kRow);
    for (int i = tid; i < kTile * kRow / 4; i += T) acc += t[i];
    __syncthreads();
  }
  if (acc == 0x12345678u) g_sink = acc;
}

// 128 threads as in the producer: row r of a tile by the 4 threads lr = r % 8 of warp (r / 8) % 4, rounds of 32
// rows; each thread 10 or 11 16-byte loads per row.
__global__ void __launch_bounds__(128) regs_gather(const unsigned char* kv, const int* idx) {
  const int token = blockIdx.y, tid = threadIdx.x, lane = tid & 31, pw = tid >> 5, lm = lane >> 3, lr = lane & 7;
  const int* ix = idx + (long long)token * kTopk;
  unsigned acc = 0;
  for (int j = 0; j < kTopk / kTile; ++j) {
    uint4 v[2][11];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int slot = ix[j * kTile + u * 32 + pw * 8 + lr];
      const unsigned char* row = kv + (long long)(slot < 0 ? 0 : slot) * kRow;
#pragma unroll
      for (int k = 0; k < 11; ++k) {
        const int c = lm + 4 * k;
        v[u][k] = make_uint4(0, 0, 0, 0);
        if (c < kChunks && slot >= 0)
          asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[u][k].x), "=r"(v[u][k].y), "=r"(v[u][k].z), "=r"(v[u][k].w)
                       : "l"(row + c * 16));
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int k = 0; k < 11; ++k) acc += v[u][k].x ^ v[u][k].y ^ v[u][k].z ^ v[u][k].w;
  }
  if (acc == 0x12345678u) g_sink = acc;
}

int main() {
  const int tokens = 128;
  const MlaDevInputs host = make_mla_dev_inputs(tokens, kTopk, 4096, 64, false, 0, -1);
  const ktune_mla::Params p = upload_mla_dev_inputs(host, 1);
  const auto* kv = static_cast<const unsigned char*>(p.kv_cache);
  std::printf("%-44s %6s %10s %10s %12s\n", "variant", "tokens", "us", "TB/s", "GB/s per SM");
  auto report = [&](const char* what, int toks, int groups, double us) {
    const double bytes = double(toks) * groups * kTopk * kRow;
    std::printf("%-44s %6d %10.1f %10.2f %12.1f\n", what, toks, us, bytes / us / 1e6, bytes / us / 1e3 / 132);
  };
  for (int toks : {64, 128}) {
    const dim3 grid(2, toks);
    report("regs, 128 threads, 22 loads in flight", toks, 2,
           median_us([&] { regs_gather<<<grid, 128>>>(kv, p.indices); }));
    CK(cudaFuncSetAttribute(regs_gather, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    report("regs, one CTA per SM (200 KB smem unused)", toks, 2,
           median_us([&] { regs_gather<<<grid, 128, 200 * 1024>>>(kv, p.indices); }));
    report("regs, 1 head group per token", toks, 1,
           median_us([&] { regs_gather<<<dim3(1, toks), 128>>>(kv, p.indices); }));
#define RING(D, T)                                                                                         \
  {                                                                                                        \
    const int smem = D * kTile * kRow;                                                                     \
    CK(cudaFuncSetAttribute(ring_gather<D, T>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));      \
    report("ring D=" #D ", " #T " threads", toks, 2,                                                       \
           median_us([&] { ring_gather<D, T><<<grid, T, smem>>>(kv, p.indices); }));                         \
  }
    RING(1, 256)
    RING(2, 256)
    RING(3, 256)
    RING(5, 256)
    RING(2, 128)
    RING(3, 512)
  }
  return 0;
}
