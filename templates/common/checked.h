// Device-side bounds checks ("checked build", docs/reliability.md). A kernel compiled with -DKTUNE_CHECKED=1
// validates every index it reads from caller memory (page numbers from block tables, top-k slot indices)
// before using it. A bad index is recorded here and the access is skipped, so the kernel reports instead of
// faulting; the host reads the record after the stream completes (Runtime::take_device_report). The record
// lives in pinned, mapped host memory, so reading it needs no copy and works inside CUDA graphs.
// Plain C++ and NVRTC: builtin types only.
#pragma once

#include "common/dtype.h"

namespace ktune_common {

// What a kernel found. code 0 = nothing; only the first fault of a launch sequence is kept.
enum CheckCode : unsigned {
  kCheckOk = 0,
  kCheckPageIndex = 1,    // a block-table entry outside [0, num_pages)
  kCheckTopkIndex = 2,    // a top-k slot outside [-1, num_pages * page_size)
  kCheckSeqLen = 3,       // a seq_len longer than a block-table row can map (limit = max_pages_per_req * page_size + 1)
  kCheckQueryOffset = 4,  // a q_cu_seq_lens entry outside [0, num_tokens] (limit = num_tokens + 1)
};

struct DeviceReport {
  unsigned code;     // CheckCode
  unsigned where;    // e.g. the request / token the index belongs to
  long long value;   // the bad index
  long long limit;   // the valid range was [0, limit)
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Records the first fault; later ones are dropped. Returns false so callers can write `if (!ok) skip`.
KT_DEV bool report_bad_index(DeviceReport* r, unsigned code, unsigned where, long long value, long long limit) {
  if (r != nullptr && atomicCAS(&r->code, 0u, code) == 0u) {
    r->where = where;
    r->value = value;
    r->limit = limit;
    __threadfence_system();
  }
  return false;
}
#endif

// True when `value` is a valid index in [0, limit); otherwise records it (device) and returns false.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
KT_DEV bool check_index(DeviceReport* r, unsigned code, unsigned where, long long value, long long limit) {
  return (value >= 0 && value < limit) ? true : report_bad_index(r, code, where, value, limit);
}
#endif

}  // namespace ktune_common
