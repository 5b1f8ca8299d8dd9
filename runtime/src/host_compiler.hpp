// The host compiler front: one GeneratedKernel for Arch "host" -> object file (through the LLVM plugin) and
// back -> loaded code with its entry points as function pointers.
//
// Entry points are C++ expressions naming functions, exactly as for CUDA (e.g.
// "ktune_xqa::host_decode<ktune_xqa::Spec>"). Where NVRTC lowers them with nvrtcAddNameExpression, the host
// front appends one line per entry point to the translation unit,
//   extern "C" { __attribute__((used)) decltype(&(EXPR)) ktune_host_entry_<i> = &(EXPR); }
// a constant-initialized pointer with a fixed C name; loading looks the variable up and reads the function
// address from it. The symbol names are what the cache stores as the binary's entry points.
#pragma once

#include <string>
#include <vector>

#include "ktune/kernel_spec.hpp"
#include "ktune/runtime.hpp"
#include "binary_key.hpp"
#include "nvrtc_compiler.hpp"

namespace ktune::detail {

// The option list the plugin receives (clang -cc1 options; the host triple/CPU/features are not options but
// the compiler_version of the key): ktune's defaults, then the spec's.
std::vector<std::string> host_options(const GeneratedKernel& kernel);

// The translation unit actually compiled: the generated source plus the entry-point trailer.
std::string host_translation_unit(const GeneratedKernel& kernel);

// Compiles with the plugin. Throws CompileError (log, options, kernel name) or Error(no_compiler).
// CompiledBinary::cubin holds the object file; lowered_names the entry symbols.
CompiledBinary compile_on_host(const GeneratedKernel& kernel, const std::vector<std::string>& options);

// Links an object into the process and resolves `symbols` (read from the row's entry_points): the kernel
// symbols to function pointers, and the binding symbol, which must resolve too. Fills kernel->module (the
// plugin's handle) and kernel->functions. Throws UnloadableBinary when the object does not link or lacks a
// symbol, Error(unsupported) when the environment refuses every object alike (environment_refused), and
// Error(no_compiler) without the plugin.
void load_host_object(const std::vector<uint8_t>& object, const std::string& name, const BoundSymbols& symbols,
                      LoadedKernel* kernel);
void unload_host_object(void* handle);

// Whether a link error of the host JIT is the environment's, not the object's: the system refused memory or
// execution, or a symbol outside ktune's own (a libm or libc function) could not be resolved.
bool environment_refused(const std::string& link_error);

}  // namespace ktune::detail
