// ktune_stress: load and crash harness for the cache and the runtime (docs/reliability.md).
#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <string>

#include "stress_common.hpp"

namespace {

const char* kUsage = R"(usage: ktune_stress <mode> [options]
  cache    N processes x M mixed operations on one cache file
           --procs 16 --ops 1000 --verify-every 250 --seed 1
  runtime  P processes x T threads racing through the real Runtime (NVRTC) for K missing kernels
           --procs 4 --threads 32 --kernels 4 --arch sm_90a [--load: Runtime::get on GPU 0]
  crash    writers killed with SIGKILL at random points, R rounds; the file checked after each
           --rounds 100 --writers 2 --max-delay-ms 100 --rounds-per-file 25 --seed 1
Every mode takes --json FILE (summary), --dir DIR (work directory; default a new one under $TMPDIR) and
--keep (keep the files). Exit status 0 only when every failure counter is 0; 77 when NVRTC is missing
(runtime mode: skipped).
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    fmt::print("{}", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string mode = argv[1];
  try {
    ktune::stress::Options o(argc, argv, 2);
    if (mode == "cache") return ktune::stress::run_cache_stress(o);
    if (mode == "runtime") return ktune::stress::run_runtime_race(o);
    if (mode == "crash") return ktune::stress::run_crash(o);
    fmt::print(stderr, "ktune_stress: unknown mode '{}'\n{}", mode, kUsage);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ktune_stress {}: {}\n", mode, e.what());
    return 2;
  }
}
