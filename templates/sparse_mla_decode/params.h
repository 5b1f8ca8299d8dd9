// sparse_mla_decode kernel parameters: one POD struct passed by value to both entry points. Included by the
// host spec (C++17) and the device template (NVRTC), so it uses builtin types only.
//
// Tensor layouts (row-major; strides in elements):
//   q        [num_tokens, num_heads, kv_lora_rank + rope_dim] bf16 (latent first, then rope); row (token t,
//            head h) at t * q_stride_token + h * q_stride_head, the row contiguous (0 strides: dense)
//   kv_cache fp8_ds_mla: [num_pages, page_size, row] bytes, row = kv_lora_rank e4m3 (tiles of 128 values)
//            + kv_lora_rank/128 fp32 scales (one per tile) + rope_dim bf16  (656 bytes for 512 + 64)
//            bf16:       [num_pages, page_size, kv_lora_rank + rope_dim] bf16
//            One latent KV head (MQA). A physical slot page * page_size + offset is a row index.
//   indices  [num_tokens, topk] int32 physical slots; -1 = skip (checked kernels report any other slot outside
//            [0, num_slots) and skip it; unchecked kernels skip every negative slot and trust the rest)
//   sinks    [num_heads] fp32 logits (natural-log units, denominator only) or null
//   out      [num_tokens, num_heads, kv_lora_rank] bf16
//   lse      [num_tokens, num_heads] fp32 natural-log LSE of the scaled logits (sink included), or null
//   workspace split partials: O [num_tokens, num_heads, num_splits, kv_lora_rank] fp32, then (max, sum) pairs
//            [num_tokens, num_heads, num_splits, 2]; null when num_splits == 1
#pragma once

#include "common/checked.h"

namespace ktune_mla {

struct Params {
  const void* q;
  const void* kv_cache;
  const int* indices;
  const float* sinks;      // null => no sinks
  void* out;
  float* lse;              // null => not written
  float* workspace;        // split partials (num_splits > 1)
  int num_tokens;
  int num_splits;          // gridDim.y
  long long num_slots;     // num_pages * page_size (checked kernels: valid slots are [0, num_slots))
  float softmax_scale;     // logits = softmax_scale * (q . k)
  ktune_common::DeviceReport* report;  // checked kernels (Spec::kChecked) record bad indices here; else unused
  long long q_stride_token, q_stride_head;  // elements; 0 => dense (num_heads * row, row)
};

}  // namespace ktune_mla
