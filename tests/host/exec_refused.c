/* LD_PRELOAD shim for tests: with KTUNE_TEST_REFUSE_EXEC set, making memory executable fails with EACCES, as
 * under a W^X policy (SELinux deny_execmem, PaX): the host JIT then cannot run any object, through no fault of
 * the object. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

int mprotect(void* addr, size_t len, int prot) {
  static int (*next)(void*, size_t, int) = NULL;
  if (!next) next = (int (*)(void*, size_t, int))dlsym(RTLD_NEXT, "mprotect");
  if ((prot & PROT_EXEC) && getenv("KTUNE_TEST_REFUSE_EXEC")) {
    errno = EACCES;
    return -1;
  }
  return next(addr, len, prot);
}
