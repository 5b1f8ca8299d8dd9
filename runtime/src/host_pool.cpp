#include "ktune_internal/host_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cstdint>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace ktune::detail {
namespace {

// The stack a work item may need: xqa_decode keeps a row group in stack arrays (up to ~920 KB at head_dim 256,
// 256 rows, 128-token tiles; docs/host_backend.md). Workers get kWorkerStack whatever RLIMIT_STACK says; a
// calling thread takes a share of the items only when this much of its own stack is left, so a host call from a
// thread with a small stack (a JVM's or a green-thread runtime's 256 KB-1 MB) runs on the workers instead of
// overflowing.
constexpr size_t kItemStack = size_t(2) << 20;
constexpr size_t kWorkerStack = size_t(8) << 20;

// The calling thread's stack as [lo, hi) (both 0 when unknown), asked once per thread: for the main thread glibc
// reads /proc/self/maps.
struct StackBounds {
  uintptr_t lo = 0, hi = 0;
};
StackBounds stack_bounds() {
  thread_local const StackBounds bounds = [] {
    StackBounds b;
    pthread_attr_t attr;
    if (::pthread_getattr_np(::pthread_self(), &attr) != 0) return b;
    void* lo = nullptr;
    size_t size = 0;
    if (::pthread_attr_getstack(&attr, &lo, &size) == 0) {
      b.lo = reinterpret_cast<uintptr_t>(lo);
      b.hi = b.lo + size;
    }
    ::pthread_attr_destroy(&attr);
    return b;
  }();
  return bounds;
}

// Whether the calling thread has kItemStack of stack left below this frame (stacks grow down on every target
// ktune builds for). A frame outside the thread's own stack (a fiber or coroutine with a stack of its own, which
// pthread does not describe) or unknown bounds count as no.
bool caller_has_item_stack() {
  const StackBounds b = stack_bounds();
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return b.lo != 0 && here < b.hi && here >= b.lo && here - b.lo >= kItemStack;
}

}  // namespace

struct HostPool::State {
  std::mutex run_mutex;  // one job at a time
  std::mutex m;
  std::condition_variable start_cv, done_cv;
  int workers = 0;  // started (detached: they live as long as the process)
  unsigned long long generation = 0;
  int helpers = 0;  // workers [0, helpers) take part in the current job
  int pending = 0;  // helpers not finished yet
  // the current job
  const std::function<void(int, int)>* fn = nullptr;
  const std::fenv_t* fp_env = nullptr;  // the caller's floating-point environment, which its helpers take on
  int items = 0, grain = 1;
  // 64 bits: every helper takes one grain past the end before it stops, which could pass 2^31 - 1.
  std::atomic<int64_t> next{0};
  std::exception_ptr error;

  void work() {
    for (;;) {
      const int64_t b = next.fetch_add(grain);
      if (b >= items) return;
      try {
        (*fn)(static_cast<int>(b), static_cast<int>(std::min<int64_t>(items, b + grain)));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next.store(items);  // stop handing out work
      }
    }
  }

  // Starts worker `workers` with a stack of kWorkerStack; false (nothing started) when the system refuses a thread
  // (RLIMIT_NPROC, address space). Called with m held.
  bool start_worker() {
    struct Start {
      State* state;
      int index;
    };
    auto start = std::make_unique<Start>(Start{this, workers});
    pthread_attr_t attr;
    if (::pthread_attr_init(&attr) != 0) return false;
    int rc = ::pthread_attr_setstacksize(&attr, kWorkerStack);
    if (rc == 0) rc = ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    if (rc == 0)
      rc = ::pthread_create(&thread, &attr, [](void* arg) -> void* {
        const std::unique_ptr<Start> st(static_cast<Start*>(arg));
        st->state->worker(st->index);
        return nullptr;
      }, start.get());
    ::pthread_attr_destroy(&attr);
    if (rc != 0) return false;
    start.release();  // the thread owns it now
    ++workers;
    return true;
  }

  void worker(int index) {
    unsigned long long seen = 0;
    std::unique_lock<std::mutex> lock(m);
    for (;;) {
      start_cv.wait(lock, [&] { return generation != seen; });
      seen = generation;
      if (index >= helpers) continue;
      lock.unlock();
      // The job runs under the caller's floating-point environment (rounding, flush-to-zero / denormals-are-zero
      // in MXCSR on x86): a helper started by another thread would otherwise round or flush its items
      // differently from the caller's, and one call's rows would disagree with each other.
      std::fenv_t own;
      std::fegetenv(&own);
      std::fesetenv(fp_env);
      work();
      std::fesetenv(&own);
      lock.lock();
      if (--pending == 0) done_cv.notify_all();
    }
  }
};

HostPool::HostPool() : s_(new State) {}

namespace {
HostPool* g_pool = nullptr;  // the instance, for the fork handler (set before it is registered)
}  // namespace

HostPool& HostPool::instance() {
  static HostPool* pool = [] {
    HostPool* p = new HostPool();  // workers live as long as the process (detached at exit)
    g_pool = p;
    // A forked child has none of the workers (fork copies only the calling thread) and may have copied a mutex
    // some worker or caller held: it starts from a fresh state, with workers of its own on its first call. The
    // parent's state is left as it is (destroying a possibly locked mutex is undefined); the child runs one
    // thread while the handler runs, so the swap needs no lock.
    ::pthread_atfork(nullptr, nullptr, [] { g_pool->s_ = new State; });
    return p;
  }();
  return *pool;
}

int HostPool::hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void HostPool::run(int threads, int items, int grain, const std::function<void(int, int)>& fn) {
  if (items <= 0) return;
  grain = std::max(1, grain);
  if (threads <= 0) threads = hardware_threads();
  const int chunks = static_cast<int>((int64_t{items} + grain - 1) / grain);
  const bool caller_works = caller_has_item_stack();
  int helpers = std::min({threads, chunks, 1024}) - (caller_works ? 1 : 0);
  if (helpers <= 0) {  // the caller alone: no shared state, so no wait behind another thread's job
    fn(0, items);
    return;
  }
  State& s = *s_;
  std::lock_guard<std::mutex> run_lock(s.run_mutex);
  std::fenv_t fp_env;
  std::fegetenv(&fp_env);
  {
    std::lock_guard<std::mutex> lock(s.m);
    while (s.workers < helpers && s.start_worker()) {
    }
    helpers = std::min(helpers, s.workers);  // fewer threads than asked for still do the whole job
    if (helpers > 0) {
      s.fn = &fn;
      s.fp_env = &fp_env;
      s.items = items;
      s.grain = grain;
      s.next.store(0);
      s.error = nullptr;
      s.helpers = helpers;
      s.pending = helpers;
      ++s.generation;
    }
  }
  if (helpers == 0) {  // the system gave no thread
    if (!caller_works)
      throw std::system_error(EAGAIN, std::generic_category(),
                              "host pool: no worker thread could be started, and the calling thread has less than " +
                                  std::to_string(kItemStack >> 20) + " MB of stack left for a work item");
    fn(0, items);
    return;
  }
  s.start_cv.notify_all();
  if (caller_works) s.work();
  std::unique_lock<std::mutex> lock(s.m);
  s.done_cv.wait(lock, [&] { return s.pending == 0; });
  s.fn = nullptr;
  if (s.error) {
    std::exception_ptr e = s.error;
    s.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace ktune::detail
