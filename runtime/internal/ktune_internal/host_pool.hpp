// The host launchers' thread pool: persistent workers that split a range of work items with the calling
// thread. One job runs at a time (concurrent callers queue); items are handed out in chunks of `grain` through
// an atomic counter, so uneven items (ragged requests) balance themselves.
#pragma once

#include <functional>

namespace ktune::detail {

class HostPool {
 public:
  static HostPool& instance();  // process-wide, never destroyed
  // Runs fn(begin, end) over [0, items) on min(threads, chunks) threads, the caller being one of them; returns
  // when every item is done. threads <= 0: the hardware concurrency. The first exception fn throws is
  // rethrown here after the job has drained.
  void run(int threads, int items, int grain, const std::function<void(int, int)>& fn);
  static int hardware_threads();

  struct State;

 private:
  HostPool();
  State* s_;
};

}  // namespace ktune::detail
