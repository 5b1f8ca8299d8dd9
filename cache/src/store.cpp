// CacheDb: opening a file, its schema and migrations, and small whole-file queries.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "store_impl.hpp"

namespace ktune::cache {

using detail::Connection;
using detail::Stmt;
using detail::WriteTransaction;
namespace fs = std::filesystem;

namespace {

constexpr int kBusyTimeoutMs = 15000;
constexpr int64_t kApplicationId = 0x6b74756e;  // "ktun", so `file` and tools can tell a ktune cache apart

// The checks SQLite would only make at the first query, made up front so the message is plain.
void check_is_sqlite_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw CacheError(fmt::format("ktune cache {}: cannot read the file: {}", path, std::strerror(errno)));
  char header[16] = {};
  f.read(header, sizeof header);
  const auto got = f.gcount();
  if (got == 0) return;  // an empty file is a valid empty database
  if (got < 16 || std::memcmp(header, "SQLite format 3", 16) != 0)
    throw CacheError(fmt::format(
        "ktune cache: not an SQLite database: {} (the file does not start with the SQLite header; move it away "
        "or point KTUNE_CACHE at another path)",
        path));
}

// The file's schema version: 0 for an empty database, -1 for an SQLite file that is not a ktune cache.
int read_schema_version(Connection& c) {
  Stmt tables(c, "SELECT count(*), coalesce(sum(name = 'meta'), 0) FROM sqlite_master WHERE type = 'table'");
  tables.step();
  if (tables.int64(1) == 0) return tables.int64(0) == 0 ? 0 : -1;
  Stmt v(c, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!v.step()) return -1;
  const std::string s = v.text(0);
  int version = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9' || version > 100000) return -1;
    version = version * 10 + (ch - '0');
  }
  return s.empty() ? -1 : version;
}

void check_version_supported(int version, const std::string& path) {
  if (version < 0)
    throw CacheError(fmt::format(
        "ktune cache {}: this is an SQLite database but not a ktune cache (no meta.schema_version); "
        "point KTUNE_CACHE at another file",
        path));
  if (version > kCacheSchemaVersion)
    throw CacheError(fmt::format(
        "ktune cache {}: the file has cache schema version {}, newer than the {} this ktune understands; "
        "upgrade ktune, or point KTUNE_CACHE at a separate file for this version",
        path, version, kCacheSchemaVersion));
}

void create_schema_v1(Connection& c) {
  c.exec(R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
    CREATE TABLE binaries(
      digest TEXT PRIMARY KEY NOT NULL,
      family TEXT NOT NULL,
      name TEXT NOT NULL,
      arch TEXT NOT NULL,
      compiler TEXT NOT NULL,
      compiler_version TEXT NOT NULL,
      options TEXT NOT NULL,
      source_digest TEXT NOT NULL,
      ktune_version TEXT NOT NULL,
      schema_version INTEGER NOT NULL,
      entry_points TEXT NOT NULL,
      blob_sha256 TEXT NOT NULL,
      compile_ms REAL NOT NULL,
      created_at INTEGER NOT NULL,
      blob_size INTEGER NOT NULL,
      blob BLOB NOT NULL);
    CREATE INDEX binaries_by_source ON binaries(source_digest, arch, compiler, options, ktune_version);
    CREATE INDEX binaries_by_family ON binaries(family);
    CREATE TABLE tuning(
      family TEXT NOT NULL,
      problem_key TEXT NOT NULL,
      device_fingerprint TEXT NOT NULL,
      ktune_version TEXT NOT NULL,
      winner_config TEXT NOT NULL,
      candidates_json TEXT NOT NULL,
      tuned_at INTEGER NOT NULL,
      PRIMARY KEY(family, problem_key, device_fingerprint));
    INSERT INTO meta(key, value) VALUES ('schema_version', '1');
  )sql",
         "creating the cache schema");
  c.exec(fmt::format("PRAGMA application_id = {}", kApplicationId).c_str(), "setting the application id");
}

// Brings a file from `version` up to kCacheSchemaVersion, one step at a time, inside the caller's write
// transaction (so a failed step leaves the file as it was). Version 0 is a new, empty file.
// To add v2: write the v1 -> v2 step as a `case 1:` and bump kCacheSchemaVersion.
int migrate(Connection& c, int version) {
  while (version < kCacheSchemaVersion) {
    switch (version) {
      case 0:
        create_schema_v1(c);
        version = 1;
        break;
      default:
        throw CacheError(fmt::format("ktune cache {}: no migration from cache schema version {} to {}", c.path(),
                                     version, kCacheSchemaVersion));
    }
  }
  Stmt set(c, "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)");
  set.bind(1, std::to_string(version)).run();
  return version;
}

// Runs a statement that needs the database lock outside a transaction, retrying while another process has it.
void exec_retrying_busy(Connection& c, const char* sql, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    int rc = sqlite3_exec(c.get(), sql, nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline)
      detail::throw_sqlite(c.get(), rc, c.path(), what);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::unique_ptr<CacheDb::Impl> open_writable(const std::string& path, const OpenOptions& opts) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw CacheError(fmt::format("ktune cache {}: is a directory, not a database file", path));
  if (fs::exists(st)) {
    check_is_sqlite_file(path);
  } else if (!opts.create) {
    throw CacheError(fmt::format("ktune cache {}: the file does not exist (and create=false)", path));
  } else {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::create_directories(parent, ec) && ec)
      throw CacheError(fmt::format("ktune cache {}: cannot create the directory {}: {}; create it or point "
                                   "KTUNE_CACHE elsewhere",
                                   path, parent.string(), ec.message()));
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (opts.create ? SQLITE_OPEN_CREATE : 0);
  Connection c = detail::open_connection(path, flags, path);
  sqlite3_busy_timeout(c.get(), kBusyTimeoutMs);
  exec_retrying_busy(c, "PRAGMA journal_mode = WAL", "switching to WAL mode");
  c.exec("PRAGMA synchronous = NORMAL", "setting synchronous=NORMAL");

  int version;
  {
    WriteTransaction tx(c);
    version = read_schema_version(c);
    check_version_supported(version, path);
    if (version < kCacheSchemaVersion) version = migrate(c, version);
    tx.commit();
  }
  return std::make_unique<CacheDb::Impl>(std::move(c), path, false, version);
}

std::unique_ptr<CacheDb::Impl> open_read_only(const std::string& path, const OpenOptions& opts) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw CacheError(fmt::format("ktune cache {}: the file does not exist (opened read-only, so it is not created)",
                                 path));
  if (fs::is_directory(st)) throw CacheError(fmt::format("ktune cache {}: is a directory, not a database file", path));
  check_is_sqlite_file(path);
  const std::string uri =
      "file:" + detail::uri_path(path) + (opts.immutable ? "?mode=ro&immutable=1" : "?mode=ro");
  Connection c = detail::open_connection(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, path);
  sqlite3_busy_timeout(c.get(), kBusyTimeoutMs);
  int version = read_schema_version(c);
  if (version == 0)
    throw CacheError(fmt::format("ktune cache {}: the file is empty, not a ktune cache", path));
  check_version_supported(version, path);
  if (version < kCacheSchemaVersion)
    throw CacheError(fmt::format("ktune cache {}: cache schema version {} needs upgrading to {}; open it "
                                 "writable once, or re-export it with this ktune",
                                 path, version, kCacheSchemaVersion));
  return std::make_unique<CacheDb::Impl>(std::move(c), path, true, version);
}

}  // namespace

std::unique_ptr<CacheDb> CacheDb::open(const std::string& path, OpenOptions opts) {
  if (path.empty()) throw CacheError("ktune cache: empty database path");
  auto impl = opts.read_only ? open_read_only(path, opts) : open_writable(path, opts);
  return std::unique_ptr<CacheDb>(new CacheDb(std::move(impl)));
}

CacheDb::CacheDb(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CacheDb::~CacheDb() = default;
CacheDb::CacheDb(CacheDb&&) noexcept = default;
CacheDb& CacheDb::operator=(CacheDb&&) noexcept = default;

const std::string& CacheDb::path() const { return impl_->path; }
bool CacheDb::read_only() const { return impl_->read_only; }
int CacheDb::schema_version() const { return impl_->schema_version; }

CacheDb::Counts CacheDb::counts() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Counts out;
  Stmt b(impl_->conn, "SELECT count(*), coalesce(sum(blob_size), 0) FROM binaries");
  b.step();
  out.binaries = b.int64(0);
  out.blob_bytes = b.int64(1);
  Stmt t(impl_->conn, "SELECT count(*) FROM tuning");
  t.step();
  out.tuning = t.int64(0);
  return out;
}

namespace detail {

std::unique_ptr<CacheDb> open_for_reading(const std::string& path) {
  OpenOptions live;
  live.read_only = true;
  live.immutable = false;
  try {
    return CacheDb::open(path, live);
  } catch (const SqliteFailure&) {
    OpenOptions frozen = live;
    frozen.immutable = true;
    return CacheDb::open(path, frozen);
  }
}

void require_writable(const CacheDb::Impl& db, const char* operation) {
  if (db.read_only)
    throw CacheError(fmt::format("ktune cache {}: cannot {}: the file was opened read-only", db.path, operation));
}

}  // namespace detail
}  // namespace ktune::cache
