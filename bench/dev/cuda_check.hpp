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
