#include "sqlite_util.hpp"

#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <thread>

namespace ktune::cache::detail {
namespace {

const char* advice(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "locked by another writer for longer than ktune waits; retry, or look for a stuck process holding it";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "the file or its directory is not writable by this user; fix the permissions or open it read-only";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return "the file is damaged; run a cache verify, or delete the file so it is rebuilt";
    case SQLITE_FULL:
      return "the disk is full; free space or point KTUNE_CACHE at another filesystem";
    case SQLITE_CANTOPEN:
      return "check that the path and its directory exist and are accessible";
    case SQLITE_IOERR:
      return "an I/O error; check the disk and the filesystem";
    case SQLITE_NOMEM:
      return "out of memory";
    default:
      return "this is probably a ktune bug; please report it with this message";
  }
}

}  // namespace

void throw_sqlite(sqlite3* db, int rc, const std::string& path, const std::string& what) {
  const char* msg = (db && sqlite3_extended_errcode(db) == rc) ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_NOTADB)
    throw SqliteFailure(fmt::format("ktune cache: not an SQLite database: {} ({} failed: {})", path, what, msg),
                        rc);
  throw SqliteFailure(fmt::format("ktune cache {}: {} failed: {} ({})", path, what, msg, advice(rc)), rc);
}

Connection::~Connection() {
  if (db_) sqlite3_close_v2(db_);
}

void Connection::exec(const char* sql, const char* what) {
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, path_, what);
}

Connection open_connection(const std::string& filename, int flags, const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(filename.c_str(), &db, flags, nullptr);
  Connection c(db, path);  // sqlite3_open_v2 may hand back a handle even on failure; it must still be closed
  if (rc != SQLITE_OK) throw_sqlite(db, rc, path, "opening the database");
  sqlite3_extended_result_codes(db, 1);
  return c;
}

Stmt::Stmt(const Connection& c, std::string_view sql) : c_(c), sql_(sql) {
  int rc = sqlite3_prepare_v2(c.get(), sql.data(), static_cast<int>(sql.size()), &s_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(c.get(), rc, c.path(), fmt::format("preparing `{}`", sql_));
}

Stmt::~Stmt() { sqlite3_finalize(s_); }

Stmt& Stmt::bind(int i, std::string_view v) {
  if (v.size() > INT_MAX) throw CacheError(fmt::format("ktune cache {}: a text value is over 2 GiB", c_.path()));
  int rc = sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) throw_sqlite(c_.get(), rc, c_.path(), "binding a value");
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(s_, i, v);
  if (rc != SQLITE_OK) throw_sqlite(c_.get(), rc, c_.path(), "binding a value");
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  int rc = sqlite3_bind_double(s_, i, v);
  if (rc != SQLITE_OK) throw_sqlite(c_.get(), rc, c_.path(), "binding a value");
  return *this;
}

Stmt& Stmt::bind_blob(int i, const std::vector<uint8_t>& v) {
  // A null data pointer would bind SQL NULL, so an empty blob is bound as a zero-length blob explicitly.
  int rc = v.empty() ? sqlite3_bind_zeroblob(s_, i, 0)
                     : sqlite3_bind_blob64(s_, i, v.data(), v.size(), SQLITE_STATIC);
  if (rc != SQLITE_OK) throw_sqlite(c_.get(), rc, c_.path(), "binding a blob");
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(c_.get(), rc, c_.path(), fmt::format("`{}`", sql_));
}

void Stmt::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

std::string Stmt::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
  int n = sqlite3_column_bytes(s_, col);
  return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

int64_t Stmt::int64(int col) const { return sqlite3_column_int64(s_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(s_, col); }

std::vector<uint8_t> Stmt::blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s_, col));
  int n = sqlite3_column_bytes(s_, col);
  return (p && n > 0) ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

WriteTransaction::WriteTransaction(Connection& c) : c_(c) {
  // busy_timeout already waits inside SQLite; this outer loop also covers the cases where SQLite returns BUSY
  // without calling the busy handler (WAL recovery, a deadlock-avoidance refusal).
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(kLockWaitSeconds);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    int rc = sqlite3_exec(c_.get(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) break;
    if ((rc & 0xff) != SQLITE_BUSY || clock::now() >= deadline)
      throw_sqlite(c_.get(), rc, c_.path(), "starting a write transaction");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  open_ = true;
}

WriteTransaction::~WriteTransaction() {
  if (open_) sqlite3_exec(c_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTransaction::commit() {
  for (int attempt = 0;; ++attempt) {
    int rc = sqlite3_exec(c_.get(), "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) break;
    if ((rc & 0xff) != SQLITE_BUSY || attempt >= 100)
      throw_sqlite(c_.get(), rc, c_.path(), "committing a write transaction");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  open_ = false;
}

std::string uri_path(const std::string& path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : path) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
                 c == '-' || c == '_' || c == '.' || c == '~';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ktune::cache::detail
