// Ed25519 signatures over a cache file's rows (see signing.hpp). libsodium is linked statically into the
// library (its archive is PIC) with its symbols kept private.
#include "ktune/cache/signing.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ktune/cache/sha256.hpp"
#include "store_impl.hpp"

namespace ktune::cache {

using detail::Stmt;
using detail::WriteTransaction;

namespace {

constexpr const char* kSecretTag = "ktune-ed25519-secret-key";
constexpr const char* kPublicTag = "ktune-ed25519-public-key";

void ensure_sodium() {
  static const int rc = sodium_init();  // thread-safe static init; sodium_init is idempotent
  if (rc < 0) throw CacheError("ktune cache: libsodium failed to initialise (no entropy source?)");
}

std::string to_hex(const uint8_t* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[p[i] >> 4];
    out[2 * i + 1] = kHex[p[i] & 15];
  }
  return out;
}

bool from_hex(const std::string& s, uint8_t* out, size_t n) {
  if (s.size() != 2 * n) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < n; ++i) {
    int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

// Reads "<tag> <hex>" from a small key file. Throws CacheError naming the file.
std::string read_key_line(const std::string& path, const char* tag, const char* what) {
  std::ifstream f(path);
  if (!f) throw CacheError(fmt::format("ktune signing: cannot read the {} file {}: {}", what, path, std::strerror(errno)));
  std::string line;
  std::getline(f, line, '\n');
  if (line.size() > 1024) line.resize(1024);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  const std::string prefix = std::string(tag) + " ";
  if (line.compare(0, prefix.size(), prefix) != 0) {
    sodium_memzero(line.data(), line.size());
    throw CacheError(fmt::format("ktune signing: {} is not a ktune {} file (expected a first line \"{} <hex>\"; "
                                 "make one with `ktune cache keygen --out FILE`)",
                                 path, what, tag));
  }
  std::string hex = line.substr(prefix.size());
  sodium_memzero(line.data(), line.size());  // a secret key's digits stay in one buffer only, which the caller wipes
  return hex;
}

void write_file_exclusive(const std::string& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    throw CacheError(fmt::format("ktune signing: cannot create {}: {}{}", path, std::strerror(errno),
                                 errno == EEXIST ? " (refusing to overwrite a key file)" : ""));
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw CacheError(fmt::format("ktune signing: cannot write {}: {}", path, std::strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());  // a key file that may not be on disk whole is no key file
    throw CacheError(fmt::format("ktune signing: cannot flush {}: {}", path, std::strerror(err)));
  }
}

std::string signed_message(const std::string& manifest_sha256) {
  return "ktune-cache-signature-v1\n" + manifest_sha256 + "\n";
}

struct Manifest {
  std::string sha256;
  int64_t binaries = 0, tuning = 0;
  std::vector<std::string> row_digests;
  std::string problem;  // the first row that fails its own check ("" when every row is intact)
};

// Every row's recomputed digest, in manifest order, under the caller's lock and inside one read snapshot.
Manifest build_manifest_locked(CacheDb::Impl& db, bool hash_blobs) {
  Manifest m;
  Sha256 h;
  h.update("ktune-cache-manifest-v1\n");
  {
    Stmt s(db.conn, fmt::format("SELECT {}{} FROM binaries ORDER BY digest",
                                detail::binary_columns_with_row_digest(db.schema_version), hash_blobs ? ", blob" : ""));
    while (s.step()) {
      BinaryRecord r;
      int64_t blob_size = 0;
      detail::read_binary_columns(s, r, blob_size);
      const std::string stored = s.text(15);
      const std::string actual = detail::binary_row_digest(r, r.blob_sha256, blob_size);
      if (m.problem.empty() && actual != stored)
        m.problem = fmt::format("binary {} ({}): its columns do not match its row digest", r.name, r.digest);
      if (m.problem.empty() && hash_blobs) {
        std::vector<uint8_t> blob = s.blob(16);
        if (static_cast<int64_t>(blob.size()) != blob_size || sha256_hex(blob.data(), blob.size()) != r.blob_sha256)
          m.problem = fmt::format("binary {} ({}): its blob does not match its size and sha256 columns", r.name,
                                  r.digest);
      }
      h.update(fmt::format("binary {} {}\n", r.digest, actual));
      m.row_digests.push_back(actual);
      ++m.binaries;
    }
  }
  {
    Stmt s(db.conn, fmt::format("SELECT {}, row_digest FROM tuning ORDER BY family, problem_key, device_fingerprint",
                                detail::kTuningColumns));
    while (s.step()) {
      TuningRecord t;
      detail::read_tuning_columns(s, t);
      const std::string actual = detail::tuning_row_digest(t);
      if (m.problem.empty() && actual != s.text(7))
        m.problem = fmt::format("tuning row {} {} {}: its columns do not match its row digest", t.family,
                                t.problem_key, t.device_fingerprint);
      h.update(fmt::format("tuning {}\n", actual));
      m.row_digests.push_back(actual);
      ++m.tuning;
    }
  }
  m.sha256 = h.hex_digest();
  return m;
}

// A consistent snapshot for reading several tables (a plain BEGIN; the read lock is taken at the first SELECT).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(detail::Connection& c) : c_(c) { c_.exec("BEGIN", "starting a read transaction"); }
  ~ReadSnapshot() { sqlite3_exec(c_.get(), "COMMIT", nullptr, nullptr, nullptr); }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  detail::Connection& c_;
};

std::vector<SignatureRecord> read_signatures_locked(CacheDb::Impl& db) {
  std::vector<SignatureRecord> out;
  if (db.schema_version < 2) return out;
  Stmt s(db.conn, "SELECT key_id, public_key, manifest_sha256, signature, binaries, tuning, signed_at FROM signatures "
                  "ORDER BY signed_at DESC, key_id");
  while (s.step()) {
    SignatureRecord r;
    r.key_id = s.text(0);
    r.public_key_hex = s.text(1);
    r.manifest_sha256 = s.text(2);
    r.signature_hex = s.text(3);
    r.binaries = s.int64(4);
    r.tuning = s.int64(5);
    r.signed_at = s.int64(6);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string PublicKey::id() const { return sha256_hex(bytes.data(), bytes.size()).substr(0, 16); }
std::string PublicKey::hex() const { return to_hex(bytes.data(), bytes.size()); }

SecretKey::~SecretKey() { sodium_memzero(bytes.data(), bytes.size()); }

PublicKey SecretKey::public_key() const {
  PublicKey p;
  std::memcpy(p.bytes.data(), bytes.data() + 32, 32);  // libsodium keeps the public key in the second half
  p.origin = origin;
  return p;
}

const char* signature_result_name(SignatureCheck::Result r) {
  switch (r) {
    case SignatureCheck::Result::valid: return "valid";
    case SignatureCheck::Result::unsigned_: return "unsigned";
    case SignatureCheck::Result::untrusted: return "untrusted";
    case SignatureCheck::Result::invalid: return "invalid";
    case SignatureCheck::Result::damaged: return "damaged";
  }
  return "?";
}

SecretKey generate_secret_key() {
  ensure_sodium();
  SecretKey k;
  std::array<uint8_t, 32> pk{};
  crypto_sign_keypair(pk.data(), k.bytes.data());
  k.origin = "(generated)";
  return k;
}

void write_key_files(const SecretKey& key, const std::string& secret_path, const std::string& public_path) {
  if (secret_path == public_path)
    throw CacheError("ktune signing: the secret and public key files must be different paths");
  // Both paths must be free before either is written: a secret key left beside another key's public file would
  // look like a pair, and every image it signs would then be refused.
  struct stat st{};
  for (const std::string& p : {secret_path, public_path})
    if (::lstat(p.c_str(), &st) == 0)
      throw CacheError(fmt::format("ktune signing: cannot create {}: it exists (refusing to overwrite a key file; "
                                   "nothing written)", p));
  std::string secret_text = fmt::format("{} {}\n", kSecretTag, to_hex(key.bytes.data(), key.bytes.size()));
  write_file_exclusive(secret_path, secret_text, 0600);
  sodium_memzero(secret_text.data(), secret_text.size());
  try {
    write_file_exclusive(public_path, fmt::format("{} {}\n", kPublicTag, key.public_key().hex()), 0644);
  } catch (...) {
    ::unlink(secret_path.c_str());  // the pair is written whole or not at all
    throw;
  }
}

SecretKey read_secret_key(const std::string& path) {
  ensure_sodium();
  std::string hex = read_key_line(path, kSecretTag, "secret key");
  // A secret key others can read is no longer secret: refuse to sign with it (keygen writes 0600).
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    sodium_memzero(hex.data(), hex.size());
    throw CacheError(fmt::format("ktune signing: {}: the secret key file is readable or writable by group or others "
                                 "(mode {:o}); make it 0600 (chmod 600 {}) or make a new key",
                                 path, st.st_mode & 0777, path));
  }
  SecretKey k;
  k.origin = path;
  bool ok = from_hex(hex, k.bytes.data(), k.bytes.size());
  sodium_memzero(hex.data(), hex.size());
  if (!ok) throw CacheError(fmt::format("ktune signing: {}: the secret key is not 128 hex digits", path));
  // The second half must be the public key of the first (the seed): a damaged key file must not sign.
  std::array<uint8_t, 32> pk{};
  std::array<uint8_t, 64> check{};
  crypto_sign_seed_keypair(pk.data(), check.data(), k.bytes.data());
  const bool consistent = std::memcmp(pk.data(), k.bytes.data() + 32, 32) == 0;
  sodium_memzero(check.data(), check.size());
  if (!consistent) throw CacheError(fmt::format("ktune signing: {}: the secret key is damaged (its halves disagree)", path));
  return k;
}

PublicKey read_public_key(const std::string& path) {
  std::string hex = read_key_line(path, kPublicTag, "public key");
  PublicKey p;
  p.origin = path;
  if (!from_hex(hex, p.bytes.data(), p.bytes.size()))
    throw CacheError(fmt::format("ktune signing: {}: the public key is not 64 hex digits", path));
  return p;
}

std::vector<PublicKey> read_public_keys(const std::string& list) {
  std::vector<PublicKey> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(":,", start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(read_public_key(list.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

SignatureRecord CacheDb::sign(const SecretKey& key) {
  detail::require_writable(*impl_, "sign it");
  ensure_sodium();
  if (impl_->schema_version < 2)
    throw CacheError(fmt::format("ktune cache {}: schema version {} cannot hold a signature", path(),
                                 impl_->schema_version));
  for (const VerifyIssue& issue : verify())
    throw CacheError(fmt::format("ktune cache {}: refusing to sign a file that fails verification: {}{}{}", path(),
                                 issue.name, issue.name.empty() ? "" : ": ", issue.problem));

  const PublicKey pub = key.public_key();
  SignatureRecord rec;
  std::lock_guard<std::mutex> lock(impl_->mu);
  WriteTransaction tx(impl_->conn);  // the rows signed are exactly the rows committed with the signature
  Manifest m = build_manifest_locked(*impl_, /*hash_blobs=*/true);
  if (!m.problem.empty())
    throw CacheError(fmt::format("ktune cache {}: refusing to sign a damaged file: {}", path(), m.problem));
  const std::string message = signed_message(m.sha256);
  std::array<uint8_t, crypto_sign_BYTES> sig{};
  crypto_sign_detached(sig.data(), nullptr, reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                       key.bytes.data());
  rec.key_id = pub.id();
  rec.public_key_hex = pub.hex();
  rec.manifest_sha256 = m.sha256;
  rec.signature_hex = to_hex(sig.data(), sig.size());
  rec.binaries = m.binaries;
  rec.tuning = m.tuning;
  rec.signed_at = detail::unix_now();
  Stmt ins(impl_->conn, "INSERT OR REPLACE INTO signatures(key_id, public_key, manifest_sha256, signature, binaries, "
                        "tuning, signed_at) VALUES (?, ?, ?, ?, ?, ?, ?)");
  ins.bind(1, rec.key_id)
      .bind(2, rec.public_key_hex)
      .bind(3, rec.manifest_sha256)
      .bind(4, rec.signature_hex)
      .bind(5, rec.binaries)
      .bind(6, rec.tuning)
      .bind(7, rec.signed_at)
      .run();
  tx.commit();
  return rec;
}

SignatureRecord sign_file(const std::string& path, const SecretKey& key) {
  // Byte 18 of the SQLite header: 1 = rollback journal, 2 = WAL.
  bool was_wal = true;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw CacheError(fmt::format("ktune cache sign: cannot read {}: {}", path, std::strerror(errno)));
    char header[20] = {};
    f.read(header, sizeof header);
    if (f.gcount() == sizeof header) was_wal = header[18] == 2;
  }
  OpenOptions o;
  o.create = false;
  o.allow_signed = true;  // signing again (or with a second key) replaces or adds a signature row
  auto db = CacheDb::open(path, o);  // a writable open switches the file to WAL
  SignatureRecord rec;
  try {
    rec = db->sign(key);
  } catch (...) {
    // A refused file (one that fails verification, say) is left in its journal mode, as it came.
    if (!was_wal) {
      try {
        db->use_rollback_journal();
      } catch (...) {
      }
    }
    throw;
  }
  if (!was_wal) db->use_rollback_journal();
  return rec;
}

std::vector<SignatureRecord> CacheDb::signatures() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return read_signatures_locked(*impl_);
}

SignatureCheck CacheDb::check_signature(const std::vector<PublicKey>& trusted, bool hash_blobs) {
  ensure_sodium();
  SignatureCheck out;
  if (impl_->schema_version < 2) {
    out.result = SignatureCheck::Result::unsigned_;
    out.detail = fmt::format("{}: cache schema version {} holds no signature; re-export it with this ktune and sign "
                             "it (`ktune cache sign --key K`)",
                             path(), impl_->schema_version);
    return out;
  }
  Manifest m;
  std::vector<SignatureRecord> sigs;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    try {
      ReadSnapshot snapshot(impl_->conn);
      m = build_manifest_locked(*impl_, hash_blobs);
      sigs = read_signatures_locked(*impl_);
    } catch (const detail::SqliteFailure& e) {
      if (!e.corrupt()) throw;
      out.result = SignatureCheck::Result::damaged;
      out.detail = fmt::format("{}: the file is damaged: {}", path(), e.what());
      return out;
    }
  }
  out.binaries = m.binaries;
  out.tuning = m.tuning;
  if (!m.problem.empty()) {
    out.result = SignatureCheck::Result::damaged;
    out.detail = fmt::format("{}: {}; the file was changed or damaged after it was written", path(), m.problem);
    return out;
  }
  if (sigs.empty()) {
    out.result = SignatureCheck::Result::unsigned_;
    out.detail = fmt::format("{}: the file carries no signature (sign it with `ktune cache sign --key K`)", path());
    return out;
  }
  const std::string message = signed_message(m.sha256);
  std::string trusted_ids, signer_ids;
  for (const PublicKey& k : trusted) trusted_ids += (trusted_ids.empty() ? "" : ", ") + k.id();
  for (const SignatureRecord& s : sigs) {
    signer_ids += (signer_ids.empty() ? "" : ", ") + s.key_id;
    for (const PublicKey& k : trusted) {
      if (s.public_key_hex != k.hex()) continue;
      std::array<uint8_t, crypto_sign_BYTES> sig{};
      const bool well_formed = from_hex(s.signature_hex, sig.data(), sig.size());
      if (well_formed && crypto_sign_verify_detached(sig.data(), reinterpret_cast<const unsigned char*>(message.data()),
                                                     message.size(), k.bytes.data()) == 0) {
        out.result = SignatureCheck::Result::valid;
        out.key_id = k.id();
        out.detail = fmt::format("{}: signed by trusted key {} ({}) over {} binaries and {} tuning rows", path(),
                                 k.id(), k.origin, m.binaries, m.tuning);
        out.rows = std::make_shared<const std::unordered_set<std::string>>(m.row_digests.begin(),
                                                                           m.row_digests.end());
        return out;
      }
      out.result = SignatureCheck::Result::invalid;
      out.key_id = k.id();
      out.detail = fmt::format(
          "{}: the signature by trusted key {} does not match the file's rows (signed over {} binaries and {} tuning "
          "rows; the file has {} and {}): rows were added, removed or changed after signing",
          path(), k.id(), s.binaries, s.tuning, m.binaries, m.tuning);
    }
  }
  if (out.result == SignatureCheck::Result::invalid) return out;
  out.result = SignatureCheck::Result::untrusted;
  out.detail = fmt::format("{}: signed only by key(s) {}, none of them trusted (trusted: {})", path(), signer_ids,
                           trusted_ids.empty() ? "none given" : trusted_ids);
  return out;
}

}  // namespace ktune::cache
