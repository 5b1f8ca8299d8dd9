/* ktune C API: opaque handles, status codes, and ktune_last_error() for the message of the last failure on
 * the calling thread. Every function returns KTUNE_OK (0) on success. Thread-safe. */
#ifndef KTUNE_H_
#define KTUNE_H_

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

/* Makes device `ordinal`'s primary context current on this thread. */
KTUNE_C_API ktune_status ktune_use_device(int ordinal);

#ifdef __cplusplus
}
#endif

#endif /* KTUNE_H_ */
