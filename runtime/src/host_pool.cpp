#include "ktune_internal/host_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ktune::detail {

struct HostPool::State {
  std::mutex run_mutex;  // one job at a time
  std::mutex m;
  std::condition_variable start_cv, done_cv;
  std::vector<std::thread> workers;
  unsigned long long generation = 0;
  int helpers = 0;  // workers [0, helpers) take part in the current job
  int pending = 0;  // helpers not finished yet
  // the current job
  const std::function<void(int, int)>* fn = nullptr;
  int items = 0, grain = 1;
  std::atomic<int> next{0};
  std::exception_ptr error;

  void work() {
    for (;;) {
      const int b = next.fetch_add(grain);
      if (b >= items) return;
      try {
        (*fn)(b, std::min(items, b + grain));
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
        next.store(items);  // stop handing out work
      }
    }
  }

  void worker(int index) {
    unsigned long long seen = 0;
    std::unique_lock<std::mutex> lock(m);
    for (;;) {
      start_cv.wait(lock, [&] { return generation != seen; });
      seen = generation;
      if (index >= helpers) continue;
      lock.unlock();
      work();
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
  const int chunks = (items + grain - 1) / grain;
  const int helpers = std::min({threads, chunks, 1024}) - 1;
  State& s = *s_;
  std::lock_guard<std::mutex> run_lock(s.run_mutex);
  if (helpers <= 0) {
    fn(0, items);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(s.m);
    while (static_cast<int>(s.workers.size()) < helpers) {
      const int index = static_cast<int>(s.workers.size());
      s.workers.emplace_back([&s, index] { s.worker(index); });
      s.workers.back().detach();
    }
    s.fn = &fn;
    s.items = items;
    s.grain = grain;
    s.next.store(0);
    s.error = nullptr;
    s.helpers = helpers;
    s.pending = helpers;
    ++s.generation;
  }
  s.start_cv.notify_all();
  s.work();
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
