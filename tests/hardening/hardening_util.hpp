// Shared by tests/hardening/: raw access to a cache file behind the store's back, and forging rows the way a
// hostile writer would (recomputing the row digest so the row is self-consistent).
#pragma once

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/cache_test_util.hpp"
#include "cache/src/store_impl.hpp"  // row digest functions (internal to cache/)
#include "ktune/cache/sha256.hpp"
#include "ktune/cache/signing.hpp"
#include "ktune/cache/store.hpp"

namespace ktune::hardening {

using cache::test::raw_exec;
using cache::test::read_bytes;
using cache::test::sample_record;
using cache::test::sample_tuning;
using cache::test::TempDir;
using cache::test::write_bytes;

// First column of the first row of `sql` as text ("" when there is no row).
inline std::string raw_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

inline int64_t raw_int(const std::string& path, const std::string& sql) { return std::stoll(raw_text(path, sql)); }

// Recomputes the stored row digest of a binaries row from its columns as they are now: what a forger who
// knows the format does after editing a column.
inline void reseal_binary_row(const std::string& path, const std::string& digest) {
  cache::OpenOptions o;
  o.allow_signed = true;  // the forger edits signed files too
  auto db = cache::CacheDb::open(path, o);
  cache::BinaryLookup l = db->get_binary(digest);  // may be damaged: only the columns are needed
  db.reset();
  cache::BinaryRecord r = l.record;
  const std::string q = "SELECT blob_sha256 FROM binaries WHERE digest = '" + digest + "'";
  const std::string blob_sha = raw_text(path, q);
  const int64_t size = raw_int(path, "SELECT blob_size FROM binaries WHERE digest = '" + digest + "'");
  const std::string rd = cache::detail::binary_row_digest(r, blob_sha, size);
  raw_exec(path, "UPDATE binaries SET row_digest = '" + rd + "' WHERE digest = '" + digest + "'");
}

struct Keys {
  std::string secret, pub;
};

inline Keys make_keys(const TempDir& dir, const std::string& name) {
  Keys k{dir.file(name), dir.file(name + ".pub")};
  cache::write_key_files(cache::generate_secret_key(), k.secret, k.pub);
  return k;
}

// A shipped-style file: 6 binaries (sample_record 0..5), 2 tuning rows (sample_tuning 1, 2), exported
// (rollback journal), signed by `key` unless it is null.
inline std::string signed_image(const TempDir& dir, const std::string& name, const Keys* key) {
  const std::string work = dir.file(name + ".work.db"), image = dir.file(name);
  {
    auto db = cache::CacheDb::open(work, {});
    for (int i = 0; i < 6; ++i) db->put_binary(sample_record(i));
    db->put_tuning(sample_tuning(1));
    db->put_tuning(sample_tuning(2));
    db->export_to(image);
  }
  if (key) cache::sign_file(image, cache::read_secret_key(key->secret));
  return image;
}

// SHA-256 of a whole file, to show a refused file was not modified.
inline std::string file_sha256(const std::string& path) {
  const std::vector<char> bytes = read_bytes(path);
  return cache::sha256_hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Replaces a row's blob and recomputes blob_sha256, blob_size and the row digest: what anyone with write access
// can do, since none of them carries a secret. The row stays self-consistent.
inline void forge_blob(const std::string& path, const std::string& digest, const std::vector<uint8_t>& blob) {
  const std::string sha = cache::sha256_hex(blob.data(), blob.size());
  raw_exec(path,
           "UPDATE binaries SET blob = ?1, blob_sha256 = '" + sha + "', blob_size = " + std::to_string(blob.size()) +
               " WHERE digest = '" + digest + "'",
           &blob);
  reseal_binary_row(path, digest);
}

// The blob stored under `digest` (read raw, unchecked).
inline std::vector<uint8_t> raw_blob(const std::string& path, const std::string& digest) {
  auto db = cache::CacheDb::open(path, {});
  cache::BinaryLookup l = db->get_binary(digest);
  REQUIRE(l.status == cache::LookupStatus::hit);
  return l.record.blob;
}

}  // namespace ktune::hardening
