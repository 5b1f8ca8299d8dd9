// RAII wrappers over the SQLite C API, internal to cache/. Every failure becomes a SqliteFailure (a CacheError
// that also keeps the SQLite result code) whose message names the file, the operation and what to do.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ktune/cache/store.hpp"

namespace ktune::cache::detail {

struct SqliteFailure : CacheError {
  SqliteFailure(const std::string& msg, int rc) : CacheError(msg), code(rc) {}
  int code;  // extended result code
  bool corrupt() const { return (code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB; }
};

// "ktune cache <path>: <what> failed: <sqlite message> (<advice for this kind of failure>)"
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& path, const std::string& what);

// Owns a sqlite3 connection; closes it on destruction.
class Connection {
 public:
  Connection() = default;
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~Connection();
  Connection(Connection&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
  Connection& operator=(Connection&&) = delete;
  Connection(const Connection&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  void exec(const char* sql, const char* what);  // statements without results or binds

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// Opens `filename` (a path, or a file: URI when flags has SQLITE_OPEN_URI); `path` is used in messages.
Connection open_connection(const std::string& filename, int flags, const std::string& path);

// One prepared statement. Binds are by value, 1-based; columns are 0-based.
class Stmt {
 public:
  Stmt(const Connection& c, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, double v);
  // The bytes are not copied: they must outlive every step() of this statement.
  Stmt& bind_blob(int i, const std::vector<uint8_t>& v);

  bool step();  // true: a row is ready; false: done. Throws SqliteFailure.
  void run() {
    while (step()) {
    }
  }
  void reset();

  std::string text(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::vector<uint8_t> blob(int col) const;

 private:
  const Connection& c_;
  sqlite3_stmt* s_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE (retried while another process holds the write lock, up to kLockWaitSeconds); rolls back on
// destruction unless commit() was called, so an exception anywhere inside leaves the file unchanged.
class WriteTransaction {
 public:
  explicit WriteTransaction(Connection& c);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit();

 private:
  Connection& c_;
  bool open_ = false;
};

// Percent-encodes a filesystem path for use in a file: URI.
std::string uri_path(const std::string& path);

int64_t unix_now();

}  // namespace ktune::cache::detail
