#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "ktune/cache/sha256.hpp"

using ktune::cache::Sha256;
using ktune::cache::sha256_hex;

TEST_CASE("sha256 matches the FIPS 180-4 example vectors", "[cache][sha256]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnop"
                   "qrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  const std::string million(1000000, 'a');
  CHECK(sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 incremental updates equal one shot at every split", "[cache][sha256]") {
  const std::string million(1000000, 'a');
  Sha256 h;
  size_t pos = 0, step = 1;
  while (pos < million.size()) {  // uneven chunks cross the 64-byte block boundary in every way
    size_t n = std::min(step, million.size() - pos);
    h.update(million.data() + pos, n);
    pos += n;
    step = step * 7 % 1000 + 1;
  }
  CHECK(h.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  // Lengths around the padding boundaries (55, 56, 63, 64, 65 bytes), split at every position.
  for (size_t len : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {
    std::string msg(len, 'x');
    for (size_t i = 0; i < len; ++i) msg[i] = static_cast<char>('a' + i % 26);
    const std::string whole = sha256_hex(msg);
    for (size_t cut = 0; cut <= len; ++cut) {
      Sha256 s;
      s.update(std::string_view(msg).substr(0, cut)).update(std::string_view(msg).substr(cut));
      REQUIRE(s.hex_digest() == whole);
    }
  }
}

TEST_CASE("sha256 hex_digest does not disturb the running state", "[cache][sha256]") {
  Sha256 h;
  h.update("ab");
  CHECK(h.hex_digest() == sha256_hex("ab"));
  h.update("c");
  CHECK(h.hex_digest() == sha256_hex("abc"));
  CHECK(h.hex_digest() == h.hex_digest());
}

TEST_CASE("sha256 of a committed fixture equals the digest recorded for it", "[cache][sha256]") {
  // The digest was recorded with coreutils' sha256sum, independently of this code; the file is read in
  // uneven chunks so the streaming path is exercised on real data.
  std::ifstream in(std::string(KTUNE_TEST_DATA_DIR) + "/xqa_h200_oracle.bin", std::ios::binary);
  REQUIRE(in.good());
  Sha256 h;
  std::vector<char> buf(4093);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  CHECK(h.hex_digest() == "fcefd26e3e6cb7370944c220f064cf5a12744fbf5ba065b30d780e3933d1500d");
}
