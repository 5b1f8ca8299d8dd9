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

/* ktune_runtime_options, ktune_stats, ktune_warmup_options and ktune_warmup_result have fixed layouts: no
 * version of the library adds a field to them, so a caller built against any header version reads and writes
 * exactly what the library does. What a later version adds comes through a struct that begins with struct_size
 * (the argument structs, ktune_warmup_request) or through a new call, never through a longer one of these. */
typedef struct ktune_runtime_options {
  const char* cache_path; /* NULL => $KTUNE_CACHE, else $XDG_CACHE_HOME/ktune/ktune.db, else ~/.cache/ktune/ktune.db */
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

/* Fills defaults from the environment (KTUNE_CACHE, KTUNE_CACHE_READONLY, KTUNE_JIT). The cache_path it sets
 * points to storage of the library that lives as long as the process (any thread may use the options). */
KTUNE_C_API void ktune_runtime_options_default(ktune_runtime_options* options);
/* options may be NULL (environment defaults). */
KTUNE_C_API ktune_status ktune_runtime_create(const ktune_runtime_options* options, ktune_runtime** out);
KTUNE_C_API void ktune_runtime_destroy(ktune_runtime* runtime);
KTUNE_C_API ktune_status ktune_runtime_stats(const ktune_runtime* runtime, ktune_stats* out);

/* Compiles (or finds in the cache) family/problem/config for arch ("sm_90a"), and the problem's shared module
 * where the family has one (its split-KV combine and helpers). config_key NULL => default. Needs no GPU.
 * *compiled (may be NULL) is set to 1 if a compile happened. A binary compiled but not stored (no writable
 * cache layer, a failed write) is KTUNE_ERROR_CACHE naming why: this process keeps it in memory, and *compiled
 * is set, but the next process would compile it again. */
KTUNE_C_API ktune_status ktune_compile(ktune_runtime* runtime, const char* family, const char* problem_key,
                                       const char* config_key, const char* arch, int* compiled);

/* xqa_decode (paged decode attention). The problem is its readable key, e.g.
 * "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none" (see `ktune cache ls`, docs/xqa_decode.md); the fields below
 * mirror ktune::XqaDecodeArgs (runtime/include/ktune/xqa_decode.hpp): device pointers and run-time scalars.
 * Start from ktune_xqa_args_default(). */
typedef struct ktune_xqa_args {
  uint32_t struct_size; /* set by ktune_xqa_args_default (every argument struct begins with these two fields) */
  uint32_t family_id;   /* ktune_family_id("xqa_decode"), set by ktune_xqa_args_default */
  const void* q;
  const void* kv_cache;
  const int32_t* block_tables;
  const int32_t* seq_lens;
  const int32_t* q_cu_seq_lens; /* NULL: uniform form */
  const uint16_t* mask;         /* explicit draft mask (ceil(max_q_len/32) 32-bit words a row) or NULL */
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
  /* Strided q / out, in elements (0: dense): row (token t, head h) at t * stride_token + h * stride_head. */
  int64_t q_stride_token, q_stride_head, out_stride_token, out_stride_head;
  /* K and V as a pair (kv_cache NULL): page i at k_cache / v_cache + i * kv_page_stride elements (0: dense). */
  const void* k_cache;
  const void* v_cache;
  int64_t kv_page_stride;
  /* Device-held fp32 scales or NULL, multiplied with the float forms (q: FP8 Q only; o: FP8 output only). */
  const float* q_scale_ptr;
  const float* k_scale_ptr;
  const float* v_scale_ptr;
  const float* o_scale_ptr;
} ktune_xqa_args;

KTUNE_C_API ktune_status ktune_xqa_args_init(ktune_xqa_args* args, size_t struct_size);
#define ktune_xqa_args_default(args) ktune_xqa_args_init((args), sizeof *(args))
KTUNE_C_API ktune_status ktune_xqa_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key, int batch,
                                                          int max_seq_len, size_t* bytes);
/* Enqueues on `stream` (a CUstream; NULL = legacy default stream). No sync, no allocation, graph-capturable. */
KTUNE_C_API ktune_status ktune_xqa_decode(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* args,
                                          void* stream);

/* ---- Prepared ops (every family; the engine hot path) ------------------------------------------------------
 * ktune_op_prepare validates a problem once (its key, or JSON fields as in ktune_problem_key) and keeps what every
 * call needs; ktune_op_run then checks only the run-time arguments and launches on `stream`: no string is parsed,
 * no cache row read, no compiler run (after the first call of a shape, which loads its module). `args` is the
 * family's argument struct (ktune_xqa_args, ktune_sparse_mla_args, ktune_mxfp4_args) started from its
 * *_args_default, which sets struct_size and family_id: a struct of another family is KTUNE_ERROR_INVALID_ARGUMENT,
 * never misread. An op is thread-safe and must be freed before its runtime is destroyed. On a thread whose
 * device is KTUNE_HOST_DEVICE, ktune_op_run is the host call.
 *
 * Structs that begin with struct_size (the argument structs, ktune_xqa_mask_args, ktune_warmup_request) grow at
 * their end only, and a new field means "as before" when zero. Their *_default(s) is a macro for
 * *_init(s, sizeof *s): the library fills the defaults of a struct of the CALLER's size and stamps that size, so
 * a caller built against an older header gets its shorter struct filled (nothing written past it) and read with
 * the missing tail zero, and a caller built against a newer header gets its unknown fields zeroed; a call taking
 * the struct refuses a set field that this library does not know (KTUNE_ERROR_INVALID_ARGUMENT naming the byte)
 * rather than ignore it, and a size that is neither this library's, an older form's nor a longer struct of at
 * most 4096 bytes (in whole 8-byte units: a struct grows by 8 bytes at a time, a narrower field with a reserved
 * one beside it, so that no padding byte can be left unset). Each begins with {struct_size, family_id}, and the
 * family_id is checked before any byte past them is read. Bindings without sizeof call *_init with their
 * struct's size. Only callers built against a header of this library's SONAME can load it (libktune.so.0.2:
 * ktune 0.2), so "older" means an older 0.2 header. */
typedef struct ktune_op ktune_op;
KTUNE_C_API ktune_status ktune_op_prepare(ktune_runtime* runtime, const char* family, const char* problem,
                                          ktune_op** out);
KTUNE_C_API ktune_status ktune_op_run(const ktune_op* op, const void* args, void* stream);
/* ktune_ensure_device(device) then ktune_op_run, in one call: for bindings that launch on a framework's thread
 * and stream (the Python package), one crossing per call instead of two. */
KTUNE_C_API ktune_status ktune_op_run_on_device(const ktune_op* op, const void* args, void* stream, int device);
/* What ktune_op_run(op, args) would launch on a GPU, as JSON (the family's plan fields, e.g. {"config","source",
 * "num_splits","workspace_bytes"}); reads only the shape fields of args (docs/ops.md). On a thread whose device is
 * KTUNE_HOST_DEVICE it is KTUNE_ERROR_UNSUPPORTED: the host call plans per call (the family's *_host_plan). */
KTUNE_C_API ktune_status ktune_op_plan(const ktune_op* op, const void* args, const char** plan_json);
/* Programmatic dependent launch for the op's launches from now on (enable nonzero; off by default): on sm_90+ a
 * launch may start while the kernel before it on the stream finishes, its kernels waiting (griddepcontrol.wait)
 * before they touch memory, so results are unchanged (docs/ops.md). KTUNE_ERROR_UNSUPPORTED for a family whose
 * kernels do not wait. */
KTUNE_C_API ktune_status ktune_op_set_pdl(ktune_op* op, int enable);
KTUNE_C_API void ktune_op_free(ktune_op* op);
/* The family_id of a family's argument struct (a hash of its name; 0 for NULL). */
KTUNE_C_API uint32_t ktune_family_id(const char* family);

/* Makes device `ordinal`'s primary context current on this thread. KTUNE_HOST_DEVICE (-1) makes the host CPU
 * this thread's device: ktune_xqa_decode and the other family launches then take HOST pointers and run the
 * host variants (LLVM host backend), synchronously; `stream` is ignored (ktune::use_device, runtime.hpp). */
#define KTUNE_HOST_DEVICE (-1)
KTUNE_C_API ktune_status ktune_use_device(int ordinal);

/* ---- xqa_decode engine helpers (docs/engines.md; C++: ktune/xqa_helpers.hpp) ------------------------------
 * Through a prepared xqa_decode op (ktune_op_prepare(rt, "xqa_decode", ...)): the kernels are entry points of
 * the op's module, so a warmed-up cache serves them with no compile. They enqueue on `stream`, never allocate,
 * sync or read device data on the host: graph-capturable once the op's module is loaded. On a thread whose
 * device is KTUNE_HOST_DEVICE they take HOST pointers and run synchronously (and reject bad index entries).
 *
 * Mask words: per query row W = ceil(max_q_len / 32) uint32 words (ktune_xqa_mask_words) stored as uint16 pairs,
 * low half first; bit j of word w set => draft key 32w + j visible. */
typedef enum ktune_xqa_mask_source {
  KTUNE_XQA_MASK_FROM_BOOL = 0, /* bool_mask[row][j] != 0 => key j visible */
  KTUNE_XQA_MASK_CAUSAL = 1,    /* key j visible to query i iff j <= i */
  KTUNE_XQA_MASK_FULL = 2       /* every key of the request visible */
} ktune_xqa_mask_source;

typedef struct ktune_xqa_mask_args {
  uint32_t struct_size;           /* set by ktune_xqa_mask_args_default */
  uint32_t family_id;             /* ktune_family_id("xqa_decode/mask"), set by ktune_xqa_mask_args_default */
  const uint8_t* bool_mask;       /* [rows, q_len] 0 / nonzero (KTUNE_XQA_MASK_FROM_BOOL), else NULL */
  const int32_t* q_cu_seq_lens;   /* [batch + 1] ragged form; NULL = uniform (q_len rows per request) */
  uint16_t* out;                  /* [rows, W * 2] mask words, 4-byte aligned */
  int source;                     /* ktune_xqa_mask_source */
  int batch;                      /* requests, 1..65535 */
  int q_len;                      /* columns of bool_mask, 1..max_q_len; uniform: query tokens per request */
  int rows;                       /* uniform: batch * q_len; ragged: 0..batch * max_q_len (0: nothing done) */
} ktune_xqa_mask_args;

KTUNE_C_API ktune_status ktune_xqa_mask_args_init(ktune_xqa_mask_args* args, size_t struct_size);
#define ktune_xqa_mask_args_default(args) ktune_xqa_mask_args_init((args), sizeof *(args))
/* W of the op's problem. */
KTUNE_C_API ktune_status ktune_xqa_mask_words(const ktune_op* op, int* words);
/* Writes the W words of every query row: row start_b + i for query i of request b (uniform start_b = b * q_len,
 * ragged q_cu_seq_lens[b]); a row of a request of n tokens has bits only for keys < min(n, q_len). Ragged rows
 * past q_cu_seq_lens[batch] are not written. The op's problem mask must be explicit. */
KTUNE_C_API ktune_status ktune_xqa_pack_mask(const ktune_op* op, const ktune_xqa_mask_args* args, void* stream);
/* q_cu_seq_lens[batch + 1] (int32) = exclusive prefix sum of q_lens[batch] (entries in [0, max_q_len]), one
 * launch for any batch in 0..2^24. */
KTUNE_C_API ktune_status ktune_xqa_q_cu_seq_lens(const ktune_op* op, const int32_t* q_lens, int batch,
                                                 int32_t* q_cu_seq_lens, void* stream);

/* ---- Language bindings (the Python package in python/, docs/python.md) ----------------------------------
 * Strings returned through `const char**` belong to ktune and stay valid until the next call of the same
 * function on the same thread. */

/* Canonical problem key of `family` from either a problem key ("d128.h32.kv8...") or a JSON object of problem
 * fields ('{"head_dim":128,...}', docs/presets.md). Errors name the field. */
KTUNE_C_API ktune_status ktune_problem_key(const char* family, const char* key_or_json, const char** key);
/* Comma-separated names: the kernel families of this build / the embedded presets (with -tpN variants). */
KTUNE_C_API ktune_status ktune_family_names(const char** names);
KTUNE_C_API ktune_status ktune_preset_names(const char** names);

/* Makes device `ordinal`'s primary context current on this thread unless it already is: after the first call
 * per device, one cuCtxGetCurrent (for bindings that launch on a framework's thread, e.g. PyTorch's).
 * KTUNE_HOST_DEVICE makes the host CPU the thread's device, as ktune_use_device does, and a GPU ordinal after it
 * makes that GPU the device again. */
KTUNE_C_API ktune_status ktune_ensure_device(int ordinal);

/* ktune_xqa_decode_workspace_bytes for a forced config (NULL: tuned/default) and split count (0: planned). */
KTUNE_C_API ktune_status ktune_xqa_decode_workspace_bytes_ex(ktune_runtime* runtime, const char* problem_key,
                                                             int batch, int max_seq_len, const char* config,
                                                             int num_splits, size_t* bytes);
/* xqa_decode on the host CPU (LLVM host backend, libktune_host.so; docs/host_backend.md): the same problem and
 * arguments with HOST pointers; synchronous; workspace may be NULL; `config` is a host config ("t64.v16.u4").
 * A block-table entry outside [0, num_pages), a seq_len outside [0, max_seq_len] or a bad q_cu_seq_lens entry
 * is KTUNE_ERROR_INVALID_ARGUMENT naming the argument, request and value (nothing is written).
 * threads <= 0: every hardware thread. Without the plugin: KTUNE_ERROR_NO_COMPILER naming where it looked. */
KTUNE_C_API ktune_status ktune_xqa_decode_host(ktune_runtime* runtime, const char* problem_key,
                                               const ktune_xqa_args* args, int threads);
/* What a call would run, as JSON {"config","source","num_splits","workspace_bytes"[,"threads"]}.
 * host != 0: the host plan (threads as above); else the GPU plan (needs a current context). */
KTUNE_C_API ktune_status ktune_xqa_decode_plan(ktune_runtime* runtime, const char* problem_key, int batch,
                                               int max_seq_len, const char* config, int num_splits, int host,
                                               int threads, const char** plan_json);

/* Warm-up of a model preset (what `ktune warmup` does), in process. */
typedef struct ktune_warmup_options {
  const char* preset;   /* required: embedded name ("llama-3.1-8b", "NAME-tpN") or a preset JSON file */
  const char* arches;   /* comma-separated ("sm_90a,host"); NULL/"": the current GPU's arch, or without a current
                           context every default arch (+ host when the plugin loads) */
  const char* kv_dtype; /* NULL: the preset's; "bf16" | "fp16" | "fp8" */
  int max_batch;        /* 0: the preset's largest batch bucket */
  int max_seq_len;      /* 0: the preset's largest seq_len bucket */
  int spec_tokens;      /* -1: the preset's */
  int all_candidates;   /* nonzero (default): compile every candidate config, not only the default */
  double budget_s;      /* 0: no budget; else stop starting new tuning keys after this many seconds */
  int jobs;             /* parallel compiles, 0: cores */
  int device;           /* -1 (default): whatever context is current; >= 0: that GPU's primary context, for the
                           warmup only (the caller's context, or none, is current again when it returns) */
  /* NULL or called as work completes: what = "compile" (done/total compile jobs) or the tuning key just
   * finished (done/total keys); may be called from compile worker threads, never concurrently. */
  void (*progress)(const char* what, size_t done, size_t total, void* user);
  void* progress_user;
} ktune_warmup_options;

typedef struct ktune_warmup_result {
  int keys, tuned, already_done, skipped, failed;
  int compile_jobs, compiled, cache_hits, compile_failed;
  double compile_wall_ms, tune_ms, wall_ms;
  int budget_exhausted;
  /* [{"arch","family","key","status","winner","ms","device"}, ...] (device: the GPU ordinal or host worker
   * that tuned it, -1: this process); valid until the next ktune_warmup on this thread */
  const char* items_json;
} ktune_warmup_result;

KTUNE_C_API void ktune_warmup_options_default(ktune_warmup_options* options);
/* Returns KTUNE_OK when the warmup ran, even if some keys failed: check result->failed / compile_failed and
 * items_json (compile_failed counts the binaries compiled but not stored in the cache, too). The runtime's allow_jit must be set (a warmup compiles), and its cache must have a writable layer
 * (else KTUNE_ERROR_CACHE naming the reason: nothing it tuned could be stored). */
KTUNE_C_API ktune_status ktune_warmup(ktune_runtime* runtime, const ktune_warmup_options* options,
                                      ktune_warmup_result* result);
/* ktune_warmup with the tuning spread over worker processes (ktune_warmup_options keeps its layout, so callers
 * built against an older header stay compatible). devices: NULL/"": tune in this process; "all" or "0,1,...":
 * one worker process per listed GPU (the ktune CLI, found as $KTUNE_CLI or next to libktune.so) tunes the keys
 * of its arch, dealt out from a shared queue (docs/cli.md, "Warmup on several GPUs"); with options->device >= 0
 * it is KTUNE_ERROR_INVALID_ARGUMENT. host_workers > 0: that many host CPU worker processes tune the keys of
 * arch "host" (options->arches must name host). progress then names the worker: what = "[dev 1] 12/71 <key>".
 * ktune_warmup(r, o, res) is ktune_warmup_workers(r, o, NULL, 0, res). */
KTUNE_C_API ktune_status ktune_warmup_workers(ktune_runtime* runtime, const ktune_warmup_options* options,
                                              const char* devices, int host_workers, ktune_warmup_result* result);
/* The whole warmup request in a struct that grows at its end (struct_size first, set by
 * ktune_warmup_request_default; a size this library does not know is KTUNE_ERROR_INVALID_ARGUMENT, as for the
 * argument structs). ktune_warmup_workers(r, o, d, h, res) is ktune_warmup_run with {options o, devices d,
 * host_workers h, retune 0}. */
typedef struct ktune_warmup_request {
  uint32_t struct_size;                /* set by ktune_warmup_request_default */
  uint32_t family_id;                  /* ktune_family_id("warmup_request"), set by ktune_warmup_request_default */
  const ktune_warmup_options* options; /* required */
  const char* devices;                 /* as ktune_warmup_workers' devices (NULL: tune in this process) */
  int host_workers;                    /* as ktune_warmup_workers' host_workers (0: none) */
  int retune;                          /* nonzero: measure again the keys that already have this ktune version's
                                          tuning row too, replacing it (`ktune warmup --retune`); 0 (default):
                                          those keys count as already_done */
} ktune_warmup_request;
KTUNE_C_API ktune_status ktune_warmup_request_init(ktune_warmup_request* request, size_t struct_size);
#define ktune_warmup_request_default(request) ktune_warmup_request_init((request), sizeof *(request))
KTUNE_C_API ktune_status ktune_warmup_run(ktune_runtime* runtime, const ktune_warmup_request* request,
                                          ktune_warmup_result* result);
/* Inverse of ktune_mxfp4_prepack_host (tests, tools): packed (host) -> canonical w_packed [E, n, k/2] (low
 * nibble = even k) + w_scale [E, n, k/32] (host). Same size checks. */
KTUNE_C_API ktune_status ktune_mxfp4_unpack_host(const uint8_t* packed_weight, const uint8_t* packed_scales, int n,
                                                 int k, int num_experts, uint8_t* w_packed, uint8_t* w_scale);
/* ---- end of language bindings section ---------------------------------------------------------------- */

/* ---- mxfp4_gemm (W4A16 GEMM with OCP MXFP4 weights, docs/mxfp4_gemm.md) ----------------------
 * C[m, n] = A[m, k] * W[n, k]^T (+ bias[n]); the problem is its key ("n8192.k8192.bf16-bf16",
 * "n5760.k2880.e128.top4.bf16-bf16") or JSON fields through ktune_problem_key. Weights must be prepacked
 * (ktune_mxfp4_prepack_host or `ktune prepack`) and carry layout_version == ktune_mxfp4_layout_version().
 * Dense: ktune_mxfp4_gemm; grouped MoE (tokens sorted by expert, expert_offsets [E+1] on the device, one
 * launch for all experts): ktune_mxfp4_grouped_gemm. Both enqueue on `stream`, never read device memory on the
 * host, allocate or sync: graph-capturable. Start args from ktune_mxfp4_args_default(). */
typedef struct ktune_mxfp4_args {
  uint32_t struct_size;           /* set by ktune_mxfp4_args_default */
  uint32_t family_id;             /* ktune_family_id("mxfp4_gemm") */
  const void* a;                  /* [m, k] a dtype */
  int lda;                        /* 0: k */
  int layout_version;             /* of the packed weight */
  const void* weight_packed;      /* device, ktune_mxfp4_packed_bytes(..., weight) */
  const void* weight_scales;      /* device, ktune_mxfp4_packed_bytes(..., scales) */
  const void* bias;               /* [num_experts, n] out dtype or NULL */
  void* c;                        /* [m, n] out dtype */
  int ldc;                        /* 0: n */
  int m;                          /* rows (grouped: all experts' rows) */
  const int32_t* expert_offsets;  /* grouped only: [num_experts + 1] on the device */
  const char* config;             /* NULL: tuned or default */
} ktune_mxfp4_args;

KTUNE_C_API ktune_status ktune_mxfp4_args_init(ktune_mxfp4_args* args, size_t struct_size);
#define ktune_mxfp4_args_default(args) ktune_mxfp4_args_init((args), sizeof *(args))
KTUNE_C_API int ktune_mxfp4_layout_version(void);
/* Bytes of the packed weight (which = 0) or packed scales (which = 1) for n x k x num_experts. */
KTUNE_C_API ktune_status ktune_mxfp4_packed_bytes(int n, int k, int num_experts, int which, size_t* bytes);
/* Host reorder: canonical w_packed [E, n, k/2] + w_scale [E, n, k/32] (host memory) -> packed (host memory). */
KTUNE_C_API ktune_status ktune_mxfp4_prepack_host(const uint8_t* w_packed, const uint8_t* w_scale, int n, int k,
                                                  int num_experts, uint8_t* out_weight, uint8_t* out_scales);
KTUNE_C_API ktune_status ktune_mxfp4_gemm(ktune_runtime* runtime, const char* problem_key,
                                          const ktune_mxfp4_args* args, void* stream);
KTUNE_C_API ktune_status ktune_mxfp4_grouped_gemm(ktune_runtime* runtime, const char* problem_key,
                                                  const ktune_mxfp4_args* args, void* stream);
/* mxfp4_gemm on the host CPU (LLVM host backend, libktune_host.so; docs/host_backend.md): the same problem and
 * arguments with HOST pointers (the same prepacked weight; grouped expert_offsets in host memory, which must be
 * non-decreasing in [0, m], else KTUNE_ERROR_INVALID_ARGUMENT naming the entry); synchronous;
 * `config` is a host config ("bm4.tn2.kt4"). threads <= 0: every hardware thread. Without the plugin:
 * KTUNE_ERROR_NO_COMPILER naming where it looked. */
KTUNE_C_API ktune_status ktune_mxfp4_gemm_host(ktune_runtime* runtime, const char* problem_key,
                                               const ktune_mxfp4_args* args, int threads);
KTUNE_C_API ktune_status ktune_mxfp4_grouped_gemm_host(ktune_runtime* runtime, const char* problem_key,
                                                       const ktune_mxfp4_args* args, int threads);
/* ---- end of mxfp4_gemm section ---- */

/* ---- sparse_mla_decode (DeepSeek V3.2 sparse MLA decode, docs/sparse_mla_decode.md) -------------
 * The problem is its key ("h128.r512.d64.k2048.p64.bf16-fp8ds.q1", or JSON fields through ktune_problem_key);
 * the fields mirror ktune::SparseMlaDecodeArgs (runtime/include/ktune/sparse_mla_decode.hpp). Enqueues on
 * `stream`; never reads device memory on the host, allocates or syncs: graph-capturable. Start args from
 * ktune_sparse_mla_args_default(). */
typedef struct ktune_sparse_mla_args {
  uint32_t struct_size;     /* set by ktune_sparse_mla_args_default */
  uint32_t family_id;       /* ktune_family_id("sparse_mla_decode") */
  const void* q;            /* [num_tokens, num_heads, kv_lora_rank + rope_dim] bf16, 16-byte aligned */
  const void* kv_cache;     /* [num_pages, page_size, row bytes] fp8_ds_mla or bf16, 16-byte aligned */
  const int32_t* indices;   /* [num_tokens, topk] slots page * page_size + offset, -1 = skip */
  const float* sinks;       /* [num_heads] sink logits or NULL */
  void* out;                /* [num_tokens, num_heads, kv_lora_rank] bf16 */
  float* lse;               /* [num_tokens, num_heads] fp32 or NULL */
  void* workspace;          /* split partials, >= ktune_sparse_mla_decode_workspace_bytes() */
  size_t workspace_bytes;
  int num_tokens;           /* 0..65535 (0: nothing to do) */
  int64_t num_pages;
  float softmax_scale;
  const char* config;       /* NULL: tuned or default */
  int num_splits;           /* 0: planned */
  /* Strided q, in elements (0: dense; else multiples of 8): row (token t, head h) at t * q_stride_token +
   * h * q_stride_head. */
  int64_t q_stride_token, q_stride_head;
} ktune_sparse_mla_args;

KTUNE_C_API ktune_status ktune_sparse_mla_args_init(ktune_sparse_mla_args* args, size_t struct_size);
#define ktune_sparse_mla_args_default(args) ktune_sparse_mla_args_init((args), sizeof *(args))
/* Workspace bytes for num_tokens with a forced config (NULL: tuned/default) and split count (0: planned). */
KTUNE_C_API ktune_status ktune_sparse_mla_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key,
                                                                 int num_tokens, const char* config, int num_splits,
                                                                 size_t* bytes);
/* What a call would run, as JSON {"config","source","num_splits","workspace_bytes"} (needs a current context
 * unless config and num_splits are both forced). */
KTUNE_C_API ktune_status ktune_sparse_mla_decode_plan(ktune_runtime* runtime, const char* problem_key, int num_tokens,
                                                      const char* config, int num_splits, const char** plan_json);
KTUNE_C_API ktune_status ktune_sparse_mla_decode(ktune_runtime* runtime, const char* problem_key,
                                                 const ktune_sparse_mla_args* args, void* stream);
/* sparse_mla_decode on the host CPU (LLVM host backend, libktune_host.so; docs/host_backend.md): the same
 * problem and arguments with HOST pointers; synchronous; workspace may be NULL; `config` is a host config
 * ("t32.g16.v16.u2"); an index that is neither -1 nor a cache slot is KTUNE_ERROR_INVALID_ARGUMENT naming the
 * token and entry (nothing is written). threads <= 0: every hardware thread. Without the plugin:
 * KTUNE_ERROR_NO_COMPILER naming where it looked. */
KTUNE_C_API ktune_status ktune_sparse_mla_decode_host(ktune_runtime* runtime, const char* problem_key,
                                                      const ktune_sparse_mla_args* args, int threads);
/* The host plan of a call, as JSON {"config","source","num_splits","workspace_bytes","threads"}. */
KTUNE_C_API ktune_status ktune_sparse_mla_decode_host_plan(ktune_runtime* runtime, const char* problem_key,
                                                           int num_tokens, const char* config, int num_splits,
                                                           int threads, const char** plan_json);
/* ---- end of sparse_mla_decode section ---- */

#ifdef __cplusplus
}
#endif

#endif /* KTUNE_H_ */
