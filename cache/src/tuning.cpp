// CacheDb: the tuning table, one row per (family, problem_key, device_fingerprint).
#include <fmt/format.h>

#include "store_impl.hpp"

namespace ktune::cache {

using detail::Stmt;
using detail::WriteTransaction;

namespace {

constexpr const char* kTuningColumns =
    "family, problem_key, device_fingerprint, ktune_version, winner_config, candidates_json, tuned_at";

TuningRecord read_tuning(const Stmt& s) {
  TuningRecord r;
  r.family = s.text(0);
  r.problem_key = s.text(1);
  r.device_fingerprint = s.text(2);
  r.ktune_version = s.text(3);
  r.winner_config = s.text(4);
  r.candidates_json = s.text(5);
  r.tuned_at = s.int64(6);
  return r;
}

}  // namespace

std::optional<TuningRecord> CacheDb::get_tuning(const std::string& family, const std::string& problem_key,
                                                const std::string& device_fingerprint) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt s(impl_->conn, fmt::format("SELECT {} FROM tuning WHERE family = ? AND problem_key = ? AND "
                                  "device_fingerprint = ?",
                                  kTuningColumns));
  s.bind(1, family).bind(2, problem_key).bind(3, device_fingerprint);
  if (!s.step()) return std::nullopt;
  return read_tuning(s);
}

void CacheDb::put_tuning(const TuningRecord& r) {
  detail::require_writable(*impl_, "store a tuning result");
  std::lock_guard<std::mutex> lock(impl_->mu);
  WriteTransaction tx(impl_->conn);
  // One statement, so a concurrent writer of the same key can never leave a mix of two rows.
  Stmt s(impl_->conn, fmt::format("INSERT INTO tuning({}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                                  "ON CONFLICT(family, problem_key, device_fingerprint) DO UPDATE SET "
                                  "ktune_version = excluded.ktune_version, winner_config = excluded.winner_config, "
                                  "candidates_json = excluded.candidates_json, tuned_at = excluded.tuned_at",
                                  kTuningColumns));
  s.bind(1, r.family)
      .bind(2, r.problem_key)
      .bind(3, r.device_fingerprint)
      .bind(4, r.ktune_version)
      .bind(5, r.winner_config)
      .bind(6, r.candidates_json)
      .bind(7, r.tuned_at != 0 ? r.tuned_at : detail::unix_now());
  s.run();
  tx.commit();
}

std::vector<TuningRecord> CacheDb::list_tuning(const std::string& family_filter) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stmt s(impl_->conn, fmt::format("SELECT {} FROM tuning WHERE (?1 = '' OR family = ?1) "
                                  "ORDER BY family, problem_key, device_fingerprint",
                                  kTuningColumns));
  s.bind(1, family_filter);
  std::vector<TuningRecord> out;
  while (s.step()) out.push_back(read_tuning(s));
  return out;
}

}  // namespace ktune::cache
