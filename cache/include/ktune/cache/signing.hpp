// Signed caches: Ed25519 (libsodium) signatures over a manifest of every row of a cache file.
//
// The manifest lists, in a fixed order, every binaries row as "binary <digest> <row digest>" and every tuning
// row as "tuning <row digest>"; a row digest covers every column of its row, a binary's blob through its
// SHA-256 (store.hpp). The signature is over "ktune-cache-signature-v1\n<sha256 of the manifest>\n" and lives
// in the file's `signatures` table (one row per key), so a signed file is still one file to ship.
//
// Checking recomputes every row digest from the columns (never trusting the stored one), rebuilds the manifest,
// and verifies each signature with the *trusted* key bytes (never the public key stored in the file). Blobs
// need not be hashed at open: every read re-hashes its blob against blob_sha256, which the row digest covers.
//
// Key files are one line of text: "ktune-ed25519-secret-key <128 hex>" (libsodium's 64-byte secret key, mode
// 0600) and "ktune-ed25519-public-key <64 hex>". A key's id is the first 16 hex digits of SHA-256(public key).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ktune/cache/store.hpp"

namespace ktune::cache {

struct PublicKey {
  std::array<uint8_t, 32> bytes{};
  std::string origin;  // the file it was read from, for messages
  std::string id() const;
  std::string hex() const;
};

struct SecretKey {
  std::array<uint8_t, 64> bytes{};  // seed followed by the public key (libsodium layout)
  std::string origin;
  SecretKey() = default;
  SecretKey(const SecretKey&) = default;
  SecretKey& operator=(const SecretKey&) = default;
  ~SecretKey();  // wipes the bytes
  PublicKey public_key() const;
};

// A fresh key pair from libsodium's CSPRNG.
SecretKey generate_secret_key();
// Writes the secret key (created 0600, never overwriting an existing file) and its public key. Throws CacheError.
void write_key_files(const SecretKey& key, const std::string& secret_path, const std::string& public_path);
SecretKey read_secret_key(const std::string& path);  // throws CacheError naming the file and what is wrong
PublicKey read_public_key(const std::string& path);
// A ':'- or ','-separated list of public key files (KTUNE_TRUSTED_KEYS). Empty entries are ignored.
std::vector<PublicKey> read_public_keys(const std::string& list);

struct SignatureRecord {
  std::string key_id, public_key_hex, manifest_sha256, signature_hex;
  int64_t binaries = 0, tuning = 0, signed_at = 0;
};

struct SignatureCheck {
  enum class Result {
    valid,     // a trusted key signed exactly these rows
    unsigned_, // no signature at all (or a schema v1 file, which cannot hold one)
    untrusted, // signed, but by no trusted key
    invalid,   // a trusted key's signature does not match the rows (added, removed or changed since signing)
    damaged,   // a row fails its own row digest or blob hash: the file is damaged whatever the signature
  };
  Result result = Result::unsigned_;
  std::string detail;  // one readable sentence: who signed what, or what is wrong and what to do
  std::string key_id;  // the trusted key that signed (valid)
  int64_t binaries = 0, tuning = 0;  // rows in the file
  std::shared_ptr<const std::unordered_set<std::string>> rows;  // valid: the row digests signed
  bool ok() const { return result == Result::valid; }
};

const char* signature_result_name(SignatureCheck::Result r);

// Signs an existing cache file in place (CacheDb::sign) and leaves its journal mode as it was: a file exported
// for shipping (rollback journal) stays one. Throws CacheError.
SignatureRecord sign_file(const std::string& path, const SecretKey& key);

}  // namespace ktune::cache
