#include "offline_store.hpp"

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::cli {

RuntimeOptions offline_runtime_options(const std::string& command, const std::string& cache_flag) {
  RuntimeOptions o = RuntimeOptions::from_env();
  if (!cache_flag.empty()) o.cache_path = cache_flag;
  o.require_store = true;  // stop at the first result that cannot be stored
  if (!o.allow_jit)
    throw Error(Status::jit_disabled, command,
                fmt::format("KTUNE_JIT=0 forbids compiling, and `ktune {}` compiles; unset KTUNE_JIT to fill the "
                            "cache (it applies to offline commands too), or check what the cache holds with "
                            "`ktune cache verify --load`",
                            command));
  return o;
}

void require_writable_layer(const Runtime& rt, const std::string& command) {
  std::string why;
  if (rt.writable_cache_layer(&why).empty())
    throw Error(Status::cache_error, command, fmt::format("nothing could be stored: {}", why));
}

std::string unstored_results(const Runtime& rt) {
  const RuntimeStats s = rt.stats();
  if (s.store_failures == 0) return {};
  return fmt::format("{} compiled binaries were not stored in the cache (latest: {})", s.store_failures,
                     rt.last_store_failure());
}

}  // namespace ktune::cli
