// Helpers shared by the tests/cache/ tests: a self-removing temp directory, sample records, raw SQLite access
// for tampering with a file behind the store's back.
#pragma once

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

#include "ktune/cache/store.hpp"

namespace ktune::cache::test {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("ktune-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    // Undo any chmod a test made so everything can be removed.
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> pattern_blob(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(x >> 24);
  }
  return b;
}

inline BinaryRecord sample_record(int i, const std::string& compiler_version = "13.0.88",
                                  const std::string& source_digest = "src0") {
  BinaryRecord r;
  r.digest = "digest-" + std::to_string(i) + "-" + compiler_version;
  r.family = (i % 2) ? "xqa_decode" : "mxfp4_gemm";
  r.name = r.family + "/sm_90a/case" + std::to_string(i);
  r.arch = "sm_90a";
  r.compiler = "nvrtc";
  r.compiler_version = compiler_version;
  r.options = "-arch=sm_90a -O3";
  r.source_digest = source_digest;
  r.ktune_version = "0.1.0";
  r.schema_version = 3;
  r.entry_points = "kernel_a\nkernel_b";
  r.blob = pattern_blob(1000 + static_cast<size_t>(i) * 37, static_cast<uint32_t>(i));
  r.compile_ms = 12.5 + i;
  return r;
}

inline TuningRecord sample_tuning(int i, int64_t tuned_at = 1000) {
  TuningRecord t;
  t.family = "xqa_decode";
  t.problem_key = "b" + std::to_string(i) + ".l4096";
  t.device_fingerprint = "H200/sm_90/driver580";
  t.ktune_version = "0.1.0";
  t.winner_config = "t64.s2.w" + std::to_string(i);
  t.candidates_json = R"([{"config":"t64","us":12.5}])";
  t.tuned_at = tuned_at;
  return t;
}

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs SQL on the file directly, bypassing CacheDb; optional single blob parameter ?1.
inline void raw_exec(const std::string& path, const std::string& sql, const std::vector<uint8_t>* blob = nullptr) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  if (blob) sqlite3_bind_blob(st, 1, blob->data(), static_cast<int>(blob->size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_DONE);
}

}  // namespace ktune::cache::test
