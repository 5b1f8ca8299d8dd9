/* A C program that loads libktune with dlopen(RTLD_LOCAL), as a plugin host does, and is not linked with libm:
 * a host kernel must still link (its calls into libm and libc resolve without libktune's symbols, or libm's, in
 * the process's global scope). Runs one small xqa_decode (d64.h4.kv2.p32.hnd.bf16-bf16-bf16.q1.none) on the host
 * backend, with the cache KTUNE_CACHE names or a fresh one.
 * usage: ktune_dlopen_local LIBKTUNE_PATH    exit 0 ok, 1 failure, 77 skipped (no host backend) */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktune/ktune.h"

typedef void (*options_default_fn)(ktune_runtime_options*);
typedef ktune_status (*create_fn)(const ktune_runtime_options*, ktune_runtime**);
typedef void (*destroy_fn)(ktune_runtime*);
typedef ktune_status (*args_init_fn)(ktune_xqa_args*, size_t);
typedef ktune_status (*host_fn)(ktune_runtime*, const char*, const ktune_xqa_args*, int);
typedef const char* (*last_error_fn)(void);

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBKTUNE_PATH\n", argv[0]);
    return 1;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("FAIL: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  options_default_fn options_default = (options_default_fn)dlsym(lib, "ktune_runtime_options_default");
  create_fn create = (create_fn)dlsym(lib, "ktune_runtime_create");
  destroy_fn destroy = (destroy_fn)dlsym(lib, "ktune_runtime_destroy");
  args_init_fn args_init = (args_init_fn)dlsym(lib, "ktune_xqa_args_init");
  host_fn run = (host_fn)dlsym(lib, "ktune_xqa_decode_host");
  last_error_fn last_error = (last_error_fn)dlsym(lib, "ktune_last_error");
  if (!options_default || !create || !destroy || !args_init || !run || !last_error) {
    printf("FAIL: a C API symbol is missing from %s\n", argv[1]);
    return 1;
  }
  const int fresh = getenv("KTUNE_CACHE") == NULL;  /* else the cache KTUNE_CACHE names */
  const char* tmp = getenv("TMPDIR");
  char dir[4096];
  char cache[sizeof dir + 16];
  snprintf(dir, sizeof dir, "%s/ktune-dlopen-local-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (fresh && !mkdtemp(dir)) {
    printf("FAIL: mkdtemp in %s\n", dir);
    return 1;
  }
  snprintf(cache, sizeof cache, "%s/k.db", dir);
  ktune_runtime_options o;
  options_default(&o);
  if (fresh) o.cache_path = cache;
  ktune_runtime* rt = NULL;
  if (create(&o, &rt) != KTUNE_OK) {
    printf("FAIL: ktune_runtime_create: %s\n", last_error());
    return 1;
  }
  enum { B = 2, D = 64, HQ = 4, HKV = 2, PAGE = 32, PAGES = 8, PER_REQ = 4 };
  uint16_t* q = malloc(sizeof(uint16_t) * B * HQ * D);
  uint16_t* out = malloc(sizeof(uint16_t) * B * HQ * D);
  uint16_t* kv = malloc(sizeof(uint16_t) * PAGES * 2 * HKV * PAGE * D);
  for (int i = 0; i < B * HQ * D; ++i) q[i] = (uint16_t)(0x3C00 + (i * 37) % 256);      /* bf16 in [2^-7, 2^-6) */
  for (int i = 0; i < PAGES * 2 * HKV * PAGE * D; ++i) kv[i] = (uint16_t)(0x3F00 + (i * 53) % 256);
  for (int i = 0; i < B * HQ * D; ++i) out[i] = 0xFFFF;                                  /* NaN: poisoned */
  int32_t block_tables[B * PER_REQ] = {0, 1, 2, 3, 4, 5, 6, 7};
  int32_t seq_lens[B] = {100, 70};
  ktune_xqa_args a;
  if (args_init(&a, sizeof a) != KTUNE_OK) {
    printf("FAIL: ktune_xqa_args_init: %s\n", last_error());
    return 1;
  }
  a.q = q;
  a.kv_cache = kv;
  a.block_tables = block_tables;
  a.seq_lens = seq_lens;
  a.out = out;
  a.batch = B;
  a.num_tokens = B;
  a.q_len_per_req = 1;
  a.max_pages_per_req = PER_REQ;
  a.num_pages = PAGES;
  a.max_seq_len = 100;
  a.softmax_scale = 0.125f;
  const ktune_status s = run(rt, "d64.h4.kv2.p32.hnd.bf16-bf16-bf16.q1.none", &a, 0);
  if (s == KTUNE_ERROR_NO_COMPILER) {
    const char* require = getenv("KTUNE_TEST_REQUIRE");
    printf("%s: no host backend: %s\n", require && strstr(require, "host") ? "FAIL" : "[host] skipped", last_error());
    return require && strstr(require, "host") ? 1 : 77;
  }
  if (s != KTUNE_OK) {
    printf("FAIL: ktune_xqa_decode_host under dlopen(RTLD_LOCAL): status %d: %s\n", (int)s, last_error());
    return 1;
  }
  for (int i = 0; i < B * HQ * D; ++i) {
    const uint16_t v = out[i];
    if ((v & 0x7F80) == 0x7F80) { /* inf or NaN: a row not written */
      printf("FAIL: out[%d] = 0x%04x is not finite\n", i, v);
      return 1;
    }
  }
  destroy(rt);
  if (fresh) { /* the fresh cache: its file, WAL, lock files and folder */
    static const char* const kSuffixes[] = {"", "-wal", "-shm", ".compile-lock", ".tune-lock"};
    for (size_t i = 0; i < sizeof kSuffixes / sizeof kSuffixes[0]; ++i) {
      char f[sizeof cache + 16];
      snprintf(f, sizeof f, "%s%s", cache, kSuffixes[i]);
      remove(f);
    }
    remove(dir);
  }
  printf("ok: a host kernel linked and ran with libktune loaded RTLD_LOCAL and no libm in the program\n");
  return 0;
}
