/* ktune C API: opaque handles, status codes, and ktune_last_error() for the message of the last failure on
 * the calling thread. Every function returns KTUNE_OK (0) on success. Thread-safe. */
#ifndef KTUNE_H_
#define KTUNE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KTUNE_C_API __attribute__((visibility("default")))

typedef enum ktune_status {
  KTUNE_OK = 0,
  KTUNE_ERROR_INVALID_ARGUMENT = 1,
  KTUNE_ERROR_NOT_FOUND = 2,
  KTUNE_ERROR_COMPILE = 3,
  KTUNE_ERROR_CUDA = 4,
  KTUNE_ERROR_CACHE = 5,
  KTUNE_ERROR_JIT_DISABLED = 6,
  KTUNE_ERROR_NO_DRIVER = 7,
  KTUNE_ERROR_NO_COMPILER = 8,
  KTUNE_ERROR_UNSUPPORTED = 9,
  KTUNE_ERROR_INTERNAL = 10
} ktune_status;

typedef struct ktune_runtime ktune_runtime;

typedef struct ktune_runtime_options {
  const char* cache_path; /* NULL => $KTUNE_CACHE or ~/.cache/ktune/ktune.db */
  int read_only;          /* nonzero => never write to a cache layer */
  int allow_jit;          /* zero => a cache miss is KTUNE_ERROR_JIT_DISABLED */
} ktune_runtime_options;

typedef struct ktune_stats {
  int64_t memory_hits, cache_hits, misses, compiles, compile_failures, loads, damaged_skipped, tuning_misses;
  double compile_ms, load_ms;
} ktune_stats;

/* Message of the last failed call on this thread ("" if none). Valid until the next ktune call on it. */
KTUNE_C_API const char* ktune_last_error(void);
KTUNE_C_API const char* ktune_version(void);
KTUNE_C_API const char* ktune_status_name(ktune_status status);

/* Fills defaults from the environment (KTUNE_CACHE, KTUNE_CACHE_READONLY, KTUNE_JIT). */
KTUNE_C_API void ktune_runtime_options_default(ktune_runtime_options* options);
/* options may be NULL (environment defaults). */
KTUNE_C_API ktune_status ktune_runtime_create(const ktune_runtime_options* options, ktune_runtime** out);
KTUNE_C_API void ktune_runtime_destroy(ktune_runtime* runtime);
KTUNE_C_API ktune_status ktune_runtime_stats(const ktune_runtime* runtime, ktune_stats* out);

/* Compiles (or finds in the cache) family/problem/config for arch ("sm_90a"). config_key NULL => default.
 * Needs no GPU. *compiled (may be NULL) is set to 1 if a compile happened. */
KTUNE_C_API ktune_status ktune_compile(ktune_runtime* runtime, const char* family, const char* problem_key,
                                       const char* config_key, const char* arch, int* compiled);

/* xqa_decode (paged decode attention). The problem is its readable key, e.g.
 * "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none" (see `ktune cache ls`, docs/xqa_decode.md); the fields below
 * mirror ktune::XqaDecodeArgs (runtime/include/ktune/xqa_decode.hpp): device pointers and run-time scalars.
 * Start from ktune_xqa_args_default(). */
typedef struct ktune_xqa_args {
  const void* q;
  const void* kv_cache;
  const int32_t* block_tables;
  const int32_t* seq_lens;
  const int32_t* q_cu_seq_lens; /* NULL: uniform form */
  const uint16_t* mask;         /* explicit draft mask or NULL */
  const float* sinks;           /* per-q-head sink logits or NULL */
  void* out;
  float* lse;                   /* NULL unless the problem writes LSE */
  void* workspace;
  size_t workspace_bytes;
  int batch, num_tokens, q_len_per_req, max_pages_per_req;
  int64_t num_pages;
  int max_seq_len;
  float softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap;
  int window_left;
  const char* config; /* NULL: tuned or default */
  int num_splits;     /* 0: planned */
} ktune_xqa_args;

KTUNE_C_API void ktune_xqa_args_default(ktune_xqa_args* args);
KTUNE_C_API ktune_status ktune_xqa_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key, int batch,
                                                          int max_seq_len, size_t* bytes);
/* Enqueues on `stream` (a CUstream; NULL = legacy default stream). No sync, no allocation, graph-capturable. */
KTUNE_C_API ktune_status ktune_xqa_decode(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* args,
                                          void* stream);

/* Makes device `ordinal`'s primary context current on this thread. */
KTUNE_C_API ktune_status ktune_use_device(int ordinal);

#ifdef __cplusplus
}
#endif

#endif /* KTUNE_H_ */
