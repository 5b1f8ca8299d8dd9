// CacheDb internals shared by store.cpp, binaries.cpp, tuning.cpp and maintenance.cpp.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "ktune/cache/store.hpp"
#include "sqlite_util.hpp"

namespace ktune::cache {

struct CacheDb::Impl {
  Impl(detail::Connection c, std::string p, bool ro, int version)
      : conn(std::move(c)), path(std::move(p)), read_only(ro), schema_version(version) {}
  detail::Connection conn;
  std::string path;
  bool read_only;
  int schema_version;
  std::mutex mu;  // serialises use of conn (transactions span several calls)
};

namespace detail {

// Column order shared by every query that reads a whole binaries row; the blob comes last.
inline constexpr const char* kBinaryColumns =
    "digest, family, name, arch, compiler, compiler_version, options, source_digest, ktune_version, "
    "schema_version, entry_points, blob_sha256, compile_ms, created_at, blob_size";

struct StoredBinary {
  BinaryRecord record;
  int64_t blob_size = 0;  // the column, to compare with the blob actually read
};

// Reads the row (blob included) under the lock. nullopt when absent. Throws SqliteFailure.
std::optional<StoredBinary> load_binary(CacheDb::Impl& db, const std::string& digest);
// The same for a caller that already holds db.mu.
std::optional<StoredBinary> load_binary_locked(CacheDb::Impl& db, const std::string& digest);
// hit, or damaged with the mismatch in detail (blob emptied). Hashes outside any lock.
BinaryLookup check_binary(StoredBinary&& row);
// load + check; a row SQLite reports corrupt is `damaged`, not an exception. `locked`: db.mu is already held.
BinaryLookup lookup_binary(CacheDb::Impl& db, const std::string& digest, bool locked = false);
// Opens a file to read from it: first read-only with normal locking (sees a live WAL file's latest commits),
// and if that is impossible (no -shm and an unwritable directory, a filesystem without locks), immutable.
std::unique_ptr<CacheDb> open_for_reading(const std::string& path);
// Throws CacheError when the file was opened read-only.
void require_writable(const CacheDb::Impl& db, const char* operation);

}  // namespace detail
}  // namespace ktune::cache
