// A runtime's options on exactly one cache file: no layer from the environment (KTUNE_CACHE) can serve a binary
// or receive one, so a test sees its own compiles and hits only.
#pragma once

#include <string>

#include "ktune/runtime.hpp"

namespace ktune::test {

// jit false: as KTUNE_JIT=0, a miss is an error and nothing compiles.
inline RuntimeOptions on_cache_file(const std::string& path, bool jit = true) {
  RuntimeOptions o;
  o.cache_path = path;
  o.allow_jit = jit;
  return o;
}

}  // namespace ktune::test
