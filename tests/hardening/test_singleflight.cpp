// Cross-process single flight: N processes warming one cache compile each missing key once in all (the
// others wait on the key's lock and load the stored row), and a holder SIGKILLed mid-compile blocks nobody:
// the kernel drops its lock and a waiter compiles. Real NVRTC, no GPU.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "binary_key.hpp"
#include "hardening_util.hpp"
#include "key_locks.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/runtime.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/skip.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using namespace ktune::hardening;

namespace {

const Arch kArch = Arch::parse("sm_90a");


// Forks a child that waits until every write end of the gate pipe is closed, runs fn and exits with its result
// (never returns in the child). gate_write: the parent's write end (-1 if already closed), closed in the child.
template <class F>
pid_t spawn(int gate, int gate_write, F&& fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (gate_write >= 0) ::close(gate_write);
    char c;
    while (::read(gate, &c, 1) > 0) {
    }
    int rc = 255;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  return pid;
}

// Exit status of pid, or -1 if it is still running after timeout_s.
int wait_exit(pid_t pid, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Compiles done by one process: kernels base..base+n-1 through a runtime on db.
int warm(const std::string& db, int base, int n) {
  RuntimeOptions o;
  o.cache_path = db;
  Runtime rt(o);
  for (int i = 0; i < n; ++i) rt.ensure_binary(test::scale_kernel(base + i), kArch);
  return static_cast<int>(rt.stats().compiles);
}

}  // namespace

TEST_CASE("single flight: N processes warming one cache compile every missing key once",
          "[attack][singleflight][runtime]") {
  KTUNE_REQUIRE_NVRTC();
  TempDir dir;
  const std::string db = dir.file("k.db");
  constexpr int kProcs = 4, kKeys = 3;
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) pids.push_back(spawn(gate[0], gate[1], [&] { return warm(db, 7100, kKeys); }));
  ::close(gate[1]);  // all start together
  ::close(gate[0]);
  int compiles = 0;
  for (pid_t pid : pids) {
    const int rc = wait_exit(pid, 300);
    if (rc < 0) ::kill(pid, SIGKILL);
    INFO("exit status of warming process " << pid << ": " << rc << " (-1: still running after 300 s)");
    REQUIRE(rc >= 0);
    REQUIRE(rc <= kKeys);
    compiles += rc;
  }
  CHECK(compiles == kKeys);
  CHECK(cache_list(db).size() == kKeys);
  CHECK(cache_verify(db).empty());
}

TEST_CASE("single flight: a holder SIGKILLed mid-compile does not block the others",
          "[attack][singleflight][runtime]") {
  KTUNE_REQUIRE_NVRTC();
  TempDir dir;
  const std::string db = dir.file("k.db");
  const GeneratedKernel k = test::scale_kernel(7200);
  const std::string digest =
      detail::derive_binary_key(k, kArch, "nvrtc", detail::nvrtc().version, detail::nvrtc_options(k, kArch)).digest;
  // The holder takes the key's lock as a compiling process would, says so, and never finishes.
  int ready[2], gate[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(gate) == 0);
  ::close(gate[1]);
  const pid_t holder = spawn(gate[0], -1, [&] {
    detail::KeyLocks locks(db, ".compile-lock", "compiling");
    std::string note;
    detail::KeyLocks::Held held = locks.acquire(digest, 10, &note);
    if (!held.held()) return 3;
    if (::write(ready[1], "x", 1) != 1) return 4;
    for (;;) ::pause();
  });
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  int worker_gate[2];
  REQUIRE(::pipe(worker_gate) == 0);
  ::close(worker_gate[1]);
  const pid_t worker = spawn(worker_gate[0], -1, [&] { return warm(db, 7200, 1); });
  const int early_rc = wait_exit(worker, 1.5);  // reaped if it ended: its status is kept, not waited for again
  INFO("the worker's exit status while the holder lived: " << early_rc << " (-1: still running)");
  CHECK(early_rc == -1);  // waiting for the holder, not compiling beside it
  ::kill(holder, SIGKILL);
  CHECK(wait_exit(holder, 10) == 128);
  const int worker_rc = early_rc >= 0 ? early_rc : wait_exit(worker, 120);
  if (worker_rc < 0) ::kill(worker, SIGKILL);
  CHECK(worker_rc == 1);  // took the dead holder's lock and compiled
  CHECK(cache_list(db).size() == 1);
  for (int fd : {ready[0], ready[1], gate[0], worker_gate[0]}) ::close(fd);
}
