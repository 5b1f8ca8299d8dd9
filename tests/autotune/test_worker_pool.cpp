// The coordinator's dealing (autotune/worker_pool.hpp) with fake workers (fake_tune_worker.sh: the protocol
// only, answering at once): a queue per fingerprint, every key once per group, a dead worker's key retaken by
// one of its group, a key that kills every worker it is given failed after two, the budget.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "autotune/worker_pool.hpp"
#include "support/env_guard.hpp"

using namespace ktune::autotune;
using ktune::test::EnvGuard;  // each case sets the fake workers' knobs (FAKE_WORKER_*) for its scope

namespace {

std::vector<PoolTask> keys(int n) {
  std::vector<PoolTask> tasks;
  for (int i = 0; i < n; ++i) {
    PoolTask t;
    t.arch = "host";
    t.task.family = "xqa_decode";
    t.task.problem_key = "p" + std::to_string(i);
    t.task.buckets = {{"b", 1}};
    tasks.push_back(t);
  }
  return tasks;
}

PoolOptions fake_pool(int workers) {
  PoolOptions o;
  o.executable = KTUNE_TEST_FAKE_WORKER;
  for (int i = 0; i < workers; ++i) o.workers.push_back({true, i});
  return o;
}

// task -> the workers that answered it "tuned"
std::map<size_t, std::multiset<int>> tuned_by(const PoolReport& r) {
  std::map<size_t, std::multiset<int>> out;
  for (const auto& o : r.outcomes)
    if (o.status == "tuned") out[o.task].insert(o.device);
  return out;
}

}  // namespace

TEST_CASE("worker pool: identical workers share one queue, other fingerprints tune their own copy",
          "[autotune][workers]") {
  EnvGuard env("FAKE_WORKER_GROUPS", "2");  // workers 0, 2 are one fingerprint; 1, 3 another
  std::vector<std::string> progress;
  PoolOptions o = fake_pool(4);
  o.progress = [&](const std::string& what, size_t, size_t) { progress.push_back(what); };
  PoolReport r = run_worker_pool(o, keys(10));
  CHECK(r.workers_started == 4);
  CHECK(r.workers_lost == 0);
  CHECK(r.outcomes.size() == 20);
  const auto by = tuned_by(r);
  REQUIRE(by.size() == 10);
  for (const auto& [task, workers] : by) {
    INFO("task " << task);
    REQUIRE(workers.size() == 2);  // once per fingerprint ...
    CHECK(*workers.begin() % 2 != *workers.rbegin() % 2);  // ... one even and one odd worker
  }
  CHECK(progress.size() == 20);
  CHECK_THAT(progress.front(), Catch::Matches(R"(\[host [0-3]\] 1/10 p[0-9]\|b1)"));
}

TEST_CASE("worker pool: a worker that dies holding a key loses only that key, which its group retakes",
          "[autotune][workers]") {
  EnvGuard env("FAKE_WORKER_DIE", "1:2");
  PoolReport r = run_worker_pool(fake_pool(3), keys(9));
  CHECK(r.workers_lost == 1);
  CHECK(r.retaken == 1);
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Catch::Contains("host 1") && Catch::Contains("killed by signal 9"));
  const auto by = tuned_by(r);
  CHECK(by.size() == 9);
  for (const auto& [task, workers] : by) CHECK(workers.size() == 1);  // every key exactly once
  CHECK(r.outcomes.size() == 9);
}

TEST_CASE("worker pool: a key that kills two workers fails, and the others finish the rest", "[autotune][workers]") {
  EnvGuard env("FAKE_WORKER_POISON", "p3");
  PoolReport r = run_worker_pool(fake_pool(3), keys(6));
  CHECK(r.workers_lost == 2);
  const auto by = tuned_by(r);
  CHECK(by.size() == 5);
  CHECK(by.count(3) == 0);
  int failed = 0;
  for (const auto& o : r.outcomes)
    if (o.task == 3) {
      ++failed;
      CHECK_THAT(o.status, Catch::StartsWith("failed: 2 workers died while tuning it"));
    }
  CHECK(failed == 1);
}

TEST_CASE("worker pool: past the budget no key is dealt, and the rest are skipped", "[autotune][workers]") {
  PoolOptions o = fake_pool(2);
  int dealt = 0;
  o.out_of_budget = [&] { return ++dealt > 3; };
  PoolReport r = run_worker_pool(o, keys(8));
  CHECK(r.budget_exhausted);
  int tuned = 0, skipped = 0;
  for (const auto& out : r.outcomes) {
    if (out.status == "tuned") ++tuned;
    if (out.status == "skipped: budget exhausted") ++skipped;
  }
  CHECK(tuned == 3);
  CHECK(skipped == 5);
}

TEST_CASE("worker pool: a worker that cannot start is reported with its reason, the others do the work",
          "[autotune][workers]") {
  EnvGuard env("FAKE_WORKER_FATAL", "1");
  PoolReport r = run_worker_pool(fake_pool(2), keys(4));
  CHECK(r.workers_started == 1);
  CHECK(r.workers_lost == 1);
  REQUIRE(r.problems.size() == 1);
  CHECK_THAT(r.problems[0], Catch::Contains("host 1") && Catch::Contains("exited with status 1") &&
                                Catch::Contains("before it started: ktune warmup-worker: no GPU 1 here"));
  CHECK(tuned_by(r).size() == 4);

  PoolReport none = run_worker_pool(fake_pool(2), keys(0));  // nothing to do: workers start and stop cleanly
  CHECK(none.outcomes.empty());
  CHECK(none.workers_lost == 1);  // worker 1 still cannot start
}

TEST_CASE("worker pool: a worker out of protocol is killed at once, whatever it does next", "[autotune][workers]") {
  // A hello out of protocol from a worker that then never reads its socket, and an answer of 17 MiB with no end
  // of line: each is killed (not waited for, not buffered without bound) and the other worker does the work.
  for (const char* knob : {"FAKE_WORKER_BAD_HELLO", "FAKE_WORKER_HUGE"}) {
    INFO(knob);
    EnvGuard env(knob, "0");
    const auto t0 = std::chrono::steady_clock::now();
    PoolReport r = run_worker_pool(fake_pool(2), keys(4));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));  // the fake sleeps 60 s
    CHECK(r.workers_lost == 1);
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0], Catch::Contains("host 0") && Catch::Contains("killed by signal 9"));
    const auto by = tuned_by(r);
    CHECK(by.size() == 4);
    for (const auto& [task, workers] : by) CHECK(workers == std::multiset<int>{1});
  }
}

TEST_CASE("worker pool: an answer that waits while the coordinator is held up is read, not taken for a hang",
          "[autotune][workers]") {
  // Worker 1 answers 0.3 s after its key; meanwhile the coordinator spends 2 s on worker 0's answer (a slow
  // progress line), past the 1 s key timeout. Worker 1's answer is waiting when the coordinator looks again.
  EnvGuard env("FAKE_WORKER_SLOW", "1:0.3");
  PoolOptions o = fake_pool(2);
  o.key_timeout_s = 1;
  bool first = true;
  o.progress = [&](const std::string&, size_t, size_t) {
    if (first) std::this_thread::sleep_for(std::chrono::seconds(2));
    first = false;
  };
  PoolReport r = run_worker_pool(o, keys(2));
  CHECK(r.workers_lost == 0);
  CHECK(r.problems.empty());
  CHECK(tuned_by(r).size() == 2);
}

TEST_CASE("worker pool: when no worker starts, every key fails naming why", "[autotune][workers]") {
  EnvGuard env("FAKE_WORKER_FATAL", "0");
  PoolReport r = run_worker_pool(fake_pool(1), keys(2));
  REQUIRE(r.outcomes.size() == 2);
  for (const auto& o : r.outcomes)
    CHECK_THAT(o.status, Catch::StartsWith("failed: no worker for arch host started") &&
                             Catch::Contains("no GPU 0 here"));
}

TEST_CASE("worker pool: an executable that cannot start is an error naming it", "[autotune][workers]") {
  PoolOptions o = fake_pool(1);
  o.executable = "/nonexistent/ktune";
  CHECK_THROWS_WITH(run_worker_pool(o, keys(1)), Catch::Contains("/nonexistent/ktune"));
}
