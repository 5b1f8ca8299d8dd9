// A libFuzzer-compatible driver for builds without clang's -fsanitize=fuzzer (the default g++ build and CI):
// runs every input file of the given corpus files/directories, then mutates them at random until
// -max_total_time=SECONDS or -runs=N (whichever comes first). No coverage feedback: it replays the corpus and
// shakes it; the real libFuzzer build (KTUNE_FUZZ=ON, clang) is what explores. A failing property aborts.
//   fuzz_<target> [-max_total_time=S] [-runs=N] [-seed=N] CORPUS_DIR_OR_FILE...
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

const char* const kTokens[] = {"0", "-1", "1e309", "4294967296", "2147483648", "-9223372036854775809", "null",
                               "true", "{", "}", "[", "]", "\"", "\\u0000", "\\ud800", ",", ":", ".", "..",
                               "d128", "h32", "kv8", "p32", "q16", "sink", "win", "bf16", "e4m3", "sm_90a",
                               "\xff", "\xc0\x80", "SQLite format 3"};

void mutate(std::vector<uint8_t>& b, const std::vector<std::vector<uint8_t>>& corpus, std::mt19937_64& rng) {
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) {
    const size_t at = b.empty() ? 0 : rng() % (b.size() + 1);
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
        break;
      case 2:  // insert a byte
        b.insert(b.begin() + static_cast<long>(at), static_cast<uint8_t>(rng()));
        break;
      case 3: {  // erase a range
        if (b.empty()) break;
        const size_t from = rng() % b.size(), len = 1 + rng() % std::min<size_t>(16, b.size() - from);
        b.erase(b.begin() + static_cast<long>(from), b.begin() + static_cast<long>(from + len));
        break;
      }
      case 4: {  // insert a token
        const char* t = kTokens[rng() % (sizeof kTokens / sizeof *kTokens)];
        b.insert(b.begin() + static_cast<long>(at), t, t + std::strlen(t));
        break;
      }
      case 5: {  // duplicate a range
        if (b.empty()) break;
        const size_t from = rng() % b.size(), len = 1 + rng() % std::min<size_t>(64, b.size() - from);
        std::vector<uint8_t> piece(b.begin() + static_cast<long>(from), b.begin() + static_cast<long>(from + len));
        b.insert(b.begin() + static_cast<long>(at), piece.begin(), piece.end());
        break;
      }
      default: {  // splice with another input
        const auto& other = corpus[rng() % corpus.size()];
        if (other.empty()) break;
        const size_t from = rng() % other.size(), len = 1 + rng() % std::min<size_t>(64, other.size() - from);
        b.insert(b.begin() + static_cast<long>(at), other.begin() + static_cast<long>(from),
                 other.begin() + static_cast<long>(from + len));
        break;
      }
    }
  }
  if (b.size() > (1u << 20)) b.resize(1u << 20);
}

}  // namespace

int main(int argc, char** argv) {
  double max_seconds = 10;
  long long max_runs = -1;
  uint64_t seed = 1;
  std::vector<std::vector<uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-max_total_time=", 0) == 0) max_seconds = std::atof(a.c_str() + 16);
    else if (a.rfind("-runs=", 0) == 0) max_runs = std::atoll(a.c_str() + 6);
    else if (a.rfind("-seed=", 0) == 0) seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-", 0) == 0) std::fprintf(stderr, "standalone fuzz: ignoring %s\n", a.c_str());
    else if (std::filesystem::is_directory(a)) {
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
    } else {
      corpus.push_back(read_file(a));
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  const auto t0 = std::chrono::steady_clock::now();
  long long runs = 0;
  for (const auto& input : corpus) {
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
  }
  std::mt19937_64 rng(seed);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while ((max_runs < 0 || runs < max_runs) && elapsed() < max_seconds) {
    std::vector<uint8_t> b = corpus[rng() % corpus.size()];
    mutate(b, corpus, rng);
    LLVMFuzzerTestOneInput(b.data(), b.size());
    ++runs;
  }
  std::printf("standalone fuzz %s: %zu corpus inputs, %lld executions in %.1f s, no property failed\n", argv[0],
              corpus.size(), runs, elapsed());
  return 0;
}
