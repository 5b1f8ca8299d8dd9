#include "ktune/cache/layered.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "store_impl.hpp"

namespace ktune::cache {
namespace fs = std::filesystem;

namespace {

std::string home_dir() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return ".";
}

std::string expand_home(const std::string& p) {
  if (p == "~") return home_dir();
  if (p.rfind("~/", 0) == 0) return home_dir() + p.substr(1);
  return p;
}

// Entries are paths; a trailing "?ro" marks a layer read-only whatever its permissions (root in a container
// can write anything, yet an image's shipped cache must stay as it was built).
struct PathEntry {
  std::string path;
  bool read_only = false;
};

std::vector<PathEntry> split_search_path(const std::string& s) {
  std::vector<PathEntry> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) {
      std::string item = s.substr(start, end - start);
      bool ro = item.size() > 3 && item.compare(item.size() - 3, 3, "?ro") == 0;
      if (ro) item.resize(item.size() - 3);
      out.push_back(PathEntry{expand_home(item), ro});
    }
    start = end + 1;
  }
  return out;
}

fs::path dir_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// SQLite in WAL mode writes the file and creates -wal/-shm next to it, so both must be writable.
bool can_write_existing(const std::string& path) {
  return ::access(path.c_str(), R_OK | W_OK) == 0 && ::access(dir_of(path).c_str(), W_OK | X_OK) == 0;
}

// A missing file can be created when its nearest existing ancestor directory is writable (open() creates the
// directories below it).
bool can_create(const std::string& path) {
  std::error_code ec;
  fs::path dir = dir_of(path);
  while (!fs::exists(dir, ec)) {
    fs::path up = dir.parent_path();
    if (up.empty() || up == dir) return false;
    dir = up;
  }
  return fs::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

LayeredCache::LayeredCache(const std::string& search_path, bool force_read_only) : search_path_(search_path) {
  LayeredOptions o;
  o.force_read_only = force_read_only;
  open_layers(search_path, o);
}

LayeredCache::LayeredCache(const std::string& search_path, const LayeredOptions& options)
    : search_path_(search_path) {
  open_layers(search_path, options);
}

namespace {

// A symbolic link whose target does not exist: never a cache file, and never created at its target.
bool is_dangling_link(const std::string& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(path, ec)) && !fs::exists(fs::status(path, ec));
}

}  // namespace

void LayeredCache::open_layers(const std::string& search_path, const LayeredOptions& options) {
  force_read_only_ = options.force_read_only;
  const bool trust = !options.trusted_keys.empty();
  // The layer picked to receive new entries, whether or not it could be opened writable: once a usable cache
  // is picked, no later layer takes its place, so entries never silently go to a different file.
  std::string writer_path;
  for (const PathEntry& entry : split_search_path(search_path)) {
    const std::string& path = entry.path;
    Layer layer;
    layer.info.path = path;
    layer.info.marked_read_only = entry.read_only;
    std::error_code ec;
    layer.info.present = fs::exists(path, ec);
    const bool may_write = !options.force_read_only && !entry.read_only && writer_path.empty();
    const auto fail_writer = [&](const std::string& why) {
      writer_path = path;
      layer.info.write_problem = why;
    };

    if (is_dangling_link(path)) {
      layer.info.refused = true;
      layer.info.note = fmt::format("a symbolic link to {}, which does not exist; refused (a cache file is never "
                                    "created at a link's target)",
                                    fs::read_symlink(path, ec).string());
    } else if (!layer.info.present) {
      if (options.force_read_only || entry.read_only) {
        layer.info.note = "missing; skipped (read-only)";
      } else if (!may_write) {
        layer.info.note = fmt::format("missing; not created (new entries go to {})", writer_path);
      } else if (!can_create(path)) {
        layer.info.note = "missing, and its directory cannot be created or written; skipped";
      } else {
        try {
          layer.db = CacheDb::open(path, OpenOptions{});
          layer.info.present = true;
          layer.info.note = "created";
          writer_path = path;
        } catch (const CacheError& e) {
          layer.info.note = fmt::format("could not be created; skipped: {}", e.what());
        }
      }
    } else {
      std::string why_read_only;
      if (options.force_read_only) {
        why_read_only = "read-only mode";
      } else if (entry.read_only) {
        why_read_only = "marked ?ro in the search path";
      } else if (!may_write) {
        why_read_only = fmt::format("new entries go to {}", writer_path);
      } else if (!can_write_existing(path)) {
        why_read_only = "the file or its directory is not writable";
      } else {
        try {
          layer.db = CacheDb::open(path, OpenOptions{});
          writer_path = path;
        } catch (const SignedCacheError&) {
          // Checked before any write: the file is left exactly as it was signed.
          why_read_only = "it is signed, and a write would void its signature";
        } catch (const detail::SqliteFailure& e) {
          why_read_only = fmt::format("opening it writable failed: {}", e.what());
          // Locked by another writer, an I/O error, a full disk: the file is still where new entries belong,
          // so it is reported and no later layer takes its place. A damaged file is skipped instead.
          if (!e.corrupt()) fail_writer(e.what());
        } catch (const CacheError& e) {
          // Not a usable cache at all (not SQLite, another application's, a newer schema): skipped like a
          // missing file, and the next layer may take new entries.
          why_read_only = fmt::format("opening it writable failed: {}", e.what());
        }
      }
      if (!layer.db) {
        try {
          layer.db = detail::open_for_reading(path);
          layer.info.note = "read-only: " + why_read_only;
        } catch (const CacheError& e) {
          layer.info.note = fmt::format("unusable; skipped: {}", e.what());
          layer.info.refused = true;
        }
      }
      if (layer.db && layer.db->read_only() && trust) {
        try {
          SignatureCheck check = layer.db->check_signature(options.trusted_keys, /*hash_blobs=*/false);
          if (check.ok()) {
            layer.db->restrict_to_rows(check.rows);
            layer.info.signature = check.detail;
          } else {
            layer.db.reset();
            layer.info.refused = true;
            layer.info.note = fmt::format("refused: KTUNE_TRUSTED_KEYS requires read-only layers to carry a valid "
                                          "signature by a trusted key, and this one is {}: {}",
                                          signature_result_name(check.result), check.detail);
          }
        } catch (const CacheError& e) {
          layer.db.reset();
          layer.info.refused = true;
          layer.info.note = fmt::format("refused: its signature could not be checked: {}", e.what());
        }
      }
    }
    if (layer.db && !layer.db->read_only()) {
      writable_ = layer.db.get();
      layer.info.writable = true;
      if (trust) {
        // Nobody vouches for what is already in a writable file: anyone who can write it could have put it
        // there. Only what this process stores from now on is served from it.
        layer.db->serve_only_rows_stored_here();
        // The count is for the note only: a file too damaged to count is still served nothing it holds.
        try {
          const CacheDb::Counts before = layer.db->counts();
          if (before.binaries + before.tuning > 0)
            layer.info.note = fmt::format("writable; KTUNE_TRUSTED_KEYS: only entries this process stores are "
                                          "served from it (the {} binaries and {} tuning rows already in it are "
                                          "not used)",
                                          before.binaries, before.tuning);
        } catch (const CacheError& e) {
          layer.info.note = fmt::format("writable; KTUNE_TRUSTED_KEYS: only entries this process stores are served "
                                        "from it (what it holds could not be counted: {})",
                                        e.what());
        }
      }
    }
    // In read-only mode, the layer a writable process of this search path would write to (the first layer not
    // marked ?ro that is missing but creatable, or present, writable and unsigned) still comes first for tuning
    // rows, so a read-only process (a replay, KTUNE_CACHE_READONLY=1) runs the rows a serving process runs.
    if (options.force_read_only && !entry.read_only && !tuning_writer_decided_) {
      if (!layer.info.present && !is_dangling_link(path)) {
        tuning_writer_decided_ = can_create(path);  // created empty by a writer: no rows to put first
      } else if (layer.db && can_write_existing(path)) {
        try {
          if (layer.db->signatures().empty()) {
            tuning_first_ = layer.db.get();
            tuning_writer_decided_ = true;
          }
        } catch (const CacheError&) {  // unreadable signatures: a writer would not take it either
        }
      }
    }
    layer.info.open = layer.db != nullptr;
    layers_.push_back(std::move(layer));
  }
  if (writable_) tuning_first_ = writable_;
  // get_tuning's search order, fixed with the layers: tuning_first_, then the other open layers in path order.
  for (const auto& layer : layers_)
    if (layer.db && layer.db.get() == tuning_first_) tuning_order_.push_back(&layer);
  for (const auto& layer : layers_)
    if (layer.db && layer.db.get() != tuning_first_) tuning_order_.push_back(&layer);
}

LayeredCache::~LayeredCache() = default;

std::string LayeredCache::default_search_path() {
  if (const char* env = std::getenv("KTUNE_CACHE"); env && *env) return env;
  // XDG base directories: $XDG_CACHE_HOME when absolute (the spec ignores relative ones), else ~/.cache.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  return (xdg && xdg[0] == '/' ? std::string(xdg) : home_dir() + "/.cache") + "/ktune/ktune.db";
}

std::vector<std::string> LayeredCache::layer_files(const std::string& search_path) {
  std::vector<std::string> out;
  for (const PathEntry& entry : split_search_path(search_path)) out.push_back(entry.path);
  return out;
}

std::string LayeredCache::tuning_first_layer() const {
  for (const auto& l : layers_)
    if (l.db && l.db.get() == tuning_first_) return l.info.path;
  return {};
}

std::vector<LayeredCache::LayerInfo> LayeredCache::layers() const {
  std::vector<LayerInfo> out;
  out.reserve(layers_.size());
  for (const auto& l : layers_) out.push_back(l.info);
  return out;
}

std::vector<std::string> LayeredCache::refused() const {
  std::vector<std::string> out;
  for (const auto& l : layers_)
    if (l.info.refused) out.push_back(fmt::format("{}: {}", l.info.path, l.info.note));
  return out;
}

template <class F>
BinaryLookup LayeredCache::search_binary(F&& lookup_in_layer) {
  BinaryLookup result;      // miss unless something is found
  std::string skipped;      // every damaged copy or failing layer passed over, for the caller's log
  std::string damaged_here; // digest of a damaged copy met in the writable layer
  int damaged = 0;          // damaged copies passed over
  for (const auto& layer : layers_) {
    if (!layer.db) continue;
    BinaryLookup l;
    try {
      l = lookup_in_layer(*layer.db);
    } catch (const CacheError& e) {
      std::string what = fmt::format("{}: lookup failed: {}", layer.info.path, e.what());
      count_problem(false);
      skipped += (skipped.empty() ? "" : "; ") + what;
      continue;
    }
    if (l.status == LookupStatus::hit) {
      if (std::string why = quarantined_why(l.record.blob_sha256); !why.empty()) {
        l.status = LookupStatus::damaged;
        l.detail = "quarantined: " + why;
        l.record.blob.clear();
        l.record.blob.shrink_to_fit();
      }
    }
    if (l.status == LookupStatus::hit) {
      l.detail = skipped;  // what was passed over on the way to this copy; empty for a clean hit
      l.damaged_skipped = damaged;
      if (!damaged_here.empty() && damaged_here == l.record.digest) {
        // Heal the writable layer with the intact copy (put_binary replaces a damaged row), so the damage is
        // not met again on every lookup.
        try {
          writable_->put_binary(l.record);
          l.detail += "; repaired the copy in " + writable_->path();
        } catch (const CacheError& e) {
          count_problem(false);
          l.detail += fmt::format("; repairing the copy in {} failed: {}", writable_->path(), e.what());
        }
      }
      return l;
    }
    if (l.status == LookupStatus::damaged) {
      std::string what = fmt::format("{}: damaged entry {} ({}): {}", layer.info.path, l.record.digest,
                                     l.record.name, l.detail);
      count_problem(true);
      ++damaged;
      skipped += (skipped.empty() ? "" : "; ") + what;
      if (layer.db.get() == writable_) damaged_here = l.record.digest;
      if (result.status != LookupStatus::damaged) {
        result.status = LookupStatus::damaged;
        result.record = std::move(l.record);  // metadata only; check_binary already dropped the blob
      }
    }
  }
  result.detail = std::move(skipped);
  result.damaged_skipped = damaged;
  return result;
}

BinaryLookup LayeredCache::get_binary(const std::string& digest) {
  return search_binary([&](CacheDb& db) { return db.get_binary(digest); });
}

BinaryLookup LayeredCache::get_binary(const std::string& digest, const BinaryExpectation& expect) {
  return search_binary([&](CacheDb& db) { return db.get_binary(digest, expect); });
}

BinaryLookup LayeredCache::find_binary_any_compiler_version(const std::string& source_digest,
                                                            const std::string& arch, const std::string& compiler,
                                                            const std::string& options,
                                                            const std::string& ktune_version) {
  std::unordered_set<std::string> skip;
  {
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    for (const auto& q : quarantined_) skip.insert(q.first);
  }
  return search_binary([&](CacheDb& db) {
    return db.find_binary_any_compiler_version(source_digest, arch, compiler, options, ktune_version, skip);
  });
}

std::string LayeredCache::quarantined_why(const std::string& blob_sha256) const {
  std::lock_guard<std::mutex> lock(quarantine_mu_);
  auto it = quarantined_.find(blob_sha256);
  return it == quarantined_.end() ? std::string() : it->second;
}

std::string LayeredCache::quarantine(const std::string& digest, const std::string& blob_sha256,
                                     const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(quarantine_mu_);
    quarantined_.emplace(blob_sha256, why);
  }
  if (!writable_) return {};
  try {
    BinaryLookup here = writable_->get_binary(digest);
    if (here.status != LookupStatus::hit || here.record.blob_sha256 != blob_sha256) return {};
    if (writable_->remove_binary(digest)) return "; deleted from " + writable_->path();
  } catch (const CacheError& e) {
    count_problem(false);
    return "; deleting it from " + writable_->path() + " failed: " + e.what();
  }
  return {};
}

std::string LayeredCache::layer_notes() const {
  std::string out;
  for (const auto& l : layers_)
    out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", l.info.path, l.info.note.empty() ? "?" : l.info.note);
  return out.empty() ? "no layers" : out;
}

std::string LayeredCache::write_problem() const {
  if (writable_ || force_read_only_) return {};
  for (const auto& l : layers_)
    if (!l.info.write_problem.empty())
      return fmt::format("no writable cache layer in KTUNE_CACHE={}: new entries go to {}, which could not be "
                         "opened writable: {}",
                         search_path_, l.info.path, l.info.write_problem);
  return fmt::format("no writable cache layer in KTUNE_CACHE={} ({}); add a writable path to KTUNE_CACHE",
                     search_path_, layer_notes());
}

void LayeredCache::throw_no_writable_layer(const char* operation) const {
  std::string why = write_problem();
  if (why.empty())
    why = fmt::format("no writable cache layer in KTUNE_CACHE={}: it was opened read-only ({})", search_path_,
                      layer_notes());
  throw CacheError(fmt::format("ktune cache: cannot {}: {}", operation, why));
}

bool LayeredCache::put_binary(const BinaryRecord& r) {
  if (!writable_) throw_no_writable_layer("store a binary");
  return writable_->put_binary(r);
}

std::optional<TuningRecord> LayeredCache::get_tuning(const std::string& family, const std::string& problem_key,
                                                     const std::string& device_fingerprint,
                                                     const std::string& ktune_version,
                                                     std::string* other_version, std::string* passed_over) {
  auto pass_over = [&](const std::string& what, bool damaged) {
    count_problem(damaged);
    if (passed_over) *passed_over += (passed_over->empty() ? "" : "; ") + what;
  };
  // The writable layer first: a row this machine measured (a warmup, `ktune tune`, --retune) stands over a row a
  // read-only image ships for the same key, so what a process tunes is what the next one runs; then the
  // read-only layers in their order (tuning_order_).
  for (const Layer* lp : tuning_order_) {
    const Layer& layer = *lp;
    try {
      std::string problem;
      if (auto t = layer.db->get_tuning_checked(family, problem_key, device_fingerprint, &problem)) {
        if (ktune_version.empty() || t->ktune_version == ktune_version) return t;
        if (other_version && other_version->empty()) *other_version = t->ktune_version;
        continue;  // tuned by another ktune build: stale, not damaged
      }
      if (!problem.empty()) pass_over(problem, true);  // names the file
    } catch (const CacheError& e) {
      pass_over(fmt::format("{}: tuning lookup failed: {}", layer.info.path, e.what()), false);
    }
  }
  return std::nullopt;
}

void LayeredCache::put_tuning(const TuningRecord& r) {
  if (!writable_) throw_no_writable_layer("store a tuning result");
  writable_->put_tuning(r);
}

}  // namespace ktune::cache
