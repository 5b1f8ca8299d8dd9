#include "ktune/cache/sha256.hpp"

#include <sodium.h>

#include <cstring>

namespace ktune::cache {
namespace {

static_assert(sizeof(crypto_hash_sha256_state) <= 128, "Sha256::state_ too small for crypto_hash_sha256_state");
static_assert(alignof(crypto_hash_sha256_state) <= 8, "Sha256::state_ under-aligned for crypto_hash_sha256_state");

crypto_hash_sha256_state* as_state(std::array<unsigned char, 128>& s) {
  return reinterpret_cast<crypto_hash_sha256_state*>(s.data());
}

}  // namespace

Sha256::Sha256() : state_{} { crypto_hash_sha256_init(as_state(state_)); }

Sha256& Sha256::update(const void* data, size_t n) {
  if (n > 0) crypto_hash_sha256_update(as_state(state_), static_cast<const unsigned char*>(data), n);
  return *this;
}

std::array<uint8_t, 32> Sha256::digest() const {
  // Finish a copy so the caller's hasher keeps its running state (the state is plain data).
  std::array<unsigned char, 128> copy = state_;
  std::array<uint8_t, 32> out{};
  crypto_hash_sha256_final(as_state(copy), out.data());
  return out;
}

std::string Sha256::hex_digest() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest()) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string sha256_hex(const void* data, size_t n) { return Sha256().update(data, n).hex_digest(); }
std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }

}  // namespace ktune::cache
