// SHA-256 (FIPS 180-4), computed by libsodium's crypto_hash_sha256. Used for cache keys and for checking that a
// stored blob is the one that was written.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ktune::cache {

// Incremental hasher. update() may be called any number of times; digest()/hex_digest() do not disturb the
// running state, so more data can still be added afterwards (the result then covers everything so far).
class Sha256 {
 public:
  Sha256();
  Sha256& update(const void* data, size_t n);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest() const;
  std::string hex_digest() const;  // 64 lowercase hex characters

 private:
  // libsodium's crypto_hash_sha256_state, held as bytes so this header does not need sodium.h (the library
  // links libsodium privately); sha256.cpp checks that it fits.
  alignas(8) std::array<unsigned char, 128> state_;
};

std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(std::string_view s);

}  // namespace ktune::cache
