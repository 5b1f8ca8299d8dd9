// CacheDb: the binaries table. Every read is verified against the recorded size and SHA-256 before it is
// returned as a hit; hashing happens outside the connection lock so threads only serialise on SQLite itself.
#include <algorithm>
#include <functional>
#include <utility>

#include <fmt/format.h>

#include "ktune/cache/sha256.hpp"
#include "store_impl.hpp"

namespace ktune::cache {

using detail::Stmt;
using detail::WriteTransaction;

namespace detail {

void read_binary_columns(const Stmt& s, BinaryRecord& r, int64_t& blob_size) {
  r.digest = s.text(0);
  r.family = s.text(1);
  r.name = s.text(2);
  r.arch = s.text(3);
  r.compiler = s.text(4);
  r.compiler_version = s.text(5);
  r.options = s.text(6);
  r.source_digest = s.text(7);
  r.ktune_version = s.text(8);
  r.schema_version = static_cast<int>(s.int64(9));
  r.entry_points = s.text(10);
  r.blob_sha256 = s.text(11);
  r.compile_ms = s.real(12);
  r.created_at = s.int64(13);
  blob_size = s.int64(14);
}

namespace {

// read_binary_columns plus the row digest (column 15 of binary_columns_with_row_digest).
void read_row_columns(const Stmt& s, BinaryRecord& r, int64_t& blob_size) {
  read_binary_columns(s, r, blob_size);
  r.row_digest = s.text(15);
}

BinaryInfo to_info(BinaryRecord&& r, int64_t blob_size) {
  BinaryInfo i;
  i.digest = std::move(r.digest);
  i.family = std::move(r.family);
  i.name = std::move(r.name);
  i.arch = std::move(r.arch);
  i.compiler = std::move(r.compiler);
  i.compiler_version = std::move(r.compiler_version);
  i.options = std::move(r.options);
  i.source_digest = std::move(r.source_digest);
  i.ktune_version = std::move(r.ktune_version);
  i.schema_version = r.schema_version;
  i.entry_points = std::move(r.entry_points);
  i.blob_sha256 = std::move(r.blob_sha256);
  i.compile_ms = r.compile_ms;
  i.created_at = r.created_at;
  i.blob_size = blob_size;
  return i;
}

// Binds every column of `r` in kBinaryColumns order, then the row digest (v2 only), then the blob. Returns the
// row digest bound ("" in a v1 file).
std::string bind_record(Stmt& s, int schema_version, const BinaryRecord& r, const std::string& blob_sha256,
                        int64_t created_at) {
  s.bind(1, r.digest)
      .bind(2, r.family)
      .bind(3, r.name)
      .bind(4, r.arch)
      .bind(5, r.compiler)
      .bind(6, r.compiler_version)
      .bind(7, r.options)
      .bind(8, r.source_digest)
      .bind(9, r.ktune_version)
      .bind(10, static_cast<int64_t>(r.schema_version))
      .bind(11, r.entry_points)
      .bind(12, blob_sha256)
      .bind(13, r.compile_ms)
      .bind(14, created_at)
      .bind(15, static_cast<int64_t>(r.blob.size()));
  if (schema_version < 2) {
    s.bind_blob(16, r.blob);
    return {};
  }
  BinaryRecord stored_as = r;  // the columns as they will be stored (created_at filled in)
  stored_as.blob.clear();
  stored_as.created_at = created_at;
  std::string row_digest = binary_row_digest(stored_as, blob_sha256, static_cast<int64_t>(r.blob.size()));
  s.bind(16, row_digest);
  s.bind_blob(17, r.blob);
  return row_digest;
}

std::string insert_sql(int schema_version, const char* verb) {
  if (schema_version >= 2)
    return fmt::format("{} INTO binaries({}, row_digest, blob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                       "?, ?)",
                       verb, kBinaryColumns);
  return fmt::format("{} INTO binaries({}, blob) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", verb,
                     kBinaryColumns);
}

// The columns that make up the key: a row stored under a digest must agree with a record put under it.
BinaryExpectation key_columns_of(const BinaryRecord& r) {
  BinaryExpectation e;
  e.family = r.family;
  e.arch = r.arch;
  e.compiler = r.compiler;
  e.compiler_version = r.compiler_version;
  e.options = r.options;
  e.source_digest = r.source_digest;
  e.ktune_version = r.ktune_version;
  e.schema_version = r.schema_version;
  return e;
}

}  // namespace

std::optional<StoredBinary> load_binary(CacheDb::Impl& db, const std::string& digest) {
  std::lock_guard<std::mutex> lock(db.mu);
  return load_binary_locked(db, digest);
}

std::optional<StoredBinary> load_binary_locked(CacheDb::Impl& db, const std::string& digest) {
  Stmt s(db.conn, fmt::format("SELECT {}, blob FROM binaries WHERE digest = ?",
                               binary_columns_with_row_digest(db.schema_version)));
  s.bind(1, digest);
  if (!s.step()) return std::nullopt;
  StoredBinary row;
  row.asked_digest = digest;
  read_row_columns(s, row.record, row.blob_size);
  row.hidden = db.own_rows_only && !db.own_rows.count(row.record.row_digest);
  row.record.blob = s.blob(16);
  return row;
}

BinaryLookup check_binary(const CacheDb::Impl& db, StoredBinary&& row, const BinaryExpectation* expect) {
  BinaryLookup out;
  out.record = std::move(row.record);
  auto& r = out.record;
  if (r.digest != row.asked_digest) {
    out.detail = fmt::format("the row found under digest {} is stored under {} (the digest index is damaged)",
                             row.asked_digest, r.digest);
    r.digest = row.asked_digest;
  } else if (static_cast<int64_t>(r.blob.size()) != row.blob_size) {
    out.detail = fmt::format("blob is {} bytes but {} were written", r.blob.size(), row.blob_size);
  } else {
    std::string actual = sha256_hex(r.blob.data(), r.blob.size());
    if (actual != r.blob_sha256)
      out.detail = fmt::format("blob sha256 is {} but {} was written", actual, r.blob_sha256);
  }
  if (out.detail.empty()) out.detail = check_binary_row(db, r, row.blob_size);
  if (out.detail.empty() && expect) out.detail = check_expectation(r, *expect);
  if (out.detail.empty()) {
    out.status = LookupStatus::hit;
  } else {
    out.status = LookupStatus::damaged;
    r.blob.clear();
    r.blob.shrink_to_fit();
  }
  return out;
}

BinaryLookup lookup_binary(CacheDb::Impl& db, const std::string& digest, bool locked,
                           const BinaryExpectation* expect) {
  try {
    std::optional<StoredBinary> row = locked ? load_binary_locked(db, digest) : load_binary(db, digest);
    if (!row || row->hidden) return BinaryLookup{};
    return check_binary(db, std::move(*row), expect);
  } catch (const SqliteFailure& e) {
    if (!e.corrupt()) throw;
    BinaryLookup out;
    out.status = LookupStatus::damaged;
    out.record.digest = digest;
    out.detail = e.what();
    return out;
  }
}

}  // namespace detail

BinaryLookup CacheDb::get_binary(const std::string& digest) { return detail::lookup_binary(*impl_, digest); }

BinaryLookup CacheDb::get_binary(const std::string& digest, const BinaryExpectation& expect) {
  return detail::lookup_binary(*impl_, digest, false, &expect);
}

BinaryLookup CacheDb::find_binary_any_compiler_version(const std::string& source_digest, const std::string& arch,
                                                       const std::string& compiler, const std::string& options,
                                                       const std::string& ktune_version,
                                                       const std::unordered_set<std::string>& skip_blobs) {
  // Candidate digests first (no blobs), newest first; then each is loaded and verified on its own. The order is
  // taken from the values as read (those the row digest and a signature cover), with the digest as tie-break,
  // not from SQL: ORDER BY sorts by storage class and rowid, which an edit can change without changing a
  // covered value (created_at rewritten as the text '1000x' still reads as 1000), and so pick another row.
  std::vector<std::pair<int64_t, std::string>> candidates;  // (created_at, digest)
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(impl_->conn,
           "SELECT digest, blob_sha256, created_at FROM binaries WHERE source_digest = ? AND arch = ? "
           "AND compiler = ? AND options = ? AND ktune_version = ?");
    s.bind(1, source_digest).bind(2, arch).bind(3, compiler).bind(4, options).bind(5, ktune_version);
    while (s.step())
      if (!skip_blobs.count(s.text(1))) candidates.emplace_back(s.int64(2), s.text(0));
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  // A candidate must carry the columns it was selected by: a damaged index can list another row's digest.
  BinaryExpectation same_source;
  same_source.source_digest = source_digest;
  same_source.arch = arch;
  same_source.compiler = compiler;
  same_source.options = options;
  same_source.ktune_version = ktune_version;
  BinaryLookup damaged;
  for (const auto& [created_at, d] : candidates) {
    BinaryLookup l = detail::lookup_binary(*impl_, d, false, &same_source);
    if (l.status == LookupStatus::hit) return l;
    if (l.status == LookupStatus::damaged && damaged.status != LookupStatus::damaged) damaged = std::move(l);
  }
  return damaged;  // miss when there was no candidate at all
}

bool CacheDb::put_binary(const BinaryRecord& r) { return put_binary_row(r, /*lowest_row_digest_wins=*/false); }

bool CacheDb::put_binary_row(const BinaryRecord& r, bool lowest_row_digest_wins) {
  detail::require_writable(*impl_, "store a binary");
  if (r.digest.empty()) throw CacheError(fmt::format("ktune cache {}: put_binary with an empty digest", path()));
  const std::string actual = sha256_hex(r.blob.data(), r.blob.size());
  if (!r.blob_sha256.empty() && r.blob_sha256 != actual)
    throw CacheError(fmt::format("ktune cache {}: refusing to store {} ({}): blob_sha256 says {} but the blob "
                                 "hashes to {}",
                                 path(), r.name, r.digest, r.blob_sha256, actual));
  const int64_t created_at = r.created_at != 0 ? r.created_at : detail::unix_now();

  std::lock_guard<std::mutex> lock(impl_->mu);
  const int version = impl_->schema_version;
  WriteTransaction tx(impl_->conn);
  Stmt ins(impl_->conn, detail::insert_sql(version, "INSERT OR IGNORE"));
  const std::string row_digest = detail::bind_record(ins, version, r, actual, created_at);
  ins.run();
  bool stored = sqlite3_changes(impl_->conn.get()) > 0;
  if (!stored) {
    // The digest exists. If that copy is damaged (blob, row digest, or key columns that disagree with this
    // record's), this put is the repair: replace it. Otherwise keep it.
    const BinaryExpectation same_key = detail::key_columns_of(r);
    bool damaged = true, loses = false;
    try {
      std::optional<detail::StoredBinary> old = detail::load_binary_locked(*impl_, r.digest);
      if (old) {
        const std::string old_row_digest =
            detail::binary_row_digest(old->record, old->record.blob_sha256, old->blob_size);
        // Rows outside a signed-row restriction are not damaged for this purpose: the restriction is about
        // serving, and a restricted CacheDb is read-only anyway. Another writer's intact row (hidden under
        // serve_only_rows_stored_here) is kept too: it is only not served here.
        damaged = detail::check_binary(*impl_, std::move(*old), &same_key).status != LookupStatus::hit;
        // Two intact rows under one digest (the same key compiled on two hosts: blobs differ in NVRTC's
        // per-process symbol names, and in created_at and compile_ms): a merge keeps the one whose row digest
        // sorts first, so the file does not depend on the order its sources came in.
        loses = lowest_row_digest_wins && !row_digest.empty() && row_digest < old_row_digest;  // "": a v1 file
      }
    } catch (const detail::SqliteFailure& e) {
      if (!e.corrupt()) throw;
    }
    if (damaged || loses) {
      Stmt rep(impl_->conn, detail::insert_sql(version, "INSERT OR REPLACE"));
      detail::bind_record(rep, version, r, actual, created_at);
      rep.run();
      stored = true;
    }
  }
  tx.commit();
  if (stored) detail::note_own_row_locked(*impl_, row_digest);
  return stored;
}

bool CacheDb::remove_binary(const std::string& digest) {
  detail::require_writable(*impl_, "remove a binary");
  std::lock_guard<std::mutex> lock(impl_->mu);
  WriteTransaction tx(impl_->conn);
  Stmt s(impl_->conn, "DELETE FROM binaries WHERE digest = ?");
  s.bind(1, digest).run();
  bool removed = sqlite3_changes(impl_->conn.get()) > 0;
  tx.commit();
  return removed;
}

std::vector<BinaryInfo> CacheDb::list_binaries(const std::string& family_filter) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt s(impl_->conn, fmt::format("SELECT {} FROM binaries WHERE (?1 = '' OR family = ?1) ORDER BY family, name",
                                  detail::kBinaryColumns));
  s.bind(1, family_filter);
  std::vector<BinaryInfo> out;
  while (s.step()) {
    BinaryRecord r;
    int64_t size = 0;
    detail::read_binary_columns(s, r, size);
    out.push_back(detail::to_info(std::move(r), size));
  }
  return out;
}

}  // namespace ktune::cache
