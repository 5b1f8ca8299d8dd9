// Does the proxy fence before a hand-off (fence.proxy.async.shared::cta, or the one-way
// fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster: both MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S
// in sm_90a SASS) wait for the thread's global loads in flight, at the fence or at the next shared-memory access?
// Each thread issues one 16-byte load from a 1 GiB buffer (an HBM miss), stores to shared memory, runs variant
// V's fence, then a shared-memory load (or atomic, as an mbarrier arrive is) whose result it uses; clock64 before
// the fence, after it, and after that access. The global load's value is used only at the end.
//   nvcc -O2 -gencode=arch=compute_90a,code=sm_90a -Ibench/dev bench/dev/proxy_fence_probe.cu -o .devbuild/proxy_fence_probe
//   .devbuild/proxy_fence_probe        (GPU; prints a table of median cycles)
#include <cuda_runtime.h>

#include "cuda_check.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>
// V: 0 two-way fence, 1 one-way fence, 2 no fence; A: 0 shared load after, 1 shared atomic after; L: load in flight
template <int V, int A, bool L>
__global__ void probe(const int4* __restrict__ g, size_t n, long long* cyc, int* out) {
  __shared__ int s[256];
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t idx = (size_t(tid) * 2654435761u) % n;
  int4 v = make_int4(0, 0, 0, 0);
  if (L) asm volatile("ld.global.v4.s32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(g + idx));
  s[threadIdx.x] = tid;
  const long long t0 = clock64();
  if (V == 0) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (V == 1) asm volatile("fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;" ::: "memory");
  const long long t1 = clock64();
  int r;
  const unsigned a = (unsigned)__cvta_generic_to_shared(&s[(threadIdx.x + 1) & 255]);
  if (A == 0) asm volatile("ld.volatile.shared.s32 %0, [%1];" : "=r"(r) : "r"(a) : "memory");
  else asm volatile("atom.shared.add.s32 %0, [%1], 1;" : "=r"(r) : "r"(a) : "memory");
  asm volatile("" :: "r"(r));
  const long long t2 = clock64();
  out[tid] = v.x + v.y + v.z + v.w + r;
  const long long t3 = clock64();
  cyc[3 * tid] = t1 - t0, cyc[3 * tid + 1] = t2 - t0, cyc[3 * tid + 2] = t3 - t0;
}
template <int V, int A, bool L>
void one(const char* name, int4* g, size_t n, long long* cyc, int* out) {
  const int blocks = 132, threads = 256, T = blocks * threads;
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaMemset(g, rep, 256 << 20));  // push the probe's lines out of L2
    probe<V, A, L><<<blocks, threads>>>(g, n, cyc, out);
    CK(cudaDeviceSynchronize());
  }
  std::vector<long long> h(3 * T), c[3];
  CK(cudaMemcpy(h.data(), cyc, T * 24, cudaMemcpyDeviceToHost));
  for (int i = 0; i < T; ++i) for (int k = 0; k < 3; ++k) c[k].push_back(h[3 * i + k]);
  for (auto& x : c) std::sort(x.begin(), x.end());
  printf("| %-46s | %6lld | %6lld | %6lld |\n", name, c[0][T / 2], c[1][T / 2], c[2][T / 2]);
}
int main() {
  const size_t n = (1ull << 30) / 16;
  int4* g; long long* cyc; int* out;
  CK(cudaMalloc(&g, n * 16)); CK(cudaMemset(g, 1, n * 16));
  CK(cudaMalloc(&cyc, 132 * 256 * 24)); CK(cudaMalloc(&out, 132 * 256 * 4));
  printf("| variant (cycles from before the fence, median over 33792 threads) | to after the fence | to after the shared access | to after the global load's use |\n| --- | --- | --- | --- |\n");
  one<0, 0, true>("two-way fence, load in flight, shared load", g, n, cyc, out);
  one<1, 0, true>("one-way fence, load in flight, shared load", g, n, cyc, out);
  one<2, 0, true>("no fence, load in flight, shared load", g, n, cyc, out);
  one<0, 1, true>("two-way fence, load in flight, shared atomic", g, n, cyc, out);
  one<2, 1, true>("no fence, load in flight, shared atomic", g, n, cyc, out);
  one<0, 0, false>("two-way fence, no load, shared load", g, n, cyc, out);
  return 0;
}
