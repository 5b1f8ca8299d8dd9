/* The C ABI between libktune.so and its optional host backend, libktune_host.so (LLVM 19: clang in process
 * -> O3 for the running CPU -> object file; ORC LLJIT loads objects and resolves symbols).
 *
 * libktune.so never links LLVM: it dlopen()s the plugin on the first host-target request and calls
 * ktune_host_plugin_v1(), which returns a table of function pointers. The table is versioned: a plugin built
 * for another ABI version is refused with a message naming both versions. Everything crossing the boundary is
 * C: pointers + sizes in, malloc'ed buffers out (released with free_buffer), int status codes (0 = ok).
 *
 * Thread safety: every entry may be called from any thread concurrently.
 */
#ifndef KTUNE_HOST_PLUGIN_H
#define KTUNE_HOST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KTUNE_HOST_PLUGIN_ABI_VERSION 1u
#define KTUNE_HOST_PLUGIN_ENTRY "ktune_host_plugin_v1"

/* One in-memory source file: `name` is its include name ("common/numerics.cuh"), `data` need not be
 * NUL-terminated. */
typedef struct ktune_host_file {
  const char* name;
  const char* data;
  size_t size;
} ktune_host_file;

typedef struct ktune_host_plugin_v1_t {
  uint32_t abi_version; /* KTUNE_HOST_PLUGIN_ABI_VERSION of the plugin */
  uint32_t struct_size; /* sizeof(ktune_host_plugin_v1_t) as the plugin was built */

  /* What the plugin compiles for, fixed for the process: "<triple>/<cpu>/<+feature,...>;llvm <version>", e.g.
   * "x86_64-pc-linux-gnu/znver3/+adx,+aes,+avx,+avx2,...;llvm 19.1.7". Part of every host binary key, so an
   * object compiled on another CPU (or by another LLVM) is a cache miss. Static storage. */
  const char* (*target_id)(void);
  const char* (*llvm_version)(void); /* "19.1.7" */
  const char* (*cpu_name)(void);     /* "znver3" */

  /* Compiles one C++ translation unit for the host CPU: clang in process, headers given only as in-memory
   * files (resolved as #include "name"; there is no include path on disk and no system header), optimized
   * with the O3 pipeline for the host triple, CPU and features, emitted as a relocatable object.
   * options: clang -cc1 options (e.g. "-std=c++17", "-DX=1"), applied after the plugin's own.
   * On success returns 0 and sets *object / *object_size (free_buffer); *log gets the diagnostics (maybe
   * empty; free_buffer). On failure returns non-zero, *object = NULL, *log says why. */
  int (*compile)(const ktune_host_file* source, const ktune_host_file* headers, size_t num_headers,
                 const char* const* options, size_t num_options, void** object, size_t* object_size,
                 char** log);

  /* Links an object produced by compile() into the process (its own JIT dylib: the same symbol names in
   * different objects never clash; undefined symbols resolve against the process and its libm and libc, e.g.
   * memcpy, log2f). `name` labels it in messages. Returns 0 and *handle; 2 and *error (free_buffer) when the
   * object itself is refused (not an object this LLVM can link); another non-zero value and *error when the
   * JIT cannot take it for another reason (no JIT, no memory). */
  int (*load)(const void* object, size_t object_size, const char* name, void** handle, char** error);

  /* Address of `symbol` (unmangled, as written in the source: extern "C" names) in a loaded object, or NULL
   * with *error set (free_buffer). */
  void* (*lookup)(void* handle, const char* symbol, char** error);

  /* Releases a loaded object's code and data. Pointers obtained through lookup() become invalid. */
  void (*unload)(void* handle);

  void (*free_buffer)(void* p);
} ktune_host_plugin_v1_t;

/* The plugin's single exported symbol. */
typedef const ktune_host_plugin_v1_t* (*ktune_host_plugin_v1_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* KTUNE_HOST_PLUGIN_H */
