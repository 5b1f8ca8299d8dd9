// A C API runtime on one cache file, for the tests of the C entry points.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "ktune/ktune.h"

namespace ktune::test {

// ktune_runtime_create with the environment's defaults and `db` as the cache (read-only when asked).
inline ktune_runtime* c_runtime(const std::string& db, bool read_only = false) {
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  o.read_only = read_only ? 1 : 0;
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  return rt;
}

}  // namespace ktune::test
