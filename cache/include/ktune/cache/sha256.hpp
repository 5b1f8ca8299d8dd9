// SHA-256 (FIPS 180-4). Used for cache keys and for checking that a stored blob is the one that was written.
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
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_;
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(std::string_view s);

}  // namespace ktune::cache
