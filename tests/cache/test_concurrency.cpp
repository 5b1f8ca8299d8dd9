#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "cache_test_util.hpp"
#include "ktune/cache/store.hpp"

using namespace ktune::cache;
using namespace ktune::cache::test;

namespace {

BinaryRecord small_record(int writer, int i) {
  BinaryRecord r = sample_record(i);
  r.digest = "w" + std::to_string(writer) + "-" + std::to_string(i);
  r.blob = pattern_blob(200 + static_cast<size_t>(i % 50), static_cast<uint32_t>(writer * 1000 + i));
  return r;
}

}  // namespace

TEST_CASE("8 threads x 200 mixed operations on one CacheDb", "[cache][concurrency]") {
  TempDir dir;
  auto db = CacheDb::open(dir.file("k.db"), {});
  constexpr int kThreads = 8, kOps = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        BinaryRecord r = small_record(t, i);
        if (!db->put_binary(r)) ++failures;
        BinaryLookup l = db->get_binary(r.digest);
        if (l.status != LookupStatus::hit || l.record.blob != r.blob) ++failures;
        // Another thread's entry: present or not yet, never damaged.
        if (db->get_binary(small_record((t + 1) % kThreads, i).digest).status == LookupStatus::damaged) ++failures;
        if (i % 4 == 0) {
          TuningRecord tr = sample_tuning((i / 4) % 10);  // every thread writes the same 10 keys
          tr.winner_config = "thread" + std::to_string(t);
          db->put_tuning(tr);
          auto got = db->get_tuning(tr.family, tr.problem_key, tr.device_fingerprint);
          if (!got || got->winner_config.rfind("thread", 0) != 0) ++failures;
        }
        if (i % 50 == 0) db->counts();
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(db->counts().binaries == kThreads * kOps);
  CHECK(db->counts().tuning == 10);
  CHECK(db->verify().empty());
}

TEST_CASE("4 processes x 200 inserts into one new file", "[cache][concurrency]") {
  TempDir dir;
  const std::string path = dir.file("shared/k.db");  // created by whichever process gets there first
  constexpr int kProcs = 4, kInserts = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: no Catch assertions here; the exit status carries the result.
      int status = 0;
      try {
        auto db = CacheDb::open(path, {});
        for (int i = 0; i < kInserts; ++i) {
          if (!db->put_binary(small_record(p, i))) status = 2;
          if (db->get_binary(small_record(p, i).digest).status != LookupStatus::hit) status = 3;
          TuningRecord t = sample_tuning(i % 5, 1000 + i);
          t.winner_config = "proc" + std::to_string(p);
          db->put_tuning(t);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        status = 1;
      }
      std::fflush(stderr);
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto db = CacheDb::open(path, {});
  CHECK(db->counts().binaries == kProcs * kInserts);
  CHECK(db->counts().tuning == 5);
  for (int p = 0; p < kProcs; ++p)
    for (int i = 0; i < kInserts; i += 17) CHECK(db->get_binary(small_record(p, i).digest).status == LookupStatus::hit);
  CHECK(db->verify().empty());  // includes PRAGMA integrity_check
}
