#include "seed.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

namespace ktune::test {

namespace {

// Digits only: strtoull alone would take leading blanks, a sign ("-1" wraps to 2^64-1) and trailing junk.
bool parse_seed(const char* s, std::uint64_t* out) {
  if (!*s) return false;
  for (const char* c = s; *c; ++c)
    if (*c < '0' || *c > '9') return false;
  errno = 0;
  const unsigned long long v = std::strtoull(s, nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

}  // namespace

std::uint64_t run_seed(const char* label) {
  std::uint64_t seed = 0;
  const char* s = std::getenv("KTUNE_TEST_SEED");
  if (s && *s) {  // an empty value counts as unset, as `KTUNE_TEST_SEED= ktune_tests` means
    if (!parse_seed(s, &seed))
      throw std::invalid_argument("KTUNE_TEST_SEED=\"" + std::string(s) +
                                  "\" is not a seed: expected a decimal integer from 0 to 18446744073709551615");
  } else {
    std::random_device rd;
    seed = (std::uint64_t(rd()) << 32) ^ rd();
  }
  std::printf("%s: seed %llu (KTUNE_TEST_SEED=%llu replays it)\n", label, (unsigned long long)seed,
              (unsigned long long)seed);
  std::fflush(stdout);
  return seed;
}

}  // namespace ktune::test
