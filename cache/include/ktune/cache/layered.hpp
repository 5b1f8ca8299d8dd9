// A search path of cache files, e.g. KTUNE_CACHE=/opt/image/ktune.db:~/.cache/ktune/ktune.db
//
// Lookups go through the layers in order. New entries go to exactly one layer: the first that is not marked
// "?ro", whose file (or, when the file is missing, whose directory) this process can write, and that carries
// no signature, unless force_read_only. If that layer cannot be opened writable (locked by another writer
// during a migration, a foreign file, an I/O error), no other layer takes its place: its LayerInfo and
// write_problem() say why, so a caller that must store results can fail instead of losing them. Every other
// layer is opened read-only and is never modified, so a shipped image stays byte-for-byte as built. Read-only
// layers are opened with normal locking when possible (a live cache other processes write is read correctly)
// and as immutable otherwise (read-only filesystems). Opening never waits for another process's write lock.
//
// A layer that cannot be used (not a database, newer schema, unreadable, a dangling symbolic link) is skipped
// and described in layers(); a damaged entry or a failing read in one layer is counted and skipped and the
// search goes on, so a bad layer costs a recompile, never a wrong binary or a failed lookup.
//
// Trust (LayeredOptions::trusted_keys non-empty, from KTUNE_TRUSTED_KEYS): nothing is served that neither a
// trusted key signed nor this process stored itself.
//   - Every layer opened read-only, whatever its path suffix or permissions, must carry a valid signature by
//     one of the trusted keys (signing.hpp), or it is refused: not opened, the reason in its note
//     ("refused: ...") and in refused(). A verified layer serves only the rows its signature covers.
//   - The writable layer serves only the rows this process stored in it since it was opened
//     (CacheDb::serve_only_rows_stored_here). Rows already in the file, or written by other processes, are
//     never served: anyone who can write the file could have put them there.
// Whatever the trust setting, a file that carries a signature is never made the writable layer (a write would
// void its signature) and is never migrated or written.
//
// Thread-safe: any number of threads may call every method at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ktune/cache/signing.hpp"
#include "ktune/cache/store.hpp"

namespace ktune::cache {

struct LayeredOptions {
  bool force_read_only = false;
  // Non-empty: read-only layers must be signed by one of these keys, and the writable layer serves only what
  // this process stored (see above).
  std::vector<PublicKey> trusted_keys;
};

class LayeredCache {
 public:
  // search_path: ':'-separated database paths; a leading '~' means $HOME. Empty entries are ignored.
  LayeredCache(const std::string& search_path, bool force_read_only);
  LayeredCache(const std::string& search_path, const LayeredOptions& options);
  ~LayeredCache();
  LayeredCache(const LayeredCache&) = delete;
  LayeredCache& operator=(const LayeredCache&) = delete;

  // $KTUNE_CACHE if set and non-empty, else ~/.cache/ktune/ktune.db.
  static std::string default_search_path();
  // The files search_path names, in order, as LayerInfo::path gives them ('~' expanded, "?ro" dropped); nothing
  // is opened.
  static std::vector<std::string> layer_files(const std::string& search_path);

  struct LayerInfo {
    std::string path;      // after '~' expansion
    bool writable = false; // receives new entries (at most one layer)
    bool present = false;  // the file exists (or was created for the writable layer)
    std::string note;      // why read-only, why skipped, or that it was created; empty for a plain writable layer
    bool open = false;     // searched by lookups
    // not used: unusable, a dangling symbolic link, or (with trusted keys) not validly signed
    bool refused = false;
    bool marked_read_only = false;  // "?ro" in the search path: never written, whatever the file's mode
    std::string signature; // with trusted keys: "signed by trusted key ID over N binaries ..." when verified
    // Non-empty only for the layer meant to receive new entries when it could not be opened writable: why
    // (e.g. "... locked by another writer ..."). The layer may still be open read-only for lookups.
    std::string write_problem;
  };
  std::vector<LayerInfo> layers() const;
  CacheDb* writable_layer() { return writable_; }
  // The path of the layer whose tuning rows are searched first (see get_tuning), or "" when none is.
  std::string tuning_first_layer() const;
  // "" when new entries can be stored (a writable layer is open) or the cache was opened read-only on purpose
  // (force_read_only). Otherwise one sentence naming the search path and why nothing can be stored: the layer
  // meant to receive new entries and why it could not be opened writable, or every layer and why it is not
  // writable. Commands that must store results fail with it.
  std::string write_problem() const;
  const std::string& search_path() const { return search_path_; }

  // First intact hit in layer order. A hit found after skipping damaged copies says so in detail, and an intact
  // copy found for an entry damaged in the writable layer is written back over it. `damaged` only when no
  // layer had an intact copy but some had a damaged one.
  BinaryLookup get_binary(const std::string& digest);
  // The same, with the row's key columns checked against `expect` (a mismatching row is a damaged copy).
  BinaryLookup get_binary(const std::string& digest, const BinaryExpectation& expect);
  BinaryLookup find_binary_any_compiler_version(const std::string& source_digest, const std::string& arch,
                                                const std::string& compiler, const std::string& options,
                                                const std::string& ktune_version);
  // Into the writable layer; throws CacheError("no writable cache layer in KTUNE_CACHE=...") if there is none.
  bool put_binary(const BinaryRecord& r);
  // The writable layer's intact row (in read-only mode: the layer a writable process would write), else the first
  // other layer's (what this machine tuned stands over what an image ships); a damaged row is counted
  // (damaged_seen) and skipped. With ktune_version
  // non-empty only a row tuned by that version counts: a winner measured against another build's kernels is
  // passed over like a missing one (the search goes on to the next layer), as binaries of another version are;
  // the version of the first row passed over goes to *other_version when given. A damaged row or a failing layer
  // met on the way is passed over as well; what each was, naming its file, goes to *passed_over when given ("; "
  // between).
  std::optional<TuningRecord> get_tuning(const std::string& family, const std::string& problem_key,
                                         const std::string& device_fingerprint,
                                         const std::string& ktune_version = "", std::string* other_version = nullptr,
                                         std::string* passed_over = nullptr);
  void put_tuning(const TuningRecord& r);

  // A blob that passed every check here but cannot be used (it does not load, or lacks the symbols of its key):
  // from now on every lookup passes over copies with this blob_sha256 as damaged ("quarantined: why") and
  // searches on, and the writable layer's row under `digest` is deleted when it holds this blob. Returns what
  // was done beyond that ("; deleted from PATH"), for the caller's log.
  std::string quarantine(const std::string& digest, const std::string& blob_sha256, const std::string& why);

  int64_t damaged_seen() const { return damaged_seen_.load(); }  // damaged entries met by lookups
  int64_t errors_seen() const { return errors_seen_.load(); }    // lookups a layer failed with an error
  // One line per layer that is not used (unusable, a dangling link, or refused for want of a trusted
  // signature), "path: why"; empty when every present layer is open. For error messages and start-up warnings.
  std::vector<std::string> refused() const;

 private:
  struct Layer {
    LayerInfo info;
    std::unique_ptr<CacheDb> db;  // null when skipped
  };
  template <class F>
  BinaryLookup search_binary(F&& lookup_in_layer);
  void count_problem(bool damaged) { ++(damaged ? damaged_seen_ : errors_seen_); }
  void open_layers(const std::string& search_path, const LayeredOptions& options);
  [[noreturn]] void throw_no_writable_layer(const char* operation) const;
  std::string layer_notes() const;  // "path: note; ..." for every layer

  std::string search_path_;
  bool force_read_only_ = false;
  std::vector<Layer> layers_;  // fixed after construction
  CacheDb* writable_ = nullptr;
  // Searched first for tuning rows: the writable layer, or in read-only mode the layer a writer would take.
  CacheDb* tuning_first_ = nullptr;
  bool tuning_writer_decided_ = false;
  std::vector<const Layer*> tuning_order_;  // get_tuning's search order (layers_ is fixed after construction)
  std::atomic<int64_t> damaged_seen_{0};
  std::atomic<int64_t> errors_seen_{0};
  mutable std::mutex quarantine_mu_;
  std::unordered_map<std::string, std::string> quarantined_;  // blob_sha256 -> why
  std::string quarantined_why(const std::string& blob_sha256) const;
};

}  // namespace ktune::cache
