// ktune::cache_layers (what `ktune info` and `ktune cache stats` print): a layer is "rw" only when a runtime
// on the same search path could write it: not marked "?ro", not signed, and writable by this user.
#include <catch2/catch.hpp>

#include <string>

#include "ktune/cache/store.hpp"
#include "ktune/cache_admin.hpp"
#include "support/temp_dir.hpp"

TEST_CASE("cache layer summaries honour ?ro marks", "[runtime][cache]") {
  ktune::test::TempDir dir;
  const std::string path = dir.file("k.db");
  ktune::cache::CacheDb::open(path, {});  // an empty, writable cache file
  const auto plain = ktune::cache_layers(path);
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].present);
  CHECK(plain[0].writable);
  const auto marked = ktune::cache_layers(path + "?ro");
  REQUIRE(marked.size() == 1);
  CHECK(marked[0].present);
  CHECK_FALSE(marked[0].writable);
  CHECK(marked[0].path == path);
}
