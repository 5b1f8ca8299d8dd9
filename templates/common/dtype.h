// Element types shared by every family. Plain C++ (host) and NVRTC device code: no includes.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KT_HD __host__ __device__ __forceinline__
#define KT_DEV __device__ __forceinline__
#else
#define KT_HD inline
#endif

namespace ktune_common {

// Values are part of generated source (Spec::kQType ...) and of cache keys: never renumber.
enum DType : int { kBF16 = 0, kFP16 = 1, kE4M3 = 2, kF32 = 3 };

KT_HD constexpr int dtype_size(int t) { return t == kE4M3 ? 1 : (t == kF32 ? 4 : 2); }
KT_HD constexpr bool dtype_is_16bit(int t) { return t == kBF16 || t == kFP16; }

}  // namespace ktune_common
