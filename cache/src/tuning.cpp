// CacheDb: the tuning table, one row per (family, problem_key, device_fingerprint). In schema v2 every row
// carries a row digest over its columns; a row that fails it is a miss (the caller falls back to its default
// config), never a wrong winner.
#include <fmt/format.h>

#include "store_impl.hpp"

namespace ktune::cache {

using detail::Stmt;
using detail::WriteTransaction;

using detail::kTuningColumns;

namespace detail {

void read_tuning_columns(const Stmt& s, TuningRecord& r, int first) {
  r.family = s.text(first);
  r.problem_key = s.text(first + 1);
  r.device_fingerprint = s.text(first + 2);
  r.ktune_version = s.text(first + 3);
  r.winner_config = s.text(first + 4);
  r.candidates_json = s.text(first + 5);
  r.tuned_at = s.int64(first + 6);
}

}  // namespace detail

namespace {

std::string select_columns(int schema_version) {
  return fmt::format("{}, {}", kTuningColumns, schema_version >= 2 ? "row_digest" : "''");
}

// kTuningColumns, then the row digest (column 7).
TuningRecord read_tuning(const Stmt& s) {
  TuningRecord r;
  detail::read_tuning_columns(s, r);
  r.row_digest = s.text(7);
  return r;
}

}  // namespace

namespace detail {

std::vector<std::pair<TuningRecord, std::string>> list_tuning_checked_locked(CacheDb::Impl& db,
                                                                           const std::string& family_filter) {
  Stmt s(db.conn, fmt::format("SELECT {} FROM tuning WHERE (?1 = '' OR family = ?1) "
                              "ORDER BY family, problem_key, device_fingerprint",
                              select_columns(db.schema_version)));
  s.bind(1, family_filter);
  std::vector<std::pair<TuningRecord, std::string>> out;
  while (s.step()) {
    TuningRecord r = read_tuning(s);
    std::string problem = check_tuning_row(db, r);
    out.emplace_back(std::move(r), std::move(problem));
  }
  return out;
}

std::optional<TuningRecord> find_tuning_locked(CacheDb::Impl& db, const std::string& family,
                                               const std::string& problem_key, const std::string& device_fingerprint) {
  Stmt s(db.conn, fmt::format("SELECT {} FROM tuning WHERE family = ? AND problem_key = ? AND device_fingerprint = ?",
                              select_columns(db.schema_version)));
  s.bind(1, family).bind(2, problem_key).bind(3, device_fingerprint);
  if (!s.step()) return std::nullopt;
  return read_tuning(s);
}

std::string check_tuning_lookup(const CacheDb::Impl& db, const TuningRecord& r, const std::string& family,
                                const std::string& problem_key, const std::string& device_fingerprint) {
  if (r.family != family || r.problem_key != problem_key || r.device_fingerprint != device_fingerprint)
    return fmt::format("the row found is stored under {} {} {} (the key index is damaged)", r.family, r.problem_key,
                       r.device_fingerprint);
  return check_tuning_row(db, r);
}

}  // namespace detail

std::optional<TuningRecord> CacheDb::get_tuning_checked(const std::string& family, const std::string& problem_key,
                                                        const std::string& device_fingerprint,
                                                        std::string* problem) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::optional<TuningRecord> found = detail::find_tuning_locked(*impl_, family, problem_key, device_fingerprint);
  if (!found) return std::nullopt;
  const TuningRecord& r = *found;
  if (impl_->own_rows_only && !impl_->own_rows.count(r.row_digest)) return std::nullopt;  // not stored here
  const std::string why = detail::check_tuning_lookup(*impl_, r, family, problem_key, device_fingerprint);
  if (!why.empty()) {
    if (problem)
      *problem = fmt::format("ktune cache {}: tuning row {} {} {} is damaged: {}", impl_->path, family, problem_key,
                             device_fingerprint, why);
    return std::nullopt;
  }
  return found;
}

std::optional<TuningRecord> CacheDb::get_tuning(const std::string& family, const std::string& problem_key,
                                                const std::string& device_fingerprint) {
  return get_tuning_checked(family, problem_key, device_fingerprint, nullptr);
}

namespace detail {

std::string upsert_tuning_locked(CacheDb::Impl& db, const TuningRecord& row) {
  const bool v2 = db.schema_version >= 2;
  // One statement, so a concurrent writer of the same key can never leave a mix of two rows.
  Stmt s(db.conn,
         fmt::format("INSERT INTO tuning({}{}) VALUES (?, ?, ?, ?, ?, ?, ?{}) "
                     "ON CONFLICT(family, problem_key, device_fingerprint) DO UPDATE SET "
                     "ktune_version = excluded.ktune_version, winner_config = excluded.winner_config, "
                     "candidates_json = excluded.candidates_json, tuned_at = excluded.tuned_at{}",
                     kTuningColumns, v2 ? ", row_digest" : "", v2 ? ", ?" : "",
                     v2 ? ", row_digest = excluded.row_digest" : ""));
  s.bind(1, row.family)
      .bind(2, row.problem_key)
      .bind(3, row.device_fingerprint)
      .bind(4, row.ktune_version)
      .bind(5, row.winner_config)
      .bind(6, row.candidates_json)
      .bind(7, row.tuned_at);
  std::string row_digest = v2 ? tuning_row_digest(row) : std::string();
  if (v2) s.bind(8, row_digest);
  s.run();
  return row_digest;
}

}  // namespace detail

void CacheDb::put_tuning(const TuningRecord& r) {
  detail::require_writable(*impl_, "store a tuning result");
  TuningRecord row = r;
  row.tuned_at = r.tuned_at != 0 ? r.tuned_at : detail::unix_now();
  std::lock_guard<std::mutex> lock(impl_->mu);
  WriteTransaction tx(impl_->conn);
  const std::string row_digest = detail::upsert_tuning_locked(*impl_, row);
  tx.commit();
  detail::note_own_row_locked(*impl_, row_digest);
}

std::vector<TuningRecord> CacheDb::list_tuning(const std::string& family_filter) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<TuningRecord> out;
  for (auto& [row, problem] : detail::list_tuning_checked_locked(*impl_, family_filter))
    if (problem.empty()) out.push_back(std::move(row));  // damaged rows: verify() names them
  return out;
}

}  // namespace ktune::cache
