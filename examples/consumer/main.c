/* The C API from C: create a runtime on a cache, compile one kernel (with its problem's shared module), print
 * the counters. */
#include <stdio.h>

#include "ktune/ktune.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = argv[1];
  ktune_runtime* rt = NULL;
  if (ktune_runtime_create(&o, &rt) != KTUNE_OK) {
    fprintf(stderr, "%s\n", ktune_last_error());
    return 1;
  }
  int compiled = 0;
  ktune_status st = ktune_compile(rt, "xqa_decode", "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", NULL, "sm_90a", &compiled);
  if (st != KTUNE_OK) {
    fprintf(stderr, "%s: %s\n", ktune_status_name(st), ktune_last_error());
    return 1;
  }
  ktune_stats s;
  ktune_runtime_stats(rt, &s);
  printf("compiled=%d compiles=%lld cache_hits=%lld\n", compiled, (long long)s.compiles, (long long)s.cache_hits);
  ktune_runtime_destroy(rt);
  return 0;
}
