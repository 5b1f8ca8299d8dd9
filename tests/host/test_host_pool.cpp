// The host thread pool across fork(): a child has none of the parent's workers (fork copies only the calling
// thread), so its first job must start workers of its own instead of waiting for ones that do not exist --
// what a Python multiprocessing or DataLoader worker forked after a host call does.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "ktune_internal/host_pool.hpp"

using ktune::detail::HostPool;

namespace {

// Sums 0..items-1 on `threads` threads through the pool.
long long pooled_sum(int threads, int items) {
  std::atomic<long long> sum{0};
  HostPool::instance().run(threads, items, 1, [&](int b, int e) {
    for (int i = b; i < e; ++i) sum += i;
  });
  return sum.load();
}

}  // namespace

TEST_CASE("host pool: a forked child runs jobs on threads of its own", "[host][pool]") {
  REQUIRE(pooled_sum(4, 1000) == 499500);  // the parent's workers exist now
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(20);  // a hang ends the child by SIGALRM, which the parent reports
    const bool ok = pooled_sum(4, 1000) == 499500 && pooled_sum(3, 77) == 2926;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child wait status " << status << (WIFSIGNALED(status) ? " (signal: the job hung)" : ""));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(pooled_sum(4, 1000) == 499500);  // the parent's pool is untouched
}

TEST_CASE("host pool: every item of a job runs under the caller's floating-point environment", "[host][pool]") {
  // Workers started by another thread keep no floating-point state of their own into a job: a caller that rounds
  // toward zero gets that rounding on every item, and the default back on the next job.
  constexpr int kItems = 64;
  const auto rounded_up = [](int threads) {
    std::atomic<int> up{0};
    HostPool::instance().run(threads, kItems, 1, [&](int b, int e) {
      for (int i = b; i < e; ++i) {
        volatile float one = 1.0f, third = 3.0f;
        const float q = one / third;  // 0x3EAAAAAB to nearest, 0x3EAAAAAA toward zero
        up += q > 0.33333332f ? 1 : 0;
      }
    });
    return up.load();
  };
  std::thread([] { HostPool::instance().run(4, 16, 1, [](int, int) {}); }).join();  // workers from another thread
  REQUIRE(rounded_up(4) == kItems);
  REQUIRE(std::fesetround(FE_TOWARDZERO) == 0);
  const int toward_zero = rounded_up(4);
  std::fesetround(FE_TONEAREST);
  CHECK(toward_zero == 0);
  CHECK(rounded_up(4) == kItems);
}

TEST_CASE("host pool: a job the caller runs alone does not wait for another thread's job", "[host][pool]") {
  std::atomic<bool> started{false}, release{false}, other_done{false};
  std::thread other([&] {
    HostPool::instance().run(2, 2, 1, [&](int, int) {
      started = true;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!release && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
    other_done = true;
  });
  while (!started) std::this_thread::yield();
  int ran = 0;
  HostPool::instance().run(1, 5, 1, [&](int b, int e) { ran += e - b; });  // threads = 1: the caller alone
  const bool finished_first = !other_done;  // the other job holds its items until `release` (or 5 s)
  release = true;
  other.join();
  CHECK(ran == 5);
  CHECK(finished_first);
}

TEST_CASE("host pool: a job of items near 2^31 hands out only ranges inside it", "[host][pool]") {
  // Each helper takes one grain past the end before it stops: with items near 2^31 that count must not wrap to a
  // negative begin, which would run items that do not exist (3 grains of work, 4 threads: the fourth grain past
  // the start is 2^31).
  constexpr int kGrain = 1 << 29, kItems = 3 * kGrain;
  std::mutex m;
  std::vector<std::pair<int, int>> ranges;
  HostPool::instance().run(4, kItems, kGrain, [&](int b, int e) {
    std::lock_guard<std::mutex> lock(m);
    ranges.emplace_back(b, e);
  });
  std::sort(ranges.begin(), ranges.end());
  REQUIRE_FALSE(ranges.empty());
  long long covered = 0;
  for (const auto& [b, e] : ranges) {
    CHECK(b == covered);
    CHECK(e > b);
    CHECK(e <= kItems);
    covered = e;
  }
  CHECK(covered == kItems);
}
