// The runtime's calls into the cache library: a cache::CacheError (SQLite, file, format) becomes the runtime's
// Error(cache_error) from "cache", so callers see one error type.
#pragma once

#include "ktune/cache/store.hpp"
#include "ktune/error.hpp"

namespace ktune::detail {

template <class F>
auto cache_call(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const cache::CacheError& e) {
    throw Error(Status::cache_error, "cache", e.what());
  }
}

}  // namespace ktune::detail
