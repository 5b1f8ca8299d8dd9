// `cache verify` brackets its passes over the layers with stamps of the layer files (tools/ktune/file_stamps.*):
// a file renamed over a layer, rewritten, or with a commit in its write-ahead log between two stampings must show
// as changed; the same files, and a write-ahead log that holds no commit either way, must not.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ktune/cache_admin.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/ktune/file_stamps.hpp"

using ktune::cli::changed_files;
using ktune::cli::stamp_layer_files;

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("cli file stamps: a layer replaced, rewritten or committed to between two stampings is named",
          "[cli]") {
  ktune::test::TempDir dir;
  const std::string a = dir.file("a.db"), b = dir.file("b.db");
  write(a, "layer a");
  write(b, "layer b");
  const std::vector<std::string> layers = {a, b};
  CHECK(ktune::cache_layer_files(a + "::" + b + "?ro") == layers);  // what verify stamps: the files, nothing opened
  const auto before = stamp_layer_files(layers);
  REQUIRE(before.size() == 4);  // each layer and its -wal
  CHECK(changed_files(before, stamp_layer_files(layers)).empty());

  SECTION("a file of the same size renamed over a layer") {
    write(dir.file("swap.db"), "layer x");
    std::filesystem::rename(dir.file("swap.db"), b);
    CHECK(changed_files(before, stamp_layer_files(layers)) == std::vector<std::string>{b});
  }
  SECTION("a layer rewritten in place with other bytes of the same size") {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later modification time
    write(a, "layer z");
    CHECK(changed_files(before, stamp_layer_files(layers)) == std::vector<std::string>{a});
  }
  SECTION("a layer removed") {
    std::filesystem::remove(a);
    CHECK(changed_files(before, stamp_layer_files(layers)) == std::vector<std::string>{a});
  }
  SECTION("a commit left in a layer's write-ahead log") {
    write(a + "-wal", std::string(4096, 'w'));
    CHECK(changed_files(before, stamp_layer_files(layers)) == std::vector<std::string>{a + "-wal"});
  }
  SECTION("an empty write-ahead log created (a reader) holds no commit") {
    write(a + "-wal", "");
    CHECK(changed_files(before, stamp_layer_files(layers)).empty());
  }
}
