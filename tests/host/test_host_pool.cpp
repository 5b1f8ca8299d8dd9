// The host thread pool across fork(): a child has none of the parent's workers (fork copies only the calling
// thread), so its first job must start workers of its own instead of waiting for ones that do not exist --
// what a Python multiprocessing or DataLoader worker forked after a host call does.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

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
