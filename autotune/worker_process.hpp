// One tuning worker: a child process running `ktune warmup-worker`, joined to its coordinator by a socket that
// is the child's fd 3. A process rather than a thread, so that a fault or a hung kernel on one GPU takes down
// that worker only. The child's stdout is sent to its stderr, so nothing it prints can corrupt a coordinator's
// --json output on stdout.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "autotune/worker_protocol.hpp"

namespace ktune::autotune {

class WorkerProcess {
 public:
  // Starts `executable` with `args` (argv[1..]) and the environment of this process. Throws
  // Error(internal, "warmup") naming the executable when it cannot be started.
  WorkerProcess(const std::string& executable, const std::vector<std::string>& args);
  ~WorkerProcess();  // a worker still running is killed (SIGKILL) and reaped, waiting a bounded time
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  LineChannel& channel() { return channel_; }
  // Closes our end of the socket: the worker reads end of stream and exits.
  void close_channel();
  void kill_now();  // SIGKILL
  // Waits for the process to end and says how: "exited with status 0", "killed by signal 9 (Killed)".
  // Returns the same text on later calls. exited_ok() is true only for exit status 0.
  const std::string& wait();
  // wait(), for at most `seconds`: false when the process is still running then (it stays unreaped).
  bool wait_for(double seconds);
  // Ends the worker within bounded time: waits `grace_s` for it to exit by itself, then SIGKILLs it and waits a
  // little more. Says how it ended, or that it did not (a process stuck in the kernel, e.g. in a GPU driver call,
  // may outlive SIGKILL for a while: it is left to the system rather than block the caller).
  const std::string& end(double grace_s);
  bool exited_ok() const { return reaped_ && exit_ok_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  LineChannel channel_{-1};
  bool reaped_ = false, exit_ok_ = false;
  std::string how_;
};

// The ktune CLI that worker processes run: $KTUNE_CLI when set, else `ktune` in the bin/ folder beside the
// folder holding libktune.so (an install tree or a build tree), else next to the library. Throws
// Error(not_found, "warmup") naming where it looked and how to point at one.
std::string default_worker_executable();

}  // namespace ktune::autotune
