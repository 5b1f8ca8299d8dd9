// CK(call): aborts the dev harness with the CUDA runtime's error string, file and line when a call fails.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

// A kernel made launchable with `smem` bytes of dynamic shared memory; returns its attributes (registers, local
// memory) for the harness's table.
template <class Kernel>
cudaFuncAttributes allow_smem(Kernel kern, int smem) {
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes fa{};
  CK(cudaFuncGetAttributes(&fa, kern));
  return fa;
}

// Median time of `reps` calls of launch() (CUDA events around each, after three warm-up calls), microseconds.
template <class Launch>
double median_us(Launch&& launch, int reps = 20) {
  for (int i = 0; i < 3; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&t[i], a, b));
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[reps / 2] * 1e3;
}

// Median time of `reps` calls of launch() queued back to back, with CUDA events recorded around each (after three
// warm-up calls), microseconds. Unlike median_us, nothing waits between calls, so each interval is the GPU's
// time for that call alone and not also the host's submission of it.
template <class Launch>
double median_us_queued(Launch&& launch, int reps = 40) {
  for (int i = 0; i < 3; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    launch();
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  std::sort(t.begin(), t.end());
  return t[reps / 2] * 1e3;
}
