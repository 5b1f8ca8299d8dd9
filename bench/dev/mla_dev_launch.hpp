// One launch of a sparse_mla_decode kernel over the dev inputs (128 heads, kv_lora_rank 512, head groups of 64),
// the split-KV combine when splits > 1, and the outputs read back. Outputs are poisoned (0xFF: NaN) first.
// Include after the kernel templates (combine_kernel).
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

template <class BaseSpec, class Kern>
void launch_and_read(Kern kern, int threads, int smem, const ktune_mla::Params& p, int tokens, int splits,
                     std::vector<unsigned short>& out, std::vector<float>& lse) {
  allow_smem(kern, smem);
  out.assign(size_t(tokens) * 128 * 512, 0);
  lse.assign(size_t(tokens) * 128, 0.f);
  CK(cudaMemset(p.out, 0xFF, out.size() * 2));
  CK(cudaMemset(p.lse, 0xFF, lse.size() * 4));
  kern<<<dim3(2, splits, tokens), threads, smem>>>(p);
  if (splits > 1) ktune_mla::combine_kernel<BaseSpec><<<dim3(128, tokens), 128>>>(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(out.data(), p.out, out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(lse.data(), p.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
}
