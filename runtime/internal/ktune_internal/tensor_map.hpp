// TMA descriptors for kernels that read through the tensor memory accelerator (sm_90+).
#pragma once

#include <cstdint>

namespace ktune::internal {

// Encodes a 2-D bf16 tensor map into `out` (a CUtensorMap: 64 bytes, 64-byte aligned): `rows` rows of `cols`
// elements, `row_stride_bytes` apart, read in boxes of box_cols x box_rows with the 128-byte swizzle; reads past
// the edges return zero. Throws Error(cuda_error) naming `what` when the driver refuses.
void encode_bf16_tile_map_2d(void* out, const void* base, uint64_t cols, uint64_t rows, uint64_t row_stride_bytes,
                             uint32_t box_cols, uint32_t box_rows, const char* what);

}  // namespace ktune::internal
