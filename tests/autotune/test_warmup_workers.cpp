// The multi-device warmup's queue, driven without a GPU: host CPU worker processes (`ktune warmup-worker
// --host-worker N`, the built CLI) over the same queue GPU workers use. Every key is tuned exactly once with
// the same winners as one worker; a worker SIGKILLed in the middle of a key (after measuring, before storing:
// KTUNE_TEST_WORKER_STALL) leaves no row, its key is retaken, and nothing is reported done that is not stored.
//
// Timings on a shared CI runner are noise, and three workers on two cores disturb each other, so the tie rule
// is given a noise fraction that ties every candidate: the winner of a key is then the earliest candidate that
// ran (the tie rule itself), whichever worker measured it, and rows can be compared exactly.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "autotune/presets.hpp"
#include "autotune/tuning_record.hpp"
#include "autotune/warmup.hpp"
#include "host/host_support.hpp"
#include "ktune/cache/store.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

namespace {

// One op, batch 1..8 x seq_len 256..512: 8 host keys sharing 12 binaries.
constexpr const char* kPreset = R"({"name": "workers", "description": "one xqa op, 8 host keys",
 "buckets": {"batch": {"min": 1, "max": 8}, "seq_len": {"min": 256, "max": 512}},
 "ops": [{"label": "attn", "family": "xqa_decode",
          "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32}}]})";
constexpr int kKeys = 8;

struct Fixture {
  test::TempDir dir;
  std::string preset_path = dir.file("preset.json");
  std::string compiled = dir.file("compiled.db");  // every binary, no tuning row: each case starts from a copy

  Fixture() {
    std::ofstream(preset_path) << kPreset;
    RuntimeOptions o;
    o.cache_path = compiled;
    Runtime rt(o);
    autotune::WarmupOptions w = options(0);
    w.tune = false;
    autotune::WarmupReport r = autotune::warmup(rt, preset(), w);
    REQUIRE(r.compile_failed == 0);
  }
  autotune::Preset preset() const { return autotune::load_preset(preset_path); }
  autotune::WarmupOptions options(int workers) const {
    autotune::WarmupOptions w;
    w.arches = {"host"};
    w.host_workers = workers;
    w.worker_executable = KTUNE_TEST_CLI;
    w.tune_options.noise_fraction = 1e9;  // every candidate ties: the winner is the earliest (see above)
    return w;
  }
  std::string fresh_cache(const std::string& name) const {
    const std::string path = dir.file(name);
    std::filesystem::copy_file(compiled, path);
    return path;
  }
  autotune::WarmupReport warmup(const std::string& cache, const autotune::WarmupOptions& w) const {
    RuntimeOptions o;
    o.cache_path = cache;
    Runtime rt(o);
    return autotune::warmup(rt, preset(), w);
  }
};

const Fixture& fixture() {
  static Fixture f;  // the compile (a few seconds of LLVM) once for every case
  return f;
}

// key -> (winner, device_index) of every tuning row in the file.
std::map<std::string, std::pair<std::string, int>> rows(const std::string& cache) {
  std::map<std::string, std::pair<std::string, int>> out;
  for (const auto& r : cache::CacheDb::open(cache, {})->list_tuning()) {
    autotune::TuningResult t = autotune::from_tuning_record(r);
    out[r.problem_key] = {r.winner_config, t.device_index};
  }
  return out;
}

// Runs `run` while a thread waits for the stalled worker's pid file and SIGKILLs that worker.
template <class Run>
autotune::WarmupReport kill_stalled_worker(const std::string& pid_file, Run run) {
  std::thread killer([&] {
    for (int i = 0; i < 600; ++i) {  // up to 60 s
      std::ifstream f(pid_file);
      long pid = 0;
      if (f >> pid && pid > 0) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  autotune::WarmupReport r = run();
  killer.join();
  return r;
}

struct StallEnv {  // KTUNE_TEST_WORKER_STALL for the workers this test starts
  explicit StallEnv(const std::string& value) { ::setenv("KTUNE_TEST_WORKER_STALL", value.c_str(), 1); }
  ~StallEnv() { ::unsetenv("KTUNE_TEST_WORKER_STALL"); }
};

}  // namespace

TEST_CASE("three host workers tune every key exactly once, with one worker's winners", "[autotune][workers][host]") {
  KTUNE_REQUIRE_HOST();
  const Fixture& f = fixture();
  const std::string one = f.fresh_cache("one.db"), three = f.fresh_cache("three.db");
  autotune::WarmupReport r1 = f.warmup(one, f.options(1));
  autotune::WarmupReport r3 = f.warmup(three, f.options(3));
  for (const auto* r : {&r1, &r3}) {
    CHECK(r->keys == kKeys);
    CHECK(r->tuned == kKeys);
    CHECK(r->failed == 0);
    CHECK(r->workers_lost == 0);
    CHECK(r->retaken == 0);
  }
  CHECK(r3.workers == 3);
  std::multiset<std::string> tuned_keys;
  std::set<int> devices;
  for (const auto& it : r3.items) {
    if (it.status != "tuned") continue;
    tuned_keys.insert(it.tuning_key);
    devices.insert(it.device);
  }
  CHECK(tuned_keys.size() == static_cast<size_t>(kKeys));
  CHECK(std::set<std::string>(tuned_keys.begin(), tuned_keys.end()).size() == static_cast<size_t>(kKeys));
  for (int d : devices) CHECK((d >= 0 && d < 3));

  const auto rows1 = rows(one), rows3 = rows(three);
  REQUIRE(rows1.size() == static_cast<size_t>(kKeys));
  REQUIRE(rows3.size() == rows1.size());
  for (const auto& [key, row] : rows1) {
    INFO(key);
    REQUIRE(rows3.count(key) == 1);
    CHECK(rows3.at(key).first == row.first);
    CHECK(row.second == 0);  // the one worker is host worker 0
    CHECK((rows3.at(key).second >= 0 && rows3.at(key).second < 3));
  }

  // Resumable: a second run finds every key done for this fingerprint and measures nothing.
  autotune::WarmupReport again = f.warmup(three, f.options(3));
  CHECK(again.already_done == kKeys);
  CHECK(again.tuned == 0);

  // --retune: every key measured again by the workers instead of counted done.
  autotune::WarmupOptions retune = f.options(3);
  retune.retune = true;
  autotune::WarmupReport re = f.warmup(three, retune);
  CHECK(re.tuned == kKeys);
  CHECK(re.already_done == 0);
  CHECK(re.failed == 0);
}

TEST_CASE("a worker SIGKILLed in the middle of a key leaves no row, and another worker retakes the key",
          "[autotune][workers][host]") {
  KTUNE_REQUIRE_HOST();
  const Fixture& f = fixture();
  const std::string cache = f.fresh_cache("killed.db"), pid_file = f.dir.file("worker1.pid");
  // Host worker 1 stops in its 1st key (every worker is given one at the start), measured but not stored.
  StallEnv stall("1:1:" + pid_file);
  autotune::WarmupReport r = kill_stalled_worker(pid_file, [&] { return f.warmup(cache, f.options(3)); });
  REQUIRE(std::filesystem::exists(pid_file));
  CHECK(r.workers_lost == 1);
  CHECK(r.retaken == 1);
  CHECK(r.failed == 0);
  CHECK(r.tuned == kKeys);
  REQUIRE(r.worker_problems.size() == 1);
  CHECK_THAT(r.worker_problems[0], Catch::Contains("host 1") && Catch::Contains("killed by signal 9") &&
                                       Catch::Contains("the key goes to another worker"));
  const auto stored = rows(cache);
  CHECK(stored.size() == static_cast<size_t>(kKeys));
  for (const auto& [key, row] : stored) {
    INFO(key);
    CHECK((row.second == 0 || row.second == 2));  // nothing of worker 1's: it died before storing
  }
  std::multiset<std::string> tuned_keys;
  for (const auto& it : r.items) {
    CHECK(it.device != 1);
    if (it.status == "tuned") tuned_keys.insert(it.tuning_key);
  }
  CHECK(std::set<std::string>(tuned_keys.begin(), tuned_keys.end()).size() == tuned_keys.size());
}

TEST_CASE("when the only worker is killed, its keys fail (none reported done), and a rerun resumes",
          "[autotune][workers][host]") {
  KTUNE_REQUIRE_HOST();
  const Fixture& f = fixture();
  const std::string cache = f.fresh_cache("alone.db"), pid_file = f.dir.file("worker0.pid");
  autotune::WarmupReport r;
  {
    StallEnv stall("0:3:" + pid_file);
    r = kill_stalled_worker(pid_file, [&] { return f.warmup(cache, f.options(1)); });
  }
  CHECK(r.workers_lost == 1);
  CHECK(r.retaken == 0);  // no worker was left to take it
  CHECK(r.tuned == 2);                 // the two keys stored before the one it died in
  CHECK(r.failed == kKeys - 2);        // the key it held and every key after: no worker was left
  CHECK(rows(cache).size() == 2);      // nothing of the key it was measuring
  for (const auto& it : r.items)
    if (it.status.rfind("failed", 0) == 0) CHECK_THAT(it.status, Catch::Contains("no worker for arch host was left"));

  autotune::WarmupReport resumed = f.warmup(cache, f.options(1));
  CHECK(resumed.already_done == 2);
  CHECK(resumed.tuned == kKeys - 2);
  CHECK(resumed.failed == 0);
  CHECK(rows(cache).size() == static_cast<size_t>(kKeys));
}

TEST_CASE("a worker that hangs on a key past the key timeout is killed and its key retaken",
          "[autotune][workers][host]") {
  KTUNE_REQUIRE_HOST();
  const Fixture& f = fixture();
  const std::string cache = f.fresh_cache("hung.db"), pid_file = f.dir.file("hung.pid");
  StallEnv stall("0:1:" + pid_file);  // host worker 0 hangs in its first key; nobody kills it but the timeout
  autotune::WarmupOptions w = f.options(2);
  // Far above a key's (or a worker start's) time even on a loaded 2-core runner, so only the hung one is hit.
  w.key_timeout_s = 10;
  autotune::WarmupReport r = f.warmup(cache, w);
  CHECK(std::filesystem::exists(pid_file));
  CHECK(r.workers_lost == 1);
  CHECK(r.retaken == 1);
  CHECK(r.tuned == kKeys);
  CHECK(r.failed == 0);
  REQUIRE(r.worker_problems.size() == 1);
  CHECK_THAT(r.worker_problems[0], Catch::Contains("host 0") && Catch::Contains("past the key timeout of 10 s"));
  CHECK(rows(cache).size() == static_cast<size_t>(kKeys));
}
