// Runtime options for tests, by where their cache lives.
#pragma once

#include <cstdlib>
#include <string>

#include "ktune/runtime.hpp"

namespace ktune::test {

// Exactly one cache file: no layer from the environment (KTUNE_CACHE) can serve a binary or receive one, so a test
// sees its own compiles and hits only. jit false: as KTUNE_JIT=0, a miss is an error and nothing compiles.
inline RuntimeOptions on_cache_file(const std::string& path, bool jit = true) {
  RuntimeOptions o;
  o.cache_path = path;
  o.allow_jit = jit;
  return o;
}

// KTUNE_CACHE's layers where it is set (a warm cache saves a matrix its compiles), else a fresh file at `path`;
// JIT on either way, since a warm cache filled for the GPU need not hold the host kernels a test runs.
inline RuntimeOptions on_env_cache_or(const std::string& path) {
  RuntimeOptions o = RuntimeOptions::from_env();
  if (o.cache_path.empty() || !std::getenv("KTUNE_CACHE")) o.cache_path = path;
  o.allow_jit = true;
  return o;
}

}  // namespace ktune::test
