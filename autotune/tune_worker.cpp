#include "autotune/tune_worker.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "autotune/tuner.hpp"
#include "autotune/worker_protocol.hpp"
#include "ktune/tuning.hpp"

namespace ktune::autotune {
namespace {

using Clock = std::chrono::steady_clock;

// KTUNE_TEST_WORKER_STALL="<index>:<k>:<file>" for this worker's index: the key number to stall at and the
// file to write the pid to; k = 0 when the hook is off for this worker.
struct StallHook {
  int at_key = 0;
  std::string pid_file;
};

StallHook stall_hook(int index) {
  StallHook h;
  const char* env = std::getenv("KTUNE_TEST_WORKER_STALL");
  if (!env || !*env) return h;
  int worker = -1, key = 0, used = 0;
  if (std::sscanf(env, "%d:%d:%n", &worker, &key, &used) != 2 || used == 0 || env[used] == '\0') {
    fmt::print(stderr, "ktune warmup-worker: KTUNE_TEST_WORKER_STALL: expected <index>:<k>:<file>, got '{}'\n", env);
    std::exit(2);
  }
  if (worker != index) return h;
  h.at_key = key;
  h.pid_file = env + used;
  return h;
}

[[noreturn]] void stall(const std::string& pid_file) {
  const std::string tmp = pid_file + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    fmt::print(f, "{}\n", static_cast<long>(::getpid()));
    std::fclose(f);
    std::rename(tmp.c_str(), pid_file.c_str());  // the test never reads a half-written pid
  }
  for (;;) ::pause();
}

TaskResult run_task(Runtime& rt, const TuneWorkerOptions& opt, const TuneTask& task, int& measured,
                    const StallHook& hook) {
  TaskResult r;
  r.id = task.id;
  auto t0 = Clock::now();
  try {
    const std::string key = tuning_key(task.problem_key, task.buckets);
    const KeyClaim claim = claim_key(rt, task.family, key, opt.host, task.retune, task.flight_wait_s);
    if (!claim.winner.empty()) {
      r.status = "done earlier";
      r.winner = claim.winner;
      return r;
    }
    if (!claim.note.empty())
      fmt::print(stderr, "ktune warmup-worker {}: {} {}: {}\n", opt.index, task.family, key, claim.note);
    TuneOptions to;
    to.measure = task.measure;
    to.noise_fraction = task.noise_fraction;
    to.compile_jobs = task.compile_jobs;
    to.host = opt.host;
    to.device_index = opt.index;
    const int this_key = ++measured;
    if (hook.at_key == this_key) to.before_store = [&hook] { stall(hook.pid_file); };
    TuneOutcome o = tune(rt, task.family, task.problem_key, task.buckets, to);
    r.status = "tuned";
    r.winner = o.winner;
  } catch (const std::exception& e) {
    r.status = std::string("failed: ") + e.what();
  }
  r.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return r;
}

}  // namespace

void send_worker_fatal(int fd, const std::string& why) {
  WorkerHello h;
  h.fatal = why.empty() ? std::string("the worker failed to start") : why;
  LineChannel(fd).send_line(encode(h));
}

int run_tune_worker(Runtime& rt, const TuneWorkerOptions& opt) {
  LineChannel channel(opt.fd);
  WorkerHello hello;
  try {
    hello.arch = opt.host ? std::string("host") : rt.current_arch().str();
    hello.fingerprint = opt.host ? rt.host_fingerprint() : rt.device_fingerprint();
  } catch (const std::exception& e) {
    hello.fatal = e.what();
  }
  if (!channel.send_line(encode(hello)) || !hello.fatal.empty()) return 1;
  const StallHook hook = stall_hook(opt.index);
  int measured = 0;
  while (auto line = channel.read_line()) {
    TuneTask task;
    try {
      task = decode_task(*line);
    } catch (const std::exception& e) {
      fmt::print(stderr, "ktune warmup-worker {}: {}\n", opt.index, e.what());
      return 1;
    }
    if (!channel.send_line(encode(run_task(rt, opt, task, measured, hook)))) return 1;
  }
  return 0;
}

}  // namespace ktune::autotune
