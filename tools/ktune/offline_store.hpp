// The rule every offline command that stores results follows (compile, warmup, tune): it exists to leave its
// results in the cache, so it refuses to start when no layer can take them, and it fails -- naming the path
// and the reason -- when any result was not stored. A success line therefore means "stored".
//
// KTUNE_JIT=0 applies to offline commands too: they compile by design, so with KTUNE_JIT=0 they refuse to run
// (instead of silently compiling against the operator's setting). To check what a cache holds without
// compiling, use `ktune cache verify --load` or a runtime with KTUNE_JIT=0.
#pragma once

#include <string>

#include "ktune/runtime.hpp"

namespace ktune::cli {

// RuntimeOptions::from_env() with --cache applied and require_store set (the first result that cannot be
// stored is an error, and no further compile is attempted); throws Error(jit_disabled) under KTUNE_JIT=0.
RuntimeOptions offline_runtime_options(const std::string& command, const std::string& cache_flag);
// Throws Error(cache_error) naming the search path and each layer's reason when `rt` has no writable layer.
void require_writable_layer(const Runtime& rt, const std::string& command);
// "" when every binary `rt` compiled was stored; otherwise a message naming the count and the latest reason.
std::string unstored_results(const Runtime& rt);

}  // namespace ktune::cli
