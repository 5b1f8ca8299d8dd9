// CacheDb internals shared by store.cpp, binaries.cpp, tuning.cpp and maintenance.cpp.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

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
  // restrict_to_rows: only rows whose row digest is in here are served (null: no restriction). Set once,
  // before the CacheDb is shared; read under mu.
  std::shared_ptr<const std::unordered_set<std::string>> allowed_rows;
  // serve_only_rows_stored_here: lookups serve only rows whose row digest is in own_rows, the digests this
  // CacheDb computed over what it stored itself. Read and written under mu.
  bool own_rows_only = false;
  std::unordered_set<std::string> own_rows;
};

namespace detail {

// Column order shared by every query that reads a whole binaries row; the blob comes last.
inline constexpr const char* kBinaryColumns =
    "digest, family, name, arch, compiler, compiler_version, options, source_digest, ktune_version, "
    "schema_version, entry_points, blob_sha256, compile_ms, created_at, blob_size";
// kBinaryColumns plus the row digest as column 15 ('' in a v1 file, which has none).
std::string binary_columns_with_row_digest(int schema_version);
// Reads the kBinaryColumns of the statement's current row (columns 0-14) into `r` and `blob_size`.
void read_binary_columns(const Stmt& s, BinaryRecord& r, int64_t& blob_size);

// Column order shared by every query that reads a whole tuning row.
inline constexpr const char* kTuningColumns =
    "family, problem_key, device_fingerprint, ktune_version, winner_config, candidates_json, tuned_at";
// Reads the kTuningColumns of the statement's current row, starting at column `first` (columns first..first+6).
void read_tuning_columns(const Stmt& s, TuningRecord& r, int first = 0);

// SHA-256 over every column of a binaries row except the blob and the row digest itself: its metadata,
// blob_sha256 and blob_size. Length-prefixed, so no two different rows share an encoding.
std::string binary_row_digest(const BinaryRecord& r, const std::string& blob_sha256, int64_t blob_size);
// SHA-256 over every column of a tuning row except the row digest.
std::string tuning_row_digest(const TuningRecord& r);
// "" when the row's columns hash to its stored row digest (and, when `allowed` is set, the row is in it);
// else what is wrong. v1 files carry no row digest: always "".
std::string check_binary_row(const CacheDb::Impl& db, const BinaryRecord& r, int64_t blob_size);
std::string check_tuning_row(const CacheDb::Impl& db, const TuningRecord& r);
// "" when every non-empty expectation equals the row's column, else the first mismatch.
std::string check_expectation(const BinaryRecord& r, const BinaryExpectation& e);

struct StoredBinary {
  BinaryRecord record;
  int64_t blob_size = 0;  // the column, to compare with the blob actually read
  // The digest the row was selected by: a damaged index can lead the SELECT to another, intact row, whose own
  // digest check_binary then finds different.
  std::string asked_digest;
  // own_rows_only and the row's stored row digest is not one this CacheDb wrote: not served (a miss). A row
  // whose columns were forged to carry an own digest still fails its row-digest check in check_binary.
  bool hidden = false;
};

// Reads the row (blob included) under the lock. nullopt when absent. Throws SqliteFailure.
std::optional<StoredBinary> load_binary(CacheDb::Impl& db, const std::string& digest);
// The same for a caller that already holds db.mu.
std::optional<StoredBinary> load_binary_locked(CacheDb::Impl& db, const std::string& digest);
// hit, or damaged with the mismatch in detail (blob emptied): the digest asked for, blob size, blob sha256, row
// digest, signed-row restriction, then the caller's expectation (if any). Hashes outside any lock.
BinaryLookup check_binary(const CacheDb::Impl& db, StoredBinary&& row, const BinaryExpectation* expect = nullptr);
// load + check; a row SQLite reports corrupt is `damaged`, not an exception. `locked`: db.mu is already held.
BinaryLookup lookup_binary(CacheDb::Impl& db, const std::string& digest, bool locked = false,
                           const BinaryExpectation* expect = nullptr);
// INSERT ... ON CONFLICT DO UPDATE of one whole tuning row (row digest computed here; tuned_at as given).
// Caller holds db.mu and a write transaction. Returns the row digest written ("" in a v1 file).
std::string upsert_tuning_locked(CacheDb::Impl& db, const TuningRecord& row);
// The row the key leads to, as written (row digest included, unchecked: check_tuning_lookup), or nullopt; db.mu
// held.
std::optional<TuningRecord> find_tuning_locked(CacheDb::Impl& db, const std::string& family,
                                               const std::string& problem_key, const std::string& device_fingerprint);
// Empty when a row found by (family, problem_key, device_fingerprint) is intact and carries that key (a damaged
// index can lead the SELECT to another, intact row); else why not.
std::string check_tuning_lookup(const CacheDb::Impl& db, const TuningRecord& r, const std::string& family,
                                const std::string& problem_key, const std::string& device_fingerprint);
// Under own_rows_only, remembers a row digest this CacheDb stored. Caller holds db.mu.
void note_own_row_locked(CacheDb::Impl& db, const std::string& row_digest);
// Every tuning row with its integrity problem ("" when intact), ordered by primary key. Caller holds db.mu.
std::vector<std::pair<TuningRecord, std::string>> list_tuning_checked_locked(CacheDb::Impl& db,
                                                                           const std::string& family_filter);
// Opens a file to read from it: first read-only with normal locking (sees a live WAL file's latest commits),
// and if that is impossible (no -shm and an unwritable directory, a filesystem without locks), immutable.
std::unique_ptr<CacheDb> open_for_reading(const std::string& path);
// Throws CacheError when the file was opened read-only.
void require_writable(const CacheDb::Impl& db, const char* operation);

}  // namespace detail
}  // namespace ktune::cache
