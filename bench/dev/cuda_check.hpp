// CK(call): aborts the dev harness with the CUDA runtime's error string, file and line when a call fails.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

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
