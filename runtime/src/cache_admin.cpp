#include "ktune/cache_admin.hpp"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

#include "binary_key.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache/signing.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/cache/temp_path.hpp"
#include "cache_call.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "runtime_impl.hpp"

namespace ktune {
namespace {

using detail::cache_call;

// Opens each present layer of the search path (read-only unless `writable_first` and it is the first
// writable one) and calls fn(layer_info, db).
template <class F>
void for_each_layer(const std::string& search_path, bool force_read_only, F&& fn) {
  cache_call([&] {
    cache::LayeredCache layered(search_path, force_read_only);
    for (const auto& info : layered.layers()) {
      if (!info.present) continue;
      auto db = cache::detail::open_for_reading(info.path);
      fn(info, *db);
    }
    return 0;
  });
}

CacheMergeSummary to_summary(const cache::CacheDb::MergeResult& m) {
  CacheMergeSummary s;
  s.binaries_added = m.binaries_added;
  s.binaries_skipped = m.binaries_skipped;
  s.tuning_added = m.tuning_added;
  s.tuning_updated = m.tuning_updated;
  s.damaged_skipped = m.damaged_skipped;
  return s;
}

}  // namespace

std::string default_cache_path() { return cache::LayeredCache::default_search_path(); }

std::string missing_layers(const std::string& search_path) {
  // Presence only: no layer is opened, counted or (under KTUNE_TRUSTED_KEYS) verified for it.
  std::vector<std::string> missing;
  size_t layers = 0;
  cache_call([&] {
    for (const auto& l : cache::LayeredCache(search_path, true).layers()) {
      ++layers;
      if (!l.present) missing.push_back(l.path);
    }
    return 0;
  });
  if (layers == 0) return fmt::format("the search path '{}' names no cache file", search_path);
  return missing.empty() ? std::string() : fmt::format("no cache file at {}", fmt::join(missing, ", "));
}

std::vector<std::string> cache_layer_files(const std::string& search_path) {
  return cache::LayeredCache::layer_files(search_path);
}

std::vector<CacheLayerSummary> cache_layers(const std::string& search_path) {
  std::vector<CacheLayerSummary> out;
  cache_call([&] {
    cache::LayeredCache layered(search_path, true);
    // Under KTUNE_TRUSTED_KEYS, what a trusting runtime serves of each layer's existing rows: the path opened
    // read-only with the trusted keys verifies every layer, so an unsigned one (writable or not) is refused.
    cache::LayeredOptions trust = detail::layered_options(RuntimeOptions::from_env());
    std::optional<cache::LayeredCache> trusted;
    if (!trust.trusted_keys.empty()) {
      trust.force_read_only = true;
      trusted.emplace(search_path, trust);
    }
    const std::vector<cache::LayeredCache::LayerInfo> layers = layered.layers();
    const std::vector<cache::LayeredCache::LayerInfo> trusted_layers =
        trusted ? trusted->layers() : std::vector<cache::LayeredCache::LayerInfo>{};
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& info = layers[i];
      CacheLayerSummary s;
      s.path = info.path;
      s.present = info.present;
      s.note = info.note;
      if (i < trusted_layers.size() && info.present) {
        const auto& t = trusted_layers[i];
        s.served = !t.refused;
        if (t.refused) s.note = t.note.empty() ? "refused by the trust check" : t.note;
      }
      s.writable = info.present && !std::filesystem::exists(info.path) ? false : info.writable;
      if (info.present) {
        auto db = cache::detail::open_for_reading(info.path);
        auto c = db->counts();
        s.binaries = c.binaries;
        s.tuning = c.tuning;
        s.blob_bytes = c.blob_bytes;
        s.schema_version = db->schema_version();
        // What a runtime on this search path could write (this summary itself opened everything read-only):
        // not marked ?ro, not signed (a write would void the signature), and writable by this user.
        s.writable = !info.marked_read_only && db->signatures().empty() && ::access(info.path.c_str(), W_OK) == 0;
      }
      out.push_back(s);
    }
    return 0;
  });
  return out;
}

std::vector<CacheEntry> cache_list(const std::string& search_path, const std::string& family) {
  std::vector<CacheEntry> out;
  for_each_layer(search_path, true, [&](const cache::LayeredCache::LayerInfo& info, cache::CacheDb& db) {
    for (const auto& b : db.list_binaries(family)) {
      CacheEntry e;
      e.layer = info.path;
      e.name = b.name;
      e.family = b.family;
      e.arch = b.arch;
      e.compiler = b.compiler;
      e.compiler_version = b.compiler_version;
      e.ktune_version = b.ktune_version;
      e.digest = b.digest;
      e.blob_size = b.blob_size;
      e.created_at = b.created_at;
      e.compile_ms = b.compile_ms;
      out.push_back(std::move(e));
    }
  });
  return out;
}

std::vector<CacheTuningEntry> cache_list_tuning(const std::string& search_path, const std::string& family) {
  std::vector<CacheTuningEntry> out;
  for_each_layer(search_path, true, [&](const cache::LayeredCache::LayerInfo& info, cache::CacheDb& db) {
    for (const auto& t : db.list_tuning(family)) {
      out.push_back(CacheTuningEntry{info.path, t.family, t.problem_key, t.device_fingerprint, t.ktune_version,
                                     t.winner_config, t.candidates_json, t.tuned_at});
    }
  });
  return out;
}

std::string cache_tuning_first_layer(const std::string& search_path) {
  return cache_call([&] { return cache::LayeredCache(search_path, true).tuning_first_layer(); });
}

namespace {

// Intact rows whose blob does not define the symbols the row names (another kernel's blob filed under this row,
// its digests recomputed): the runtime refuses them at load, and verify, export, merge and sign treat them as
// damaged. Rows of another binary format are never served by this ktune (the key check refuses them).
std::vector<CacheIssue> misfiled_binaries(const std::string& layer, cache::CacheDb& db,
                                          const std::unordered_set<std::string>& damaged) {
  std::vector<CacheIssue> out;
  for (const auto& b : db.list_binaries()) {
    if (damaged.count(b.digest) || b.schema_version != detail::kBinaryFormatVersion) continue;
    cache::BinaryLookup l = db.get_binary(b.digest);
    if (l.status != cache::LookupStatus::hit) continue;
    std::string why = detail::binding_problem(l.record, detail::kAnyKernelCount, "");
    if (!why.empty()) out.push_back(CacheIssue{layer, b.digest, b.name, why});
  }
  return out;
}

// Refuses a file that holds misfiled binaries, naming the first (what `ktune cache verify` lists in full).
void refuse_misfiled(const std::string& path, const char* what) {
  cache::OpenOptions ro;
  ro.read_only = true;
  auto db = cache::CacheDb::open(path, ro);
  const std::vector<CacheIssue> bad = misfiled_binaries(path, *db, {});
  if (!bad.empty())
    throw Error(Status::cache_error, "cache",
                fmt::format("{}: {} holds {} binar{} whose blob is not the kernel its row names (first: {}: {}); "
                            "nothing done (`ktune cache verify` lists them)",
                            what, path, bad.size(), bad.size() == 1 ? "y" : "ies", bad.front().name,
                            bad.front().problem));
}

}  // namespace

std::vector<CacheIssue> cache_verify(const std::string& search_path) {
  std::vector<CacheIssue> out;
  for_each_layer(search_path, true, [&](const cache::LayeredCache::LayerInfo& info, cache::CacheDb& db) {
    std::unordered_set<std::string> damaged;
    for (const auto& i : db.verify()) {
      out.push_back(CacheIssue{info.path, i.digest, i.name, i.problem});
      damaged.insert(i.digest);
    }
    for (auto& i : misfiled_binaries(info.path, db, damaged)) out.push_back(std::move(i));
  });
  return out;
}

int cache_prune(const std::string& search_path, bool stale_compiler, bool stale_ktune, const std::string& family) {
  return cache_call([&] {
    // A prune of a path with no cache behind it (a typo) would create an empty file and report 0 removed.
    if (const std::string why = missing_layers(search_path); !why.empty())
      throw Error(Status::not_found, "cache", "prune: " + why + "; nothing pruned");
    cache::LayeredCache layered(search_path, false);
    cache::CacheDb* db = layered.writable_layer();
    if (!db) throw Error(Status::cache_error, "cache", "prune: " + layered.write_problem() + "; nothing pruned");
    cache::CacheDb::PruneCriteria c;
    if (stale_compiler) {
      c.keep_compiler_version = nvrtc_version_or_empty();
      c.compiler = "nvrtc";  // host objects carry an LLVM target id, judged by the host backend's key instead
      if (c.keep_compiler_version.empty())
        throw Error(Status::no_compiler, "cache", "pruning by compiler version needs NVRTC to know the current version");
    }
    if (stale_ktune) c.keep_ktune_version = version();
    c.family = family;
    return db->prune(c);
  });
}

CacheMergeSummary cache_export(const std::string& search_path, const std::string& dest) {
  return cache_call([&] {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(dest, ec)))
      throw Error(Status::invalid_argument, "cache",
                  fmt::format("export destination {} exists; refusing to overwrite", dest));
    // What ships is what the path names: a layer that is not there fails the export, before anything is
    // created, rather than leaving an image without its rows.
    if (const std::string why = missing_layers(search_path); !why.empty())
      throw Error(Status::not_found, "cache", "export: " + why + "; nothing exported");
    const std::filesystem::path parent = std::filesystem::path(dest).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // export_to reports a failure
    // Every layer is merged into a staging file of this export's own (removed whatever happens), which
    // export_to then compacts into one self-contained file and links into place.
    cache::TempPath staging(dest, "staging");
    CacheMergeSummary total;
    auto out = cache::CacheDb::open(staging.path(), cache::OpenOptions{});
    cache::LayeredCache layered(search_path, true);
    // Under KTUNE_TRUSTED_KEYS an export takes only what a trusting runtime would serve: every layer must carry a
    // valid signature by a trusted key, and only the rows it covers are taken. Otherwise a tampered image (or a
    // writable layer other processes wrote) would come out as an unsigned file that the next `sign` makes valid.
    const std::vector<cache::PublicKey> trusted = detail::layered_options(RuntimeOptions::from_env()).trusted_keys;
    for (const auto& info : layered.layers()) {
      cache::CacheDb::MergeResult m;
      if (trusted.empty()) {
        m = out->merge_from(info.path, version());  // this version's tuning rows over older ones
      } else {
        try {
          m = out->merge_signed_from(info.path, trusted, version());
        } catch (const cache::CacheError& e) {
          throw Error(Status::cache_error, "cache",
                      fmt::format("export under KTUNE_TRUSTED_KEYS: {}; nothing exported (export without "
                                  "KTUNE_TRUSTED_KEYS only rows you vouch for, then sign the result)",
                                  e.what()));
        }
      }
      total.binaries_skipped += m.binaries_skipped;
      total.damaged_skipped += m.damaged_skipped;
    }
    for (const CacheIssue& bad : misfiled_binaries(staging.path(), *out, {})) {  // damaged too: left out
      out->remove_binary(bad.digest);
      total.damaged_skipped++;
    }
    out->export_to(dest);  // compacted copy in rollback-journal mode
    // The rows the exported file holds (a row several layers hold, or one replaced by a later layer's, once).
    cache::OpenOptions read_back;
    read_back.read_only = true;
    const cache::CacheDb::Counts stored = cache::CacheDb::open(dest, read_back)->counts();
    total.binaries_added = static_cast<int>(stored.binaries);
    total.tuning_added = static_cast<int>(stored.tuning);
    return total;
  });
}

CacheMergeSummary cache_merge(const std::string& search_path, const std::string& src,
                              const std::optional<std::string>& public_key_paths) {
  return cache_call([&] {
    std::vector<cache::PublicKey> keys;
    if (public_key_paths) {
      keys = cache::read_public_keys(*public_key_paths);
      if (keys.empty())
        throw Error(Status::invalid_argument, "cache",
                    fmt::format("merge --from {}: --pubkey '{}' names no public key file to check it against", src,
                                *public_key_paths));
    }
    // The source is opened first, so a --from that is not a ktune cache (a typo) creates no destination file.
    cache::detail::open_for_reading(src);
    refuse_misfiled(src, "merge --from");
    if (public_key_paths) {  // a source no trusted key signed creates no destination either
      cache::OpenOptions ro;
      ro.read_only = true;
      const cache::SignatureCheck c = cache::CacheDb::open(src, ro)->check_signature(keys, /*hash_blobs=*/false);
      if (!c.ok())
        throw Error(Status::cache_error, "cache",
                    fmt::format("merge --from {}: its signature is {} for --pubkey '{}'; nothing merged", src,
                                cache::signature_result_name(c.result), *public_key_paths));
    }
    cache::LayeredCache layered(search_path, false);
    cache::CacheDb* db = layered.writable_layer();
    if (!db) throw Error(Status::cache_error, "cache", layered.write_problem());
    return to_summary(public_key_paths ? db->merge_signed_from(src, keys, version()) : db->merge_from(src, version()));
  });
}

std::string cache_keygen(const std::string& secret_path, const std::string& public_path) {
  return cache_call([&] {
    cache::SecretKey key = cache::generate_secret_key();
    cache::write_key_files(key, secret_path, public_path);
    return key.public_key().id();
  });
}

CacheSignatureInfo cache_sign(const std::string& db_path, const std::string& secret_key_path) {
  return cache_call([&] {
    if (db_path.find(':') != std::string::npos)
      throw Error(Status::invalid_argument, "cache",
                  fmt::format("sign takes one cache file, not a search path: {}", db_path));
    if (!std::filesystem::exists(db_path))
      throw Error(Status::not_found, "cache", fmt::format("{}: no such cache file to sign", db_path));
    cache::SecretKey key = cache::read_secret_key(secret_key_path);
    refuse_misfiled(db_path, "sign");  // a signature would vouch for rows the runtime refuses
    cache::SignatureRecord r = cache::sign_file(db_path, key);
    CacheSignatureInfo info;
    info.path = db_path;
    info.key_id = r.key_id;
    info.manifest_sha256 = r.manifest_sha256;
    info.binaries = r.binaries;
    info.tuning = r.tuning;
    return info;
  });
}

std::vector<CacheSignatureStatus> cache_verify_signatures(const std::string& search_path,
                                                          const std::string& public_key_paths) {
  std::vector<cache::PublicKey> keys = cache_call([&] { return cache::read_public_keys(public_key_paths); });
  if (keys.empty())
    throw Error(Status::invalid_argument, "cache", fmt::format("no public key file in '{}'", public_key_paths));
  std::vector<CacheSignatureStatus> out;
  for_each_layer(search_path, true, [&](const cache::LayeredCache::LayerInfo& info, cache::CacheDb& db) {
    cache::SignatureCheck c = db.check_signature(keys, /*hash_blobs=*/true);
    CacheSignatureStatus s;
    s.layer = info.path;
    s.result = cache::signature_result_name(c.result);
    s.valid = c.ok();
    s.key_id = c.key_id;
    s.detail = c.detail;
    s.binaries = c.binaries;
    s.tuning = c.tuning;
    out.push_back(std::move(s));
  });
  return out;
}

}  // namespace ktune
