// Tuning keys spread over worker processes (one per GPU, or N on the host CPU), for a multi-device warmup.
//
// The coordinator (this process) deals keys out over each worker's socket, one key at a time per worker, from
// a queue per group of identical workers: workers whose arch and device fingerprint are equal share a queue,
// so each key is tuned once for them all, while a worker of another fingerprint tunes its own copy of every
// key of its arch. A worker stores each row before it answers. When a worker dies (its socket reads end of
// stream; waitpid says how), the key it held goes back to the front of its group's queue for another worker,
// and nothing of it was counted; a key whose worker dies twice is failed rather than offered to a third, so one
// key that crashes its GPU cannot take every worker down. When no worker of a group is left, its remaining keys
// fail (a later warmup resumes them: tuned keys are skipped). With a key timeout, a worker that sits on one key
// longer than that is killed and treated the same way.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "autotune/worker_protocol.hpp"

namespace ktune::autotune {

struct PoolWorker {
  bool host = false;  // a host CPU worker (arch "host"); else a GPU worker
  int index = 0;      // the GPU ordinal, or the host worker's number
};

struct PoolTask {
  std::string arch;  // the groups of this arch tune it
  TuneTask task;     // task.id is ignored: the pool numbers entries itself
};

struct PoolOptions {
  std::string executable;  // the ktune CLI (default_worker_executable())
  std::string cache_path;  // the cache search path the workers open
  std::vector<PoolWorker> workers;
  std::function<bool()> out_of_budget;  // true: deal no further key
  std::function<double()> flight_wait_s;  // a dealt key's TuneTask::flight_wait_s (unset: kTuningFlightWait_s)
  // > 0: a worker that has not answered a key (or said hello after its start) within this many seconds is
  // taken for hung (a kernel that never ends) and SIGKILLed; its key is retaken like any dead worker's.
  // 0: wait as long as it takes.
  double key_timeout_s = 0;
  // Called once per finished key: what = "[dev 1] 12/71 <tuning key>" (this worker's count / its group's keys);
  // done/total over every key of every group.
  std::function<void(const std::string& what, size_t done, size_t total)> progress;
};

struct PoolOutcome {
  size_t task = 0;     // index into the tasks given
  int device = -1;     // the worker that finished it (-1: none did)
  std::string status;  // "tuned", "done earlier", "skipped: budget exhausted", "failed: ..."
  std::string winner;
  double ms = 0;
  std::string fingerprint;  // the device fingerprint of the workers the task was queued for ("" before any hello)
};

struct PoolReport {
  std::vector<PoolOutcome> outcomes;  // one per (task, group of its arch); a task with no group: one, failed
  int workers_started = 0;            // workers that said hello
  int workers_lost = 0;               // workers that died or could not start
  int retaken = 0;                    // keys given to another worker after their first worker died
  std::vector<std::string> problems;  // "dev 1 (pid 123) was killed by signal 9 (Killed) while tuning ..."
  bool budget_exhausted = false;
};

// Throws Error(internal, "warmup") when a worker process cannot be started at all (the executable is
// missing); workers that start and then fail are reported in the result instead.
PoolReport run_worker_pool(const PoolOptions& options, const std::vector<PoolTask>& tasks);

// "dev 1" for GPU 1, "host 0" for host worker 0.
std::string worker_label(const PoolWorker& w);

}  // namespace ktune::autotune
