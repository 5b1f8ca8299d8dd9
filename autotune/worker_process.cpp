#include "autotune/worker_process.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ktune/error.hpp"

extern char** environ;

namespace ktune::autotune {
namespace {

// The fd the worker finds its socket on (after stdin, stdout, stderr).
constexpr int kWorkerFd = 3;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

bool executable_file(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

}  // namespace

WorkerProcess::WorkerProcess(const std::string& executable, const std::vector<std::string>& args) {
  int sv[2];
  // Close-on-exec on both ends: a worker must not inherit the sockets of its siblings (it would keep them
  // open, and a dead sibling would never read as end of stream). dup2 below clears the flag on fd 3 only.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw Error(Status::internal, "warmup", fmt::format("socketpair for a worker failed: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], kWorkerFd);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::vector<std::string> argv_text = {executable};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    throw Error(Status::internal, "warmup",
                fmt::format("could not start the worker {}: {}", executable, std::strerror(rc)));
  }
  pid_ = pid;
  fd_ = sv[0];
  channel_ = LineChannel(fd_);
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_ && pid_ > 0) end(0);
  close_channel();
}

void WorkerProcess::close_channel() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void WorkerProcess::kill_now() {
  if (!reaped_ && pid_ > 0) ::kill(pid_, SIGKILL);
}

bool WorkerProcess::wait_for(double seconds) {
  if (reaped_) return true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r != 0) {
      reaped_ = true;
      if (r < 0) {
        how_ = fmt::format("could not be waited for: {}", std::strerror(errno));
      } else {
        exit_ok_ = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        how_ = describe_status(status);
      }
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ::usleep(2000);
  }
}

const std::string& WorkerProcess::end(double grace_s) {
  if (wait_for(grace_s)) return how_;
  kill_now();
  if (!wait_for(10)) how_ = "did not end within 10 s of SIGKILL (left to the system)";
  return how_;
}

const std::string& WorkerProcess::wait() {
  if (reaped_) return how_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  reaped_ = true;
  if (r < 0) {
    how_ = fmt::format("could not be waited for: {}", std::strerror(errno));
    return how_;
  }
  exit_ok_ = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  how_ = describe_status(status);
  return how_;
}

std::string default_worker_executable() {
  if (const char* env = std::getenv("KTUNE_CLI"); env && *env) {
    if (!executable_file(env))
      throw Error(Status::not_found, "warmup",
                  fmt::format("KTUNE_CLI={} is not an executable file: point it at the ktune CLI", env));
    return env;
  }
  std::vector<std::string> looked;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&default_worker_executable), &info) && info.dli_fname) {
    std::string lib = info.dli_fname;
    std::string dir = lib.find('/') == std::string::npos ? "." : lib.substr(0, lib.rfind('/'));
    for (const std::string& candidate : {dir + "/../bin/ktune", dir + "/ktune"}) {
      if (executable_file(candidate)) return candidate;
      looked.push_back(candidate);
    }
  }
  throw Error(Status::not_found, "warmup",
              fmt::format("worker processes run the ktune CLI, which was not found (looked for {}): set KTUNE_CLI "
                          "to the path of a ktune executable of this version",
                          looked.empty() ? std::string("nothing: the library's own path is unknown")
                                         : fmt::format("{}", fmt::join(looked, ", "))));
}

}  // namespace ktune::autotune
