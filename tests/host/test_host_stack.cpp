// Host calls from threads with small stacks. The calling thread takes a share of a host call's work items only
// when it has the stack a work item needs (xqa_decode keeps a row group in stack arrays, up to ~920 KB); a thread
// with less (a JVM's or a green-thread runtime's 256 KB - 1 MB) leaves its share to the pool's workers, whose
// stacks the pool sets itself. Before, such a call overflowed the caller's stack.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "common/dtype.h"
#include "host/host_support.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "ktune_internal/host_pool.hpp"
#include "support/random_inputs.hpp"
#include "support/seed.hpp"

using namespace ktune;
using ktune::detail::HostPool;
namespace kc = ::ktune_common;

namespace {

constexpr size_t kSmallStack = 256 << 10;

// Runs fn on a new thread with a stack of `bytes` and waits for it.
template <class F>
void on_thread_with_stack(size_t bytes, F fn) {
  pthread_attr_t attr;
  REQUIRE(::pthread_attr_init(&attr) == 0);
  REQUIRE(::pthread_attr_setstacksize(&attr, bytes) == 0);
  pthread_t t;
  const int rc = ::pthread_create(&t, &attr, [](void* f) -> void* {
    (*static_cast<F*>(f))();
    return nullptr;
  }, &fn);
  ::pthread_attr_destroy(&attr);
  REQUIRE(rc == 0);
  REQUIRE(::pthread_join(t, nullptr) == 0);
}

// The threads that ran items of one pool job started on the calling thread, and whether the sum came out right.
struct JobRun {
  std::set<pthread_t> runners;
  bool sum_ok = false;
};
JobRun pooled_job(int threads, int items) {
  JobRun r;
  std::mutex m;
  std::atomic<long long> sum{0};
  HostPool::instance().run(threads, items, 1, [&](int b, int e) {
    {
      std::lock_guard<std::mutex> lock(m);
      r.runners.insert(::pthread_self());
    }
    for (int i = b; i < e; ++i) sum += i;
  });
  r.sum_ok = sum.load() == 1LL * items * (items - 1) / 2;
  return r;
}

}  // namespace

TEST_CASE("host pool: a caller with a small stack leaves its share to the workers", "[host][pool]") {
  // A thread with a usual stack (8 MB here) works alongside the workers.
  JobRun big;
  pthread_t big_caller{};
  on_thread_with_stack(size_t(8) << 20, [&] {
    big_caller = ::pthread_self();
    big = pooled_job(1, 64);  // one thread asked for: the caller alone
  });
  CHECK(big.sum_ok);
  CHECK(big.runners == std::set<pthread_t>{big_caller});

  for (int threads : {1, 4}) {
    INFO(threads << " threads");
    JobRun small;
    pthread_t small_caller{};
    on_thread_with_stack(kSmallStack, [&] {
      small_caller = ::pthread_self();
      small = pooled_job(threads, 64);
    });
    CHECK(small.sum_ok);
    CHECK_FALSE(small.runners.empty());
    CHECK(small.runners.count(small_caller) == 0);  // every item ran on a worker
    CHECK(small.runners.size() <= size_t(threads));
  }
}

TEST_CASE("host pool: a caller on a fiber's stack of its own leaves its share to the workers", "[host][pool]") {
  // A coroutine or green-thread runtime switches stacks under one pthread; pthread describes only the thread's
  // own stack, so a frame outside it counts as too little stack, wherever the fiber's stack was mapped. Here it
  // is mapped before the thread that runs the fiber, so (mappings being placed top-down) it lies above that
  // thread's stack: more than 2 MB above its lowest address.
  static JobRun run;
  static pthread_t caller;
  static ucontext_t thread_ctx, fiber_ctx;
  void* fiber_stack = ::mmap(nullptr, kSmallStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(fiber_stack != MAP_FAILED);
  on_thread_with_stack(size_t(8) << 20, [&] {
    REQUIRE(::getcontext(&fiber_ctx) == 0);
    fiber_ctx.uc_stack.ss_sp = fiber_stack;
    fiber_ctx.uc_stack.ss_size = kSmallStack;
    fiber_ctx.uc_link = &thread_ctx;
    ::makecontext(&fiber_ctx, [] {
      caller = ::pthread_self();
      run = pooled_job(4, 64);
    }, 0);
    REQUIRE(::swapcontext(&thread_ctx, &fiber_ctx) == 0);
  });
  ::munmap(fiber_stack, kSmallStack);
  CHECK(run.sum_ok);
  CHECK_FALSE(run.runners.empty());
  CHECK(run.runners.count(caller) == 0);
}

TEST_CASE("host xqa_decode from a thread with a 256 KB stack: the deepest row group runs, same bits",
          "[host][xqa][pool]") {
  KTUNE_REQUIRE_HOST();
  Runtime rt{RuntimeOptions::from_env()};
  // head_dim 256, 64 query tokens x group 4 = 256 rows a row group, 128-token tiles: the largest stack arrays.
  const xqa::Problem p =
      test::make_xqa_problem(256, 8, 2, 64, xqa::Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 64,
                             xqa::MaskKind::Causal, false, false, false, true);
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 300;
  o.seed = test::run_seed("host xqa small stack");
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  const size_t rows = size_t(c.num_tokens) * p.num_q_heads;
  std::vector<unsigned char> expect(std::max<size_t>(rows * p.head_dim * 2, 1), 0xFF), got = expect;
  std::vector<float> lse_expect(std::max<size_t>(rows, 1)), lse_got = lse_expect;
  auto call = [&](std::vector<unsigned char>& out, std::vector<float>& lse) {
    XqaDecodeArgs a = test::host_args(c, out.data(), lse.data());
    a.config = "t128.v16.u4";
    xqa_decode_host(rt, p, a, 2);
  };
  call(expect, lse_expect);  // the kernel is compiled and the pool started on this thread

  // In a child process: an overflow kills the child, not the test binary.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(60);
    bool ran = false;
    try {
      on_thread_with_stack(kSmallStack, [&] {
        call(got, lse_got);
        ran = true;
      });
    } catch (...) {
    }
    const bool same = ran && got == expect && std::memcmp(lse_got.data(), lse_expect.data(), lse_got.size() * 4) == 0;
    ::_exit(same ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child wait status " << status << (WIFSIGNALED(status) ? " (killed by a signal: the stack overflowed)" : ""));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 1: the small-stack call's output differs from the same call here
}
