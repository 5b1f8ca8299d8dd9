// Does compute-sanitizer's racecheck order shared-memory accesses across a named barrier that only part of the
// CTA joins? Three warps; warp 0 writes 32 words, a named barrier, warp 1 reads them (then the roles swap for a
// write-after-read). Case 0: barrier 1 with 64 threads (warps 0 and 1; warp 2 returns at once, as the producer
// warpgroup of sparse_mla_decode's .ws kernel leaves early). Case 1: the same, warp 2 stays until the end.
// Case 2: all 96 threads join barrier 1 (warp 2 too). Case 3: as case 0, but warps 0 and 1 reach the barrier
// through different barrier instructions (each in its own branch), as the .ws kernel's roles do. Case 4: as
// case 3, with the reader signalling the write-after-read hand-off by barrier.arrive. Each access pair is ordered
// by the barrier under the PTX memory model in every case; a hazard reported for a case is the tool's.
//   nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a bench/dev/racecheck_named_barrier.cu \
//        -o .devbuild/racecheck_named_barrier
//   compute-sanitizer --tool racecheck .devbuild/racecheck_named_barrier 0|1|2|3|4
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__device__ void named_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ void named_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Cases 3 and 4: each warp has its own barrier instructions.
template <bool kArrive>
__global__ void split_handoff(int* out) {
  __shared__ int buf[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 0) {
    buf[lane] = lane * 7 + 1;
    named_sync(1, 64);
    named_sync(2, 64);  // the reader is done
    buf[lane] = 0;
  } else if (warp == 1) {
    named_sync(1, 64);
    const int v = buf[lane];
    if (kArrive)
      named_arrive(2, 64);
    else
      named_sync(2, 64);
    out[lane] = v;
  }
}

template <int kCase>
__global__ void handoff(int* out) {
  __shared__ int buf[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int count = kCase == 2 ? 96 : 64;
  if (kCase == 0 && warp == 2) return;
  if (warp == 2) {
    if (kCase == 2) {
      named_sync(1, count);
      named_sync(1, count);
    }
    return;
  }
  if (warp == 0) buf[lane] = lane * 7 + 1;  // written before the barrier
  named_sync(1, count);
  int v = 0;
  if (warp == 1) v = buf[lane];  // read after it
  named_sync(1, count);
  if (warp == 0) buf[lane] = 0;  // overwritten only after the read
  if (warp == 1) out[lane] = v;
}

int main(int argc, char** argv) {
  const int which = argc > 1 ? std::atoi(argv[1]) : 0;
  int* out = nullptr;
  if (cudaMalloc(&out, 32 * sizeof(int)) != cudaSuccess) return 2;
  if (which == 0) handoff<0><<<1, 96>>>(out);
  if (which == 1) handoff<1><<<1, 96>>>(out);
  if (which == 2) handoff<2><<<1, 96>>>(out);
  if (which == 3) split_handoff<false><<<1, 96>>>(out);
  if (which == 4) split_handoff<true><<<1, 96>>>(out);
  int host[32];
  if (cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost) != cudaSuccess) return 2;
  int bad = 0;
  for (int i = 0; i < 32; ++i) bad += host[i] != i * 7 + 1;
  std::printf("case %d: %s\n", which, bad ? "WRONG VALUES" : "values ok");
  return bad ? 1 : 0;
}
