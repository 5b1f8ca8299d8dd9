// Writes small seed databases for fuzz_cache_db into a directory: a v2 file with binaries and tuning rows, the
// same signed, a v1 file, an empty file, a file whose rows are damaged. Page size 512 keeps them a few KiB.
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "ktune/cache/signing.hpp"
#include "ktune/cache/store.hpp"

namespace {

void small_pages(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA page_size = 512; CREATE TABLE x(y); DROP TABLE x;", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

ktune::cache::BinaryRecord record(int i) {
  ktune::cache::BinaryRecord r;
  r.digest = "d" + std::to_string(i);
  r.family = "xqa_decode";
  r.name = "xqa_decode/sm_90a/k" + std::to_string(i);
  r.arch = i % 2 ? "sm_90a" : "sm_80";
  r.compiler = "nvrtc";
  r.compiler_version = "13.0.88";
  r.options = "-arch=sm_90a";
  r.source_digest = "s" + std::to_string(i % 2);
  r.ktune_version = "0.1.0";
  r.schema_version = 1;
  r.entry_points = "k\nc";
  r.blob.assign(40 + 30 * i, static_cast<uint8_t>(i));
  return r;
}

void fill(ktune::cache::CacheDb& db) {
  for (int i = 0; i < 3; ++i) db.put_binary(record(i));
  ktune::cache::TuningRecord t;
  t.family = "xqa_decode";
  t.problem_key = "d128";
  t.device_fingerprint = "H200";
  t.ktune_version = "0.1.0";
  t.winner_config = "t64.s3.w4";
  t.candidates_json = "[]";
  db.put_tuning(t);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  fs::create_directories(out);
  auto make = [&](const std::string& name, int version, bool sign) {
    const std::string p = (out / name).string();
    fs::remove(p);
    small_pages(p);
    auto db = version == 1 ? ktune::cache::detail::open_at_schema_version(p, 1) : ktune::cache::CacheDb::open(p, {});
    fill(*db);
    if (sign) db->sign(ktune::cache::generate_secret_key());
    db->use_rollback_journal();
  };
  make("v2.db", 2, false);
  make("v2-signed.db", 2, true);
  make("v1.db", 1, false);
  std::FILE* f = std::fopen((out / "empty.db").c_str(), "wb");
  if (f) std::fclose(f);
  std::printf("seeds written to %s\n", out.c_str());
  return 0;
}
