// The worker side of a multi-device warmup (`ktune warmup-worker`): announces what it tunes for, then tunes
// each key its coordinator sends on this process's current device (a GPU, or the host CPU), storing each row
// before it answers. A key already tuned for its fingerprint is answered "done earlier" without measuring, so
// a key retaken after another worker died (having stored its row or not) is never tuned twice.
#pragma once

#include <string>

#include "ktune/export.hpp"
#include "ktune/runtime.hpp"

namespace ktune::autotune {

struct TuneWorkerOptions {
  int fd = 3;          // the socket to the coordinator
  bool host = false;   // tune on the host CPU (Arch "host") instead of the current GPU
  int index = 0;       // the GPU ordinal, or the host worker's number: recorded in rows, shown in progress
};

// Runs until the coordinator closes the socket. Returns the process exit status: 0 after a clean end, 1 when
// the worker could not start (it sends {"fatal": ...} first) or lost its coordinator.
//
// Test hook: KTUNE_TEST_WORKER_STALL="<index>:<k>:<file>" makes the worker of that index, on the k-th key it
// measures, write its pid to <file> and stop (forever) after measuring and before storing the row, so a test
// can SIGKILL a worker in the middle of a key deterministically.
KTUNE_API int run_tune_worker(Runtime& rt, const TuneWorkerOptions& options);

// For a worker that fails before run_tune_worker (no GPU, no writable cache): tells the coordinator why, so
// its report names the reason. Best effort: nothing happens when the socket is gone.
KTUNE_API void send_worker_fatal(int fd, const std::string& why);

}  // namespace ktune::autotune
