// CacheDb: whole-file operations — verify, prune, export, merge.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ktune/cache/signing.hpp"
#include "ktune/cache/temp_path.hpp"
#include "store_impl.hpp"

namespace ktune::cache {

using detail::Stmt;
using detail::WriteTransaction;
namespace fs = std::filesystem;

std::vector<CacheDb::VerifyIssue> CacheDb::verify() {
  std::vector<VerifyIssue> issues;
  std::vector<std::pair<std::string, std::string>> entries;  // digest, name
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    try {
      Stmt check(impl_->conn, "PRAGMA integrity_check");
      while (check.step()) {
        std::string msg = check.text(0);
        if (msg != "ok") issues.push_back({"", "", "SQLite integrity_check: " + msg});
      }
    } catch (const detail::SqliteFailure& e) {
      if (!e.corrupt()) throw;
      issues.push_back({"", "", e.what()});
    }
    try {
      Stmt list(impl_->conn, "SELECT digest, name FROM binaries ORDER BY family, name");
      while (list.step()) entries.emplace_back(list.text(0), list.text(1));
    } catch (const detail::SqliteFailure& e) {
      if (!e.corrupt()) throw;
      issues.push_back({"", "", std::string("cannot list every binary: ") + e.what()});
    }
  }
  // Each blob is loaded and hashed on its own, so other threads are not held up for the whole scan.
  for (const auto& [digest, name] : entries) {
    BinaryLookup l = detail::lookup_binary(*impl_, digest);
    if (l.status == LookupStatus::damaged) issues.push_back({digest, name, l.detail, {}});
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  try {
    for (const auto& [t, problem] : detail::list_tuning_checked_locked(*impl_, "")) {
      if (problem.empty()) continue;
      issues.push_back({"", fmt::format("tuning {} {} {}", t.family, t.problem_key, t.device_fingerprint), problem,
                        t.family + "\n" + t.problem_key + "\n" + t.device_fingerprint});
    }
  } catch (const detail::SqliteFailure& e) {
    if (!e.corrupt()) throw;
    issues.push_back({"", "", std::string("cannot check every tuning row: ") + e.what(), {}});
  }
  return issues;
}

int CacheDb::prune(const PruneCriteria& c) {
  detail::require_writable(*impl_, "prune");
  std::vector<std::string> outdated, maybe_damaged;
  for (const BinaryInfo& info : list_binaries(c.family)) {
    const bool compiler_applies = c.compiler.empty() || info.compiler == c.compiler;
    if ((!c.keep_compiler_version.empty() && compiler_applies && info.compiler_version != c.keep_compiler_version) ||
        (!c.keep_ktune_version.empty() && info.ktune_version != c.keep_ktune_version)) {
      outdated.push_back(info.digest);
    } else if (c.remove_damaged && detail::lookup_binary(*impl_, info.digest).status == LookupStatus::damaged) {
      maybe_damaged.push_back(info.digest);
    }
  }

  std::lock_guard<std::mutex> lock(impl_->mu);
  WriteTransaction tx(impl_->conn);
  int removed = 0;
  Stmt del(impl_->conn, "DELETE FROM binaries WHERE digest = ?");
  auto remove = [&](const std::string& digest) {
    del.bind(1, digest).run();
    removed += sqlite3_changes(impl_->conn.get());
    del.reset();
  };
  for (const auto& d : outdated) remove(d);
  // Checked again under the write lock: another process may have repaired the entry since the scan above.
  for (const auto& d : maybe_damaged)
    if (detail::lookup_binary(*impl_, d, /*locked=*/true).status == LookupStatus::damaged) remove(d);
  if (c.remove_damaged) {
    Stmt t(impl_->conn, "DELETE FROM tuning WHERE family = ? AND problem_key = ? AND device_fingerprint = ?");
    for (const auto& [row, problem] : detail::list_tuning_checked_locked(*impl_, c.family)) {
      if (problem.empty()) continue;
      t.bind(1, row.family).bind(2, row.problem_key).bind(3, row.device_fingerprint).run();
      removed += sqlite3_changes(impl_->conn.get());
      t.reset();
    }
  }
  if (!c.keep_ktune_version.empty()) {
    Stmt t(impl_->conn, "DELETE FROM tuning WHERE ktune_version <> ?1 AND (?2 = '' OR family = ?2)");
    t.bind(1, c.keep_ktune_version).bind(2, c.family).run();
    removed += sqlite3_changes(impl_->conn.get());
  }
  tx.commit();
  return removed;
}

namespace {

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CacheError(fmt::format("ktune cache export {}: cannot reopen to sync: {}", path, std::strerror(errno)));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw CacheError(fmt::format("ktune cache export {}: fsync failed: {}", path, std::strerror(err)));
}

// Moves tmp to dest without ever replacing an existing dest: link() fails with EEXIST where rename() would not.
void publish_no_replace(const std::string& tmp, const std::string& dest) {
  if (::link(tmp.c_str(), dest.c_str()) == 0) {
    ::unlink(tmp.c_str());
    return;
  }
  int err = errno;
  if (err == EEXIST)
    throw CacheError(fmt::format("ktune cache export: {} already exists; refusing to overwrite it", dest));
  // Filesystems without hard links: check, then rename (a small window, acceptable for an offline tool).
  std::error_code ec;
  if (fs::exists(dest, ec))
    throw CacheError(fmt::format("ktune cache export: {} already exists; refusing to overwrite it", dest));
  fs::rename(tmp, dest, ec);
  if (ec)
    throw CacheError(fmt::format("ktune cache export: cannot move {} to {}: {} (link failed: {})", tmp, dest,
                                 ec.message(), std::strerror(err)));
}

}  // namespace

void CacheDb::export_to(const std::string& dest_path) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dest_path, ec)))
    throw CacheError(fmt::format("ktune cache export: {} already exists; refusing to overwrite it", dest_path));
  const fs::path parent = fs::path(dest_path).parent_path();
  if (!parent.empty() && !fs::create_directories(parent, ec) && ec)
    throw CacheError(fmt::format("ktune cache export: cannot create the directory {}: {}", parent.string(),
                                 ec.message()));

  std::vector<std::string> damaged;
  std::vector<std::string> damaged_tuning;  // "family\nproblem_key\ndevice_fingerprint"
  for (const VerifyIssue& issue : verify()) {
    if (!issue.tuning_key.empty()) {
      damaged_tuning.push_back(issue.tuning_key);
      continue;
    }
    if (issue.digest.empty())
      throw CacheError(fmt::format("ktune cache {}: refusing to export a file that fails verification: {}",
                                   path(), issue.problem));
    damaged.push_back(issue.digest);
  }

  TempPath tmp(dest_path, "tmp");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // A read-only connection was opened with URI names enabled, so the target must be spelled as a URI there.
    Stmt vac(impl_->conn, "VACUUM INTO ?");
    vac.bind(1, impl_->read_only ? "file:" + detail::uri_path(tmp.path()) : tmp.path()).run();
  }
  {
    detail::Connection copy =
        detail::open_connection(tmp.path(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, tmp.path());
    if (!damaged.empty() || !damaged_tuning.empty()) {
      WriteTransaction tx(copy);
      Stmt del(copy, "DELETE FROM binaries WHERE digest = ?");
      for (const auto& d : damaged) {
        del.bind(1, d).run();
        del.reset();
      }
      Stmt del_t(copy, "DELETE FROM tuning WHERE family || char(10) || problem_key || char(10) || "
                       "device_fingerprint = ?");
      for (const auto& k : damaged_tuning) {
        del_t.bind(1, k).run();
        del_t.reset();
      }
      // Signatures cover the rows as they were; with rows removed they no longer match, so they go too.
      if (impl_->schema_version >= 2) copy.exec("DELETE FROM signatures", "dropping stale signatures");
      tx.commit();
      copy.exec("VACUUM", "compacting the exported copy");
    }
    // A shipped image may sit on a read-only filesystem, where a WAL file could not even be opened.
    Stmt mode(copy, "PRAGMA journal_mode = DELETE");
    mode.run();
  }
  fsync_file(tmp.path());
  publish_no_replace(tmp.path(), dest_path);
  tmp.keep();  // it is dest now (or was unlinked after linking)
}

namespace {

// Which of two intact rows for one key a merge keeps: a row of the preferred ktune version over one of another
// version (when a version is preferred), then the later tuned_at, and between rows tuned in the same second the
// one whose row digest (a hash of all its columns) sorts first. That is a total order over distinct rows, so
// merging the same files in any order, or into a cache already holding some of them, keeps the same row for
// every key (A+B == B+A): caches tuned on several hosts of one GPU type combine deterministically.
bool tuning_row_wins(const TuningRecord& incoming, const TuningRecord& current, const std::string& prefer) {
  if (!prefer.empty()) {
    const bool in_preferred = incoming.ktune_version == prefer, cur_preferred = current.ktune_version == prefer;
    if (in_preferred != cur_preferred) return in_preferred;
  }
  if (incoming.tuned_at != current.tuned_at) return incoming.tuned_at > current.tuned_at;
  return detail::tuning_row_digest(incoming) < detail::tuning_row_digest(current);
}

}  // namespace

CacheDb::MergeResult CacheDb::merge_from(const std::string& src_path, const std::string& prefer_ktune_version) {
  detail::require_writable(*impl_, "merge into it");
  return merge_rows_from(*detail::open_for_reading(src_path), prefer_ktune_version);
}

CacheDb::MergeResult CacheDb::merge_signed_from(const std::string& src_path, const std::vector<PublicKey>& trusted,
                                               const std::string& prefer_ktune_version) {
  detail::require_writable(*impl_, "merge into it");
  if (trusted.empty())
    throw CacheError(fmt::format("ktune cache merge {}: no trusted public key given to check it against", src_path));
  // Checked and read through one connection, and restricted to the rows the signature covers, so nothing
  // written to the source after the check is imported.
  std::unique_ptr<CacheDb> src = detail::open_for_reading(src_path);
  const SignatureCheck check = src->check_signature(trusted, /*hash_blobs=*/true);
  if (!check.ok())
    throw CacheError(fmt::format("ktune cache merge: refusing {}: its signature is {}: {}", src_path,
                                 signature_result_name(check.result), check.detail));
  src->restrict_to_rows(check.rows);
  return merge_rows_from(*src, prefer_ktune_version);
}

CacheDb::MergeResult CacheDb::merge_rows_from(CacheDb& source, const std::string& prefer_ktune_version) {
  CacheDb* src = &source;  // get_binary and the tuning list apply src's row checks (and signed-row restriction)
  MergeResult result;

  for (const BinaryInfo& info : src->list_binaries()) {
    BinaryLookup l = src->get_binary(info.digest);
    if (l.status == LookupStatus::damaged) {
      ++result.damaged_skipped;
    } else if (l.status == LookupStatus::hit) {
      if (put_binary_row(l.record, /*lowest_row_digest_wins=*/true)) {
        ++result.binaries_added;
      } else {
        ++result.binaries_skipped;
      }
    }
  }

  std::vector<std::pair<TuningRecord, std::string>> src_tuning;
  {
    std::lock_guard<std::mutex> lock(src->impl_->mu);
    src_tuning = detail::list_tuning_checked_locked(*src->impl_, "");
  }
  for (const auto& [t, problem] : src_tuning) {
    if (!problem.empty()) {
      ++result.damaged_skipped;
      continue;
    }
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTransaction tx(impl_->conn);
    const std::optional<TuningRecord> ours =
        detail::find_tuning_locked(*impl_, t.family, t.problem_key, t.device_fingerprint);
    const bool exists = ours.has_value();
    // A damaged row of ours is replaced by any intact one; otherwise the rule decides (tx rolls back: no change).
    if (exists &&
        detail::check_tuning_lookup(*impl_, *ours, t.family, t.problem_key, t.device_fingerprint).empty() &&
        !tuning_row_wins(t, *ours, prefer_ktune_version))
      continue;
    detail::upsert_tuning_locked(*impl_, t);
    tx.commit();
    ++(exists ? result.tuning_updated : result.tuning_added);
  }
  return result;
}

}  // namespace ktune::cache
