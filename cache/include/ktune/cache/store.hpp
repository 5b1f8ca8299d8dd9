// One SQLite file of keyed binaries (compiled kernels) and tuning rows.
//
// The store knows nothing of kernels, CUDA or tuning policy: keys and JSON payloads are opaque strings computed
// by the runtime. Its one promise is that it never hands out a damaged blob: every read re-hashes the blob and
// compares it with the SHA-256 recorded when it was written.
//
// Integrity (schema v2): every row also stores a row digest, a SHA-256 over all of its other columns (for a
// binary: its metadata plus blob_sha256 and blob_size), checked on every read. A byte changed anywhere in a
// row — blob, entry_points, arch, compiler_version, options, a tuning winner — makes the row `damaged`, never a
// hit with wrong metadata. A file may also carry Ed25519 signatures over a manifest of every row digest
// (signing.hpp); a CacheDb restricted to signed rows (restrict_to_rows) serves nothing outside that set.
//
// Concurrency: a CacheDb may be shared by any number of threads (calls are serialised on an internal mutex, and
// blob hashing happens outside it). Any number of processes may open the same file: writable files use WAL
// mode and BEGIN IMMEDIATE transactions. A writer waits at most kLockWaitSeconds for another writer's lock,
// then throws a CacheError naming the file and saying it is locked by another writer. Opening a file of the
// current schema never takes the write lock (only creating or migrating one does), so opening never waits
// for a writer. Do not carry an open CacheDb across fork(); open a new one in the child.
//
// Opening never writes before every check has passed: a file that is refused (not SQLite, not a ktune cache,
// a newer schema, a signed file opened writable without allow_signed, a dangling symbolic link) is left
// byte-for-byte as it was.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ktune::cache {

// Every message names the file, what failed and what to do about it.
struct CacheError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Schema version this code writes; files with a newer version are refused, older ones are migrated on a
// writable open (and refused read-only: re-export them). v1: binaries, tuning, meta. v2: + a row_digest
// column in binaries and tuning, + the signatures table.
constexpr int kCacheSchemaVersion = 2;

// How long a write (or a migration at open) waits for another process's write lock before failing.
constexpr int kLockWaitSeconds = 10;

// Thrown by a writable CacheDb::open of a file that carries a signature (unless OpenOptions::allow_signed):
// any write would void it, and a signed file is shipped to stay as it was signed.
struct SignedCacheError : CacheError {
  using CacheError::CacheError;
};

class CacheDb;
struct SecretKey;
struct PublicKey;
namespace detail {
std::unique_ptr<CacheDb> open_at_schema_version(const std::string& path, int version);
}
struct SignatureRecord;
struct SignatureCheck;

struct BinaryRecord {
  std::string digest;            // hex sha256 over every key input (computed by the runtime, opaque here); primary key
  std::string family;            // "xqa_decode"
  std::string name;              // readable key, e.g. "xqa_decode/sm_90a/d128.g4.p32.hnd.bf16-bf16.q1/t64.s2.w4"
  std::string arch;              // "sm_90a" | "host"
  std::string compiler;          // "nvrtc" | "llvm"
  std::string compiler_version;  // "13.0.88"
  std::string options;           // normalized compiler options, space-joined
  std::string source_digest;     // hex sha256 of generated source + included headers
  std::string ktune_version;     // "0.2.0"
  int schema_version = 0;        // binary format version the runtime wrote (not the file's schema)
  std::string entry_points;      // lowered symbol names, '\n'-separated (opaque here)
  std::vector<uint8_t> blob;     // CUBIN / object code
  std::string blob_sha256;       // hex sha256 of blob: computed by put_binary if empty, checked if not
  double compile_ms = 0;
  int64_t created_at = 0;        // unix seconds; put_binary fills in the current time if 0
  std::string row_digest;        // filled by reads (schema v2); put_binary ignores it and computes its own
};

// A BinaryRecord without its blob (for listings).
struct BinaryInfo {
  std::string digest, family, name, arch, compiler, compiler_version, options, source_digest, ktune_version;
  int schema_version = 0;
  std::string entry_points;
  std::string blob_sha256;
  double compile_ms = 0;
  int64_t created_at = 0;
  int64_t blob_size = 0;  // bytes, as recorded when written
};

enum class LookupStatus { hit, miss, damaged };

struct BinaryLookup {
  LookupStatus status = LookupStatus::miss;
  // hit: the whole record, blob verified. damaged: the metadata columns, but the blob is always left empty.
  BinaryRecord record;
  // damaged: what mismatched. A LayeredCache hit may also say which damaged copies were skipped to find it.
  std::string detail;
  // LayeredCache: damaged copies this lookup passed over (a count per lookup, so concurrent lookups of other keys
  // never show up in it).
  int damaged_skipped = 0;
};

struct TuningRecord {
  std::string family, problem_key, device_fingerprint;  // primary key
  std::string ktune_version;
  std::string winner_config;    // readable config key
  std::string candidates_json;  // every candidate's timing, JSON text (opaque here)
  int64_t tuned_at = 0;         // unix seconds; put_tuning fills in the current time if 0
  std::string row_digest;       // filled by reads (schema v2); put_tuning ignores it and computes its own
};

// What the caller expects of a binary found under a digest: every non-empty field (and schema_version when
// non-zero) must equal the row's column, otherwise the row is `damaged` ("column arch is ... but ... was
// asked for"). A digest is a hash of these very inputs, so a mismatch means a forged or corrupted row.
struct BinaryExpectation {
  std::string family, arch, compiler, compiler_version, options, source_digest, ktune_version;
  int schema_version = 0;
};

struct OpenOptions {
  bool read_only = false;
  bool create = true;  // writable only: create the file (and its directory) when missing
  // writable only: open a file that carries a signature (to sign it again). false: SignedCacheError.
  bool allow_signed = false;
  // read_only only. true: open as `file:PATH?mode=ro&immutable=1`, which needs no locks and no -wal/-shm files,
  // so it works on read-only filesystems (container images); it must only be used on files nobody is writing.
  // false: `mode=ro` with normal locking, which sees a live WAL file's latest commits correctly.
  // An immutable open of a WAL-mode file whose -wal file holds data is refused: those commits would be
  // silently invisible (ship files written by export_to, which are self-contained).
  bool immutable = true;
};

class CacheDb {
 public:
  static std::unique_ptr<CacheDb> open(const std::string& path, OpenOptions opts);  // throws CacheError
  ~CacheDb();
  CacheDb(CacheDb&&) noexcept;
  CacheDb& operator=(CacheDb&&) noexcept;
  CacheDb(const CacheDb&) = delete;
  CacheDb& operator=(const CacheDb&) = delete;

  const std::string& path() const;
  bool read_only() const;
  int schema_version() const;  // the file's schema version (meta table)

  // Checks blob_size and sha256(blob) against the recorded columns; any mismatch, or SQLite reporting the row's
  // pages corrupt, gives `damaged` (never a hit with a bad blob). Other SQLite failures throw CacheError.
  BinaryLookup get_binary(const std::string& digest);
  BinaryLookup get_binary(const std::string& digest, const BinaryExpectation& expect);
  // For deployments with no compiler: the newest (created_at) intact entry matching these columns, whatever its
  // compiler_version, passing over rows whose blob_sha256 is in `skip_blobs` (blobs the caller found unusable,
  // so an older compiler's row is served instead). `damaged` only if every matching entry is damaged.
  BinaryLookup find_binary_any_compiler_version(const std::string& source_digest, const std::string& arch,
                                                const std::string& compiler, const std::string& options,
                                                const std::string& ktune_version,
                                                const std::unordered_set<std::string>& skip_blobs = {});
  // INSERT OR IGNORE in one transaction: false if an intact entry with this digest already exists. A damaged
  // entry under the same digest is replaced (returns true). Throws on a read-only file, an empty digest, or a
  // blob_sha256 that does not match the blob.
  bool put_binary(const BinaryRecord& r);
  bool remove_binary(const std::string& digest);
  std::vector<BinaryInfo> list_binaries(const std::string& family_filter = "");  // ordered by family, name

  // nullopt when absent, and when the row fails its row digest (a damaged tuning row is a miss, never a
  // wrong config); get_tuning_checked says which, with the mismatch in *problem.
  std::optional<TuningRecord> get_tuning(const std::string& family, const std::string& problem_key,
                                         const std::string& device_fingerprint);
  std::optional<TuningRecord> get_tuning_checked(const std::string& family, const std::string& problem_key,
                                                 const std::string& device_fingerprint, std::string* problem);
  void put_tuning(const TuningRecord& r);  // atomic upsert: last writer wins for the key
  std::vector<TuningRecord> list_tuning(const std::string& family_filter = "");  // intact rows only

  struct VerifyIssue {
    std::string digest, name, problem;  // digest/name empty for file-level problems
    // A tuning row's problem: "family\nproblem_key\ndevice_fingerprint" (digest empty, name readable).
    std::string tuning_key;
  };
  // PRAGMA integrity_check, then every binary row (blob size and sha256, row digest) and every tuning row
  // (row digest). Empty when all is well.
  std::vector<VerifyIssue> verify();

  struct PruneCriteria {
    std::string keep_compiler_version;  // non-empty: delete binaries with any other compiler_version ...
    std::string compiler;               // ... among those built by this compiler ("nvrtc"); empty: every compiler
    std::string keep_ktune_version;     // non-empty: delete binaries and tuning rows of any other ktune_version
    bool remove_damaged = true;         // delete binaries (and tuning rows) that fail verification
    std::string family;                 // non-empty: only consider this family
  };
  int prune(const PruneCriteria& c);  // returns the number of rows deleted (binaries + tuning)

  // A compact standalone copy to ship read-only: VACUUM INTO a temporary file next to dest, damaged entries
  // dropped, journal_mode=DELETE, fsync, then linked into place. Refuses to overwrite an existing file.
  void export_to(const std::string& dest_path);

  struct MergeResult {
    int binaries_added = 0, binaries_skipped = 0, tuning_added = 0, tuning_updated = 0, damaged_skipped = 0;
  };
  // Imports src's intact binaries (each blob verified first) and its tuning rows that win over ours: for one
  // (family, problem_key, device_fingerprint), the later tuned_at wins, and on equal tuned_at the row whose
  // row digest sorts first (bytewise) wins; an intact row always replaces a damaged one. With
  // prefer_ktune_version non-empty, a row tuned by that version wins over a row of any other version before
  // tuned_at is compared (a runtime uses only its own version's rows). The result does not depend on the order
  // files are merged in.
  MergeResult merge_from(const std::string& src_path, const std::string& prefer_ktune_version = "");
  // The same for a source that must carry a valid signature by one of `trusted` over exactly its rows
  // (blobs hashed); otherwise throws CacheError naming src and the signature's state, and imports nothing.
  // Only rows the signature covers are imported.
  MergeResult merge_signed_from(const std::string& src_path, const std::vector<PublicKey>& trusted,
                                const std::string& prefer_ktune_version = "");

  struct Counts {
    int64_t binaries = 0, tuning = 0, blob_bytes = 0;
  };
  Counts counts();

  // Signatures (signing.hpp). sign() refuses a file that fails verify(); it replaces any earlier signature by
  // the same key. check_signature() recomputes every row digest from the columns (and, with hash_blobs, every
  // blob's SHA-256), rebuilds the manifest and accepts the first signature by a trusted key that matches it.
  SignatureRecord sign(const SecretKey& key);
  std::vector<SignatureRecord> signatures();
  SignatureCheck check_signature(const std::vector<PublicKey>& trusted, bool hash_blobs);
  // From now on only rows whose row digest is in `rows` are served; any other row is `damaged` ("not covered
  // by the file's signature"). Used for read-only layers that must carry a trusted signature.
  void restrict_to_rows(std::shared_ptr<const std::unordered_set<std::string>> rows);
  // From now on lookups (get_binary, find_binary_any_compiler_version, get_tuning) serve only rows this
  // CacheDb stored itself (put_binary, put_tuning) since this call; every other row, already in the file or
  // written by another process, is a miss. For the writable layer under trusted keys (layered.hpp).
  void serve_only_rows_stored_here();
  // Checkpoints and switches a writable file to journal_mode=DELETE (what export_to writes), so it can be read
  // from a read-only filesystem without -wal/-shm files. Needs no other connection open on the file.
  void use_rollback_journal();

  struct Impl;

 private:
  friend std::unique_ptr<CacheDb> detail::open_at_schema_version(const std::string& path, int version);
  explicit CacheDb(std::unique_ptr<Impl> impl);
  MergeResult merge_rows_from(CacheDb& src, const std::string& prefer_ktune_version);
  // put_binary, or with lowest_row_digest_wins (merges) also replacing an intact row of the same digest whose
  // row digest sorts after r's.
  bool put_binary_row(const BinaryRecord& r, bool lowest_row_digest_wins);
  std::unique_ptr<Impl> impl_;
};

// Opens an existing file read-only: plain `mode=ro` first (sees a live writer's WAL commits), falling back
// to `immutable=1` where locking is impossible (read-only filesystems). Throws CacheError.
namespace detail {
std::unique_ptr<CacheDb> open_for_reading(const std::string& path);
// For migration tests: opens (creating it if needed) a writable file brought only up to `version` (1 or 2).
// Its writes use that version's columns, exactly as a ktune of that version would.
std::unique_ptr<CacheDb> open_at_schema_version(const std::string& path, int version);
}

}  // namespace ktune::cache
