// Cache maintenance for operators (the `ktune cache` subcommands use exactly this). `search_path` is a
// KTUNE_CACHE-style ':'-separated list; listing and verifying visit every layer, writing commands act on the
// first writable layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ktune/export.hpp"

namespace ktune {

struct KTUNE_API CacheEntry {
  std::string layer;  // database path
  std::string name, family, arch, compiler, compiler_version, ktune_version, digest;
  int64_t blob_size = 0;
  int64_t created_at = 0;
  double compile_ms = 0;
};

struct KTUNE_API CacheTuningEntry {
  std::string layer, family, problem_key, device_fingerprint, ktune_version, winner_config, candidates_json;
  int64_t tuned_at = 0;
};

struct KTUNE_API CacheIssue {
  std::string layer, digest, name, problem;
};

struct KTUNE_API CacheLayerSummary {
  std::string path;
  bool present = false, writable = false;
  // With KTUNE_TRUSTED_KEYS set: whether a runtime serves the rows this layer holds now (a layer a trusted key
  // signed); false for a layer the trust check refuses (`note` says why) and for an unsigned writable layer,
  // whose existing rows a trusting runtime never serves. Always true without trusted keys.
  bool served = true;
  std::string note;
  int64_t binaries = 0, tuning = 0, blob_bytes = 0;
  int schema_version = 0;
};

struct KTUNE_API CacheMergeSummary {
  int binaries_added = 0, binaries_skipped = 0, tuning_added = 0, tuning_updated = 0, damaged_skipped = 0;
};

// Signature state of one cache file (see `ktune cache sign` and KTUNE_TRUSTED_KEYS).
struct KTUNE_API CacheSignatureStatus {
  std::string layer;
  std::string result;  // "valid", "unsigned", "untrusted", "invalid" (rows changed after signing), "damaged"
  bool valid = false;
  std::string key_id;  // the trusted key whose signature matched (valid)
  std::string detail;  // one sentence: who signed what, or what is wrong
  int64_t binaries = 0, tuning = 0;
};

struct KTUNE_API CacheSignatureInfo {
  std::string path, key_id, manifest_sha256;
  int64_t binaries = 0, tuning = 0;
};

KTUNE_API std::string default_cache_path();
KTUNE_API std::vector<CacheLayerSummary> cache_layers(const std::string& search_path);
// The files search_path names, in order ('~' expanded, "?ro" dropped), without opening any of them.
KTUNE_API std::vector<std::string> cache_layer_files(const std::string& search_path);
// "" when every layer search_path names is a file that is there; else one sentence saying which are not (a typo,
// a dangling link) or that the path names none. What `cache verify` and cache_export refuse: a check or an
// image of a layer that is not there checks or ships nothing of it.
KTUNE_API std::string missing_layers(const std::string& search_path);
KTUNE_API std::vector<CacheEntry> cache_list(const std::string& search_path, const std::string& family = "");
// The layer whose tuning row a process of search_path runs where several layers hold one (the writable layer, or
// the one a writable process would write), or "" when that is simply the first layer holding one.
KTUNE_API std::string cache_tuning_first_layer(const std::string& search_path);
KTUNE_API std::vector<CacheTuningEntry> cache_list_tuning(const std::string& search_path,
                                                          const std::string& family = "");
// Integrity check of every layer (SQLite's own check plus every blob's SHA-256), and of every intact binary's
// binding: its blob's symbol table must define the binding symbol and entry points its row names (read from
// the bytes; nothing is loaded).
KTUNE_API std::vector<CacheIssue> cache_verify(const std::string& search_path);

// `cache verify --load`: loads every intact binary this machine can load -- host objects of this CPU's target
// id (LLVM host backend), CUBINs of the arch of GPU 0 -- exactly as the runtime would, symbols included, then
// unloads it. Rows of other targets are counted as not loadable here.
struct KTUNE_API CacheLoadReport {
  int64_t loaded = 0, failed = 0, not_loadable_here = 0;
  std::vector<CacheIssue> failures;  // problem: why it does not load
  std::string targets;               // what was loadable: "host znver4 (LLVM 19.1.7); GPU 0 sm_90a"
  // Layers the runtime does not use (unusable, or with KTUNE_TRUSTED_KEYS not validly signed): "path: why". Their
  // binaries are not loaded, so nothing untrusted is linked into the process, and none of them counts as checked.
  std::vector<std::string> refused_layers;
};
KTUNE_API CacheLoadReport cache_verify_loads(const std::string& search_path);
// Removes, from the first writable layer, damaged entries and entries built by another compiler version
// (stale_compiler: keep only the NVRTC version loaded now) or another ktune version. Returns the count. A layer
// of search_path that is not there is Error(not_found) and nothing is created.
KTUNE_API int cache_prune(const std::string& search_path, bool stale_compiler, bool stale_ktune,
                          const std::string& family = "");
// Writes every intact entry of every layer into a new database at dest (refuses an existing file or link),
// compacted, checkpointed and in rollback-journal mode: one self-contained file, ready to ship read-only in an
// image. Concurrent exports use temporaries of their own (removed on failure); at most one creates dest. A layer
// of search_path that is not there (a typo, a dangling link) is Error(not_found) and nothing is written. The
// summary's binaries_added and tuning_added are the rows dest holds; tuning_updated is 0.
KTUNE_API CacheMergeSummary cache_export(const std::string& search_path, const std::string& dest);
// Imports the intact entries of src into the first writable layer. public_key_paths set (':'- or
// ','-separated public key files): src must carry a valid signature by one of them over exactly its rows
// (blobs hashed), else nothing is imported and Error names src and why; only signed rows are imported.
KTUNE_API CacheMergeSummary cache_merge(const std::string& search_path, const std::string& src,
                                        const std::optional<std::string>& public_key_paths = std::nullopt);

// Writes a new Ed25519 key pair: the secret key to secret_path (created mode 0600; an existing file is never
// overwritten) and the public key to public_path. Returns the key id (16 hex digits).
KTUNE_API std::string cache_keygen(const std::string& secret_path, const std::string& public_path);
// Signs one cache file in place with the secret key file (refused if the file fails verification). Signing
// again with the same key replaces that key's signature; other keys' signatures stay (and stop matching if
// rows changed). The file keeps its journal mode (an exported file stays ready to ship).
KTUNE_API CacheSignatureInfo cache_sign(const std::string& db_path, const std::string& secret_key_path);
// Checks every present layer of the search path against the public key files (':'- or ','-separated),
// hashing every blob. A layer is valid only when a listed key signed exactly its current rows.
KTUNE_API std::vector<CacheSignatureStatus> cache_verify_signatures(const std::string& search_path,
                                                                    const std::string& public_key_paths);

}  // namespace ktune
