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

constexpr int kBusyTimeoutMs = kLockWaitSeconds * 1000;
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

// What decides whether a file may be opened at all, and written: read with plain queries, before any write.
struct FileState {
  int version = 0;          // read_schema_version
  bool foreign_id = false;  // an application id that is neither unset nor ktune's
  bool has_signatures_table = false;
  int64_t signatures = 0;   // rows in the signatures table
  std::string not_a_table;  // "signatures (a view)": one of ktune's tables present as another kind of object
};

FileState inspect_locked(Connection& c) {
  FileState st;
  st.version = read_schema_version(c);
  Stmt id(c, "PRAGMA application_id");
  st.foreign_id = id.step() && id.int64(0) != 0 && id.int64(0) != kApplicationId;
  // A view (or trigger, index) under a table's name answers the same queries as the table, but a check that
  // asks sqlite_master for tables does not see it: such a file is refused, not half-read.
  Stmt other(c, "SELECT name, type FROM sqlite_master WHERE name IN ('meta', 'binaries', 'tuning', 'signatures') "
                "AND type <> 'table'");
  if (other.step()) st.not_a_table = other.text(0) + " (a " + other.text(1) + ")";
  Stmt t(c, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'signatures'");
  t.step();
  st.has_signatures_table = t.int64(0) > 0;
  if (st.has_signatures_table) {
    Stmt n(c, "SELECT count(*) FROM signatures");
    n.step();
    st.signatures = n.int64(0);
  }
  return st;
}

// One read snapshot, so that a migration committed by another process between two of the queries cannot make
// the file look half-migrated. Inside a write transaction the snapshot is that transaction's.
FileState inspect(Connection& c, bool in_transaction = false) {
  if (in_transaction) return inspect_locked(c);
  c.exec("BEGIN", "starting a read transaction");
  try {
    FileState st = inspect_locked(c);
    c.exec("COMMIT", "ending a read transaction");
    return st;
  } catch (...) {
    sqlite3_exec(c.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
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

// Refuses what no ktune would open: a foreign file, a newer schema, and a file whose label contradicts its
// contents (signatures exist only from schema v2 on, so an older label on a signed file means it was
// relabelled, and migrating it would recompute row digests over whatever its columns now hold).
void check_file_state(const FileState& st, const std::string& path) {
  if (st.foreign_id)
    throw CacheError(fmt::format("ktune cache {}: this SQLite database belongs to another application (its "
                                 "application_id is not ktune's); point KTUNE_CACHE at another file",
                                 path));
  if (!st.not_a_table.empty())
    throw CacheError(fmt::format("ktune cache {}: {} where a ktune cache has a table: the file was altered; "
                                 "refusing to use it",
                                 path, st.not_a_table));
  check_version_supported(st.version, path);
  if (st.signatures > 0 && st.version < 2)
    throw CacheError(fmt::format("ktune cache {}: labelled cache schema version {} but it carries signatures, "
                                 "which only version 2 files have: the file was altered; refusing to migrate "
                                 "or use it",
                                 path, st.version));
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

bool has_column(Connection& c, const char* table, const char* column) {
  Stmt s(c, fmt::format("SELECT count(*) FROM pragma_table_info('{}') WHERE name = '{}'", table, column));
  s.step();
  return s.int64(0) > 0;
}

// v1 -> v2: a row digest for every binaries and tuning row (computed from the columns as they are: damage
// that happened under v1 cannot be told apart, but blob damage is still caught by blob_sha256), and the
// signatures table.
void migrate_v1_to_v2(Connection& c) {
  if (!has_column(c, "binaries", "row_digest"))
    c.exec("ALTER TABLE binaries ADD COLUMN row_digest TEXT NOT NULL DEFAULT ''", "adding binaries.row_digest");
  if (!has_column(c, "tuning", "row_digest"))
    c.exec("ALTER TABLE tuning ADD COLUMN row_digest TEXT NOT NULL DEFAULT ''", "adding tuning.row_digest");
  c.exec(R"sql(
    CREATE TABLE IF NOT EXISTS signatures(
      key_id TEXT PRIMARY KEY NOT NULL,
      public_key TEXT NOT NULL,
      manifest_sha256 TEXT NOT NULL,
      signature TEXT NOT NULL,
      binaries INTEGER NOT NULL,
      tuning INTEGER NOT NULL,
      signed_at INTEGER NOT NULL);
  )sql",
         "creating the signatures table");
  {
    std::vector<std::pair<std::string, std::string>> digests;  // digest, row digest
    Stmt rows(c, fmt::format("SELECT {} FROM binaries", detail::kBinaryColumns));
    while (rows.step()) {
      BinaryRecord r;
      int64_t blob_size = 0;
      detail::read_binary_columns(rows, r, blob_size);
      digests.emplace_back(r.digest, detail::binary_row_digest(r, r.blob_sha256, blob_size));
    }
    Stmt set(c, "UPDATE binaries SET row_digest = ? WHERE digest = ?");
    for (const auto& [digest, row_digest] : digests) {
      set.bind(1, row_digest).bind(2, digest).run();
      set.reset();
    }
  }
  {
    std::vector<std::pair<int64_t, std::string>> digests;  // rowid, row digest
    Stmt rows(c, fmt::format("SELECT rowid, {} FROM tuning", detail::kTuningColumns));
    while (rows.step()) {
      TuningRecord t;
      detail::read_tuning_columns(rows, t, 1);
      digests.emplace_back(rows.int64(0), detail::tuning_row_digest(t));
    }
    Stmt set(c, "UPDATE tuning SET row_digest = ? WHERE rowid = ?");
    for (const auto& [rowid, row_digest] : digests) {
      set.bind(1, row_digest).bind(2, rowid).run();
      set.reset();
    }
  }
}

// Brings a file from `version` up to `target`, one step at a time, inside the caller's write transaction (so
// a failed step leaves the file as it was). Version 0 is a new, empty file; a new file goes through every
// step, so the migrations run on every file ever created. To add v3: write the v2 -> v3 step as `case 2:`
// and bump kCacheSchemaVersion.
int migrate(Connection& c, int version, int target) {
  while (version < target) {
    switch (version) {
      case 0:
        create_schema_v1(c);
        version = 1;
        break;
      case 1:
        migrate_v1_to_v2(c);
        version = 2;
        break;
      default:
        throw CacheError(fmt::format("ktune cache {}: no migration from cache schema version {} to {}", c.path(),
                                     version, target));
    }
  }
  Stmt set(c, "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)");
  set.bind(1, std::to_string(version)).run();
  return version;
}

// SQLite's own busy handler (sqlite3_busy_timeout) sleeps in steps that grow to 100 ms, so under many writers a
// lock freed after 1 ms is often taken only 25-100 ms later. This one polls every 0.25-2 ms for the same total
// time: a short write transaction from another process is waited out in about its own length.
int busy_handler(void*, int attempt) {
  using namespace std::chrono;
  // Waited so far ~ sum of the steps: 0.25 ms x 8, 0.5 ms x 8, 1 ms x 16, then 2 ms each.
  const double waited_ms = attempt < 8    ? attempt * 0.25
                           : attempt < 16 ? 2 + (attempt - 8) * 0.5
                           : attempt < 32 ? 6 + (attempt - 16) * 1.0
                                          : 22 + (attempt - 32) * 2.0;
  if (waited_ms >= kBusyTimeoutMs) return 0;  // give up: SQLITE_BUSY
  const auto step = attempt < 8 ? microseconds(250) : attempt < 16 ? microseconds(500)
                    : attempt < 32 ? microseconds(1000) : microseconds(2000);
  std::this_thread::sleep_for(step);
  return 1;
}

void set_busy_wait(Connection& c) { sqlite3_busy_handler(c.get(), busy_handler, nullptr); }

// Runs a statement that needs the database lock outside a transaction, retrying while another process has it.
void exec_retrying_busy(Connection& c, const char* sql, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLockWaitSeconds);
  for (;;) {
    int rc = sqlite3_exec(c.get(), sql, nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline)
      detail::throw_sqlite(c.get(), rc, c.path(), what);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A symbolic link whose target is missing: opening it with create would make a file wherever it points.
void refuse_dangling_link(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec)) || fs::exists(fs::status(path, ec))) return;
  throw CacheError(fmt::format("ktune cache {}: a symbolic link to {}, which does not exist; refusing to create a "
                               "cache file at a link's target (remove the link or create its target)",
                               path, fs::read_symlink(path, ec).string()));
}

std::unique_ptr<CacheDb::Impl> open_writable(const std::string& path, const OpenOptions& opts,
                                             int target_version = kCacheSchemaVersion) {
  refuse_dangling_link(path);
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
  set_busy_wait(c);

  // Every check is made with plain reads first: switching to WAL rewrites the file's header, so it comes
  // only after the file is known to be one this process may write.
  FileState state = inspect(c);
  check_file_state(state, path);
  if (state.version > target_version)
    throw CacheError(fmt::format("ktune cache {}: schema version {} is above the {} asked for", path,
                                 state.version, target_version));
  if (state.signatures > 0 && !opts.allow_signed)
    throw SignedCacheError(fmt::format("ktune cache {}: the file carries a signature, and any write would void "
                                       "it; it is only opened read-only",
                                       path));
  exec_retrying_busy(c, "PRAGMA journal_mode = WAL", "switching to WAL mode");
  c.exec("PRAGMA synchronous = NORMAL", "setting synchronous=NORMAL");

  int version = state.version;
  if (version < target_version) {
    // Creating or migrating needs the write lock; a file already at the current schema never takes it here,
    // so opening does not wait for another process's write. Checked again under the lock: another process
    // may have migrated (or replaced) the file meanwhile.
    WriteTransaction tx(c);
    state = inspect(c, /*in_transaction=*/true);
    check_file_state(state, path);
    if (state.signatures > 0 && !opts.allow_signed)
      throw SignedCacheError(fmt::format("ktune cache {}: the file carries a signature; not migrated", path));
    version = state.version;
    if (version > target_version)
      throw CacheError(fmt::format("ktune cache {}: schema version {} is above the {} asked for", path, version,
                                   target_version));
    if (version < target_version) version = migrate(c, version, target_version);
    tx.commit();
  }
  return std::make_unique<CacheDb::Impl>(std::move(c), path, false, version);
}

// Byte 18 of the SQLite header: 2 when the file is in WAL mode.
bool header_says_wal(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char header[20] = {};
  f.read(header, sizeof header);
  return f.gcount() == sizeof header && header[18] == 2;
}

std::unique_ptr<CacheDb::Impl> open_read_only(const std::string& path, const OpenOptions& opts) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw CacheError(fmt::format("ktune cache {}: the file does not exist (opened read-only, so it is not created)",
                                 path));
  if (fs::is_directory(st)) throw CacheError(fmt::format("ktune cache {}: is a directory, not a database file", path));
  check_is_sqlite_file(path);
  // An immutable open reads the main file only. Commits still in a -wal file would be silently missing, so
  // such a file is refused rather than served in part.
  const std::string wal = path + "-wal";
  if (opts.immutable && header_says_wal(path) && fs::file_size(wal, ec) > 0 && !ec)
    throw CacheError(fmt::format("ktune cache {}: {} holds commits that cannot be read without locking (no -shm "
                                 "file, and none can be created here); ship one self-contained file written by "
                                 "`ktune cache export`, or make the directory writable",
                                 path, wal));
  const std::string uri =
      "file:" + detail::uri_path(path) + (opts.immutable ? "?mode=ro&immutable=1" : "?mode=ro");
  Connection c = detail::open_connection(uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX, path);
  set_busy_wait(c);
  const FileState state = inspect(c);
  if (state.version == 0)
    throw CacheError(fmt::format("ktune cache {}: the file is empty, not a ktune cache", path));
  check_file_state(state, path);
  if (state.version < kCacheSchemaVersion)
    throw CacheError(fmt::format("ktune cache {}: cache schema version {} needs upgrading to {}; open it "
                                 "writable once, or re-export it with this ktune",
                                 path, state.version, kCacheSchemaVersion));
  return std::make_unique<CacheDb::Impl>(std::move(c), path, true, state.version);
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

void CacheDb::restrict_to_rows(std::shared_ptr<const std::unordered_set<std::string>> rows) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->allowed_rows = std::move(rows);
}

void CacheDb::serve_only_rows_stored_here() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->own_rows_only = true;
  impl_->own_rows.clear();
}

void CacheDb::use_rollback_journal() {
  detail::require_writable(*impl_, "change its journal mode");
  std::lock_guard<std::mutex> lock(impl_->mu);
  exec_retrying_busy(impl_->conn, "PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing the WAL");
  exec_retrying_busy(impl_->conn, "PRAGMA journal_mode = DELETE", "switching to a rollback journal");
}

CacheDb::Counts CacheDb::counts() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Counts out;
  // total() sums in floating point: a damaged blob_size (say INT64_MAX) cannot overflow the sum and fail the
  // count, it only makes the byte total meaningless.
  Stmt b(impl_->conn, "SELECT count(*), total(blob_size) FROM binaries");
  b.step();
  out.binaries = b.int64(0);
  const double bytes = b.real(1);
  out.blob_bytes = bytes >= 9.2e18 ? INT64_MAX : bytes <= 0 ? 0 : static_cast<int64_t>(bytes);
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

std::unique_ptr<CacheDb> open_at_schema_version(const std::string& path, int version) {
  if (version < 1 || version > kCacheSchemaVersion)
    throw CacheError(fmt::format("ktune cache {}: no schema version {} to open at", path, version));
  return std::unique_ptr<CacheDb>(new CacheDb(open_writable(path, OpenOptions{}, version)));
}

void note_own_row_locked(CacheDb::Impl& db, const std::string& row_digest) {
  if (db.own_rows_only && !row_digest.empty()) db.own_rows.insert(row_digest);
}

void require_writable(const CacheDb::Impl& db, const char* operation) {
  if (db.read_only)
    throw CacheError(fmt::format("ktune cache {}: cannot {}: the file was opened read-only", db.path, operation));
}

}  // namespace detail
}  // namespace ktune::cache
