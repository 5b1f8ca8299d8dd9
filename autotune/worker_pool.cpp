#include "autotune/worker_pool.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "autotune/tuner.hpp"
#include "autotune/worker_process.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "ktune_internal/log.hpp"

namespace ktune::autotune {
namespace {

using Clock = std::chrono::steady_clock;
using ktune::detail::log;
using ktune::detail::LogLevel;

// A key whose worker died this many times is failed instead of offered again: a kernel that faults its GPU
// would otherwise kill every worker in turn.
constexpr int kMaxAttempts = 2;
// How long a worker whose socket we closed (or that closed its own) may take to exit before it is SIGKILLed:
// enough to tear down a GPU context, and a bound for one that never reads its end of stream.
constexpr double kExitGraceS = 30;

enum class State { starting, idle, busy, gone };

struct Slot {
  PoolWorker spec;
  std::string label;
  std::unique_ptr<WorkerProcess> proc;
  State state = State::starting;
  std::string group;  // arch + "\n" + fingerprint, once it said hello
  size_t entry = 0;   // the entry it is tuning, when busy
  Clock::time_point given_at;  // when it was given that entry
  size_t done = 0;
};

// One key to tune for one group of identical workers.
struct Entry {
  size_t task = 0;
  std::string group;
  int attempts = 0;
  bool finished = false;
};

std::string key_text(const TuneTask& t) { return tuning_key(t.problem_key, t.buckets); }

class Coordinator {
 public:
  Coordinator(const PoolOptions& opt, const std::vector<PoolTask>& tasks) : opt_(opt), tasks_(tasks) {}

  PoolReport run() {
    start_workers();
    await_hellos();
    queue_entries();
    deal();
    while (any_busy()) {
      wait_for_answers();
      deal();
    }
    finish_leftovers();
    stop_workers();
    return std::move(report_);
  }

 private:
  void start_workers() {
    for (const PoolWorker& w : opt_.workers) {
      Slot s;
      s.spec = w;
      s.label = worker_label(w);
      std::vector<std::string> args = {"warmup-worker", w.host ? "--host-worker" : "--device", std::to_string(w.index)};
      if (!opt_.cache_path.empty()) args.insert(args.end(), {"--cache", opt_.cache_path});  // else $KTUNE_CACHE
      // The worker ends with this process (it sets a parent-death signal and checks that we are its parent).
      args.insert(args.end(), {"--parent", std::to_string(::getpid())});
      s.proc = std::make_unique<WorkerProcess>(opt_.executable, args);
      s.given_at = Clock::now();  // the key timeout also bounds the start (a driver that never answers)
      slots_.push_back(std::move(s));
    }
  }

  void await_hellos() {
    while (poll_slots(State::starting, next_timeout_ms(State::starting))) {
      const Clock::time_point polled = Clock::now();
      // What has arrived is read before the timeout is applied: a coordinator that was itself held up (stopped,
      // descheduled) must not take a worker whose hello is waiting for hung.
      for (size_t i : ready_) {
        Slot& s = slots_[i];
        if (s.state != State::starting) continue;
        // Its last words may arrive together with the end of the stream (a worker that says why it cannot
        // start, then exits): read them before reporting it lost.
        const bool open = s.proc->channel().fill();
        try {
          auto line = s.proc->channel().buffered_line();
          if (!line) {
            if (!open) lose(s, "before it started");
            continue;
          }
          WorkerHello h = decode_hello(*line);
          if (!h.fatal.empty()) {
            lose(s, "before it started: " + h.fatal);
            continue;
          }
          s.group = h.arch + "\n" + h.fingerprint;
          group_arch_[s.group] = h.arch;
          s.state = State::idle;
          ++report_.workers_started;
          if (!open) lose(s, "right after it started");
        } catch (const std::exception& e) {
          s.proc->kill_now();  // out of protocol: it will not end by itself
          lose(s, std::string("before it started: ") + e.what());
        }
      }
      kill_overdue(State::starting, polled);
    }
  }

  void queue_entries() {
    for (size_t t = 0; t < tasks_.size(); ++t) {
      bool queued = false;
      for (const auto& [group, arch] : group_arch_) {
        if (arch != tasks_[t].arch) continue;
        entries_.push_back({t, group});
        queues_[group].push_back(entries_.size() - 1);
        queued = true;
      }
      if (!queued) {
        PoolOutcome o;
        o.task = t;
        o.status = fmt::format("failed: no worker for arch {} started{}", tasks_[t].arch, problems_suffix());
        report_.outcomes.push_back(o);
      }
    }
    for (const auto& [group, queue] : queues_) group_size_[group] = queue.size();
  }

  // Gives every idle worker the next key of its group's queue.
  void deal() {
    for (Slot& s : slots_) {
      while (s.state == State::idle && !queues_[s.group].empty()) {
        if (opt_.out_of_budget && opt_.out_of_budget()) {
          report_.budget_exhausted = true;
          return;
        }
        const size_t e = queues_[s.group].front();
        queues_[s.group].pop_front();
        TuneTask task = tasks_[entries_[e].task].task;
        task.id = static_cast<int64_t>(e);
        task.flight_wait_s = opt_.flight_wait_s ? opt_.flight_wait_s() : kTuningFlightWait_s;
        if (entries_[e].attempts > 0) ++report_.retaken;  // its first worker died holding it
        s.entry = e;
        s.state = State::busy;
        s.given_at = Clock::now();
        if (!s.proc->channel().send_line(encode(task))) {
          // The worker never had the key: back to the front of the queue, not counted as a try that died.
          queues_[s.group].push_front(e);
          if (entries_[e].attempts > 0) --report_.retaken;
          s.state = State::idle;
          lose(s, "while it was being given " + key_text(task));
        }
      }
    }
  }

  void wait_for_answers() {
    if (!poll_slots(State::busy, next_timeout_ms(State::busy))) return;
    const Clock::time_point polled = Clock::now();
    // Answers that have arrived are read before the timeout is applied (see await_hellos).
    for (size_t i : ready_) {
      Slot& s = slots_[i];
      if (s.state != State::busy) continue;
      // An answer may arrive together with the end of the stream: read it before reporting the worker lost.
      const bool open = s.proc->channel().fill();
      while (s.state == State::busy) {
        try {
          auto line = s.proc->channel().buffered_line();
          if (!line) break;
          TaskResult r = decode_result(*line);
          if (r.id != static_cast<int64_t>(s.entry))
            throw Error(Status::internal, "warmup", fmt::format("answered key {}, was given {}", r.id, s.entry));
          finish(s, r);
        } catch (const std::exception& e) {
          s.proc->kill_now();
          lose(s, std::string("after a message out of protocol: ") + e.what());
        }
      }
      if (!open && s.state != State::gone)
        lose(s, s.state == State::busy ? "while tuning " + key_text(tasks_[entries_[s.entry].task].task)
                                       : std::string("between keys"));
    }
    kill_overdue(State::busy, polled);
  }

  void finish(Slot& s, const TaskResult& r) {
    Entry& e = entries_[s.entry];
    e.finished = true;
    PoolOutcome o;
    o.task = e.task;
    o.device = s.spec.index;
    o.status = r.status;
    o.winner = r.winner;
    o.ms = r.ms;
    report_.outcomes.push_back(o);
    s.state = State::idle;
    ++s.done;
    ++finished_;
    if (opt_.progress)
      opt_.progress(fmt::format("[{}] {}/{} {}", s.label, s.done, group_size_[e.group],
                                key_text(tasks_[e.task].task)),
                    finished_, entries_.size());
  }

  // The worker is gone (or must be): reap it, say how, and give its key to another worker of its group.
  void lose(Slot& s, const std::string& when) {
    const bool had_key = s.state == State::busy;
    s.state = State::gone;
    s.proc->close_channel();
    const pid_t pid = s.proc->pid();
    const std::string how = s.proc->end(kExitGraceS);
    std::string problem = fmt::format("{} (pid {}) {} {}", s.label, pid, how, when);
    last_loss_ = problem;
    ++report_.workers_lost;
    if (had_key) {
      Entry& e = entries_[s.entry];
      if (++e.attempts >= kMaxAttempts) {
        PoolOutcome o;
        o.task = e.task;
        o.device = s.spec.index;
        o.status = fmt::format("failed: {} workers died while tuning it (last: {})", e.attempts, problem);
        report_.outcomes.push_back(o);
        e.finished = true;
        ++finished_;
      } else {
        queues_[e.group].push_front(s.entry);
        problem += group_alive(e.group) ? "; the key goes to another worker"
                                        : "; no other worker of its kind is left to retake the key";
      }
    }
    log(LogLevel::warn, "warmup worker {}", problem);
    report_.problems.push_back(std::move(problem));
  }

  // Keys left in a queue: the budget ran out, or no worker of their group is left.
  void finish_leftovers() {
    for (auto& [group, queue] : queues_) {
      for (size_t e : queue) {
        PoolOutcome o;
        o.task = entries_[e].task;
        o.fingerprint = group.substr(group.find('\n') + 1);  // group = arch + "\n" + fingerprint
        o.status = report_.budget_exhausted
                       ? std::string("skipped: budget exhausted")
                       : fmt::format("failed: no worker for arch {} was left to tune it{}", group_arch_[group],
                                     problems_suffix());
        report_.outcomes.push_back(o);
      }
      queue.clear();
    }
  }

  void stop_workers() {
    for (Slot& s : slots_) {
      if (s.state == State::gone) continue;
      s.proc->close_channel();
      const std::string how = s.proc->end(kExitGraceS);
      if (!s.proc->exited_ok()) {
        report_.problems.push_back(fmt::format("{} (pid {}) {} after its last key", s.label, s.proc->pid(), how));
        ++report_.workers_lost;
      }
      s.state = State::gone;
    }
  }

  std::string problems_suffix() const { return last_loss_.empty() ? "" : fmt::format(" (last lost: {})", last_loss_); }

  // Milliseconds until the first worker in `state` (starting, or busy with a key) runs past the key timeout;
  // -1 (wait forever) without one.
  int next_timeout_ms(State state) const {
    if (opt_.key_timeout_s <= 0) return -1;
    double soonest = INFINITY;
    for (const Slot& s : slots_)
      if (s.state == state)
        soonest = std::min(soonest, opt_.key_timeout_s * 1000 -
                                        std::chrono::duration<double, std::milli>(Clock::now() - s.given_at).count());
    if (!std::isfinite(soonest)) return -1;
    return static_cast<int>(std::clamp(std::ceil(soonest), 0.0, 3.6e6));
  }

  // Kills the workers in `state` that held their key (or their start) past the timeout at `now` (the time poll
  // returned: handling other workers' answers since must not make this one late), unless something of theirs
  // has arrived since: that is read on the next round first.
  void kill_overdue(State state, Clock::time_point now) {
    if (opt_.key_timeout_s <= 0) return;
    for (Slot& s : slots_) {
      if (s.state != state) continue;
      const double held_s = std::chrono::duration<double>(now - s.given_at).count();
      if (held_s < opt_.key_timeout_s) continue;
      pollfd pending{s.proc->channel().fd(), POLLIN, 0};
      if (::poll(&pending, 1, 0) > 0) continue;
      s.proc->kill_now();
      const std::string what = state == State::busy
                                   ? "holding " + key_text(tasks_[entries_[s.entry].task].task)
                                   : std::string("starting (no hello)");
      lose(s, fmt::format("after {} for {:.0f} s, past the key timeout of {} s (taken for hung)", what, held_s,
                          opt_.key_timeout_s));
    }
  }

  bool group_alive(const std::string& group) const {
    for (const Slot& s : slots_)
      if (s.group == group && (s.state == State::idle || s.state == State::busy)) return true;
    return false;
  }

  bool any_busy() const {
    for (const Slot& s : slots_)
      if (s.state == State::busy) return true;
    return false;
  }

  // Waits until a slot in `state` is readable, or timeout_ms passes (-1: no limit); ready_ lists the readable
  // ones. False when no slot is in that state.
  bool poll_slots(State state, int timeout_ms = -1) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].state != state) continue;
      fds.push_back({slots_[i].proc->channel().fd(), POLLIN, 0});
      which.push_back(i);
    }
    ready_.clear();
    if (fds.empty()) return false;
    int n;
    do {
      n = ::poll(fds.data(), fds.size(), timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0) throw Error(Status::internal, "warmup", fmt::format("poll over the workers failed: errno {}", errno));
    for (size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents) ready_.push_back(which[k]);
    return true;
  }

  const PoolOptions& opt_;
  const std::vector<PoolTask>& tasks_;
  std::vector<Slot> slots_;
  std::vector<size_t> ready_;
  std::vector<Entry> entries_;
  std::map<std::string, std::deque<size_t>> queues_;
  std::map<std::string, size_t> group_size_;
  std::map<std::string, std::string> group_arch_;
  size_t finished_ = 0;
  std::string last_loss_;  // "host 1 (pid 123) killed by signal 9 (Killed) while ...": quoted by keys left undone
  PoolReport report_;
};

}  // namespace

std::string worker_label(const PoolWorker& w) { return fmt::format("{} {}", w.host ? "host" : "dev", w.index); }

PoolReport run_worker_pool(const PoolOptions& options, const std::vector<PoolTask>& tasks) {
  return Coordinator(options, tasks).run();
}

}  // namespace ktune::autotune
