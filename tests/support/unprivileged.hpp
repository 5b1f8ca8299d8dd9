// Tests whose subject is a file or directory the process cannot write: as root (CI containers run as root) file
// permissions bind nothing, so such a test runs its body in a forked child that has dropped root for the
// unprivileged user nobody, as an engine's serving user would be. Not root: the body runs in this process.
#pragma once

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>

namespace ktune::test {

// What run_unprivileged returns when it could not run the body as nobody (no CAP_CHOWN / CAP_SETUID, as in a
// user namespace that maps only root, or a tree nobody cannot reach, such as one under a private TMPDIR).
inline const std::string kNotUnprivileged = "skipped: ";

// Runs `body` without root and returns its verdict: "" when it held, else what failed (the body returns it; Catch
// assertions cannot report from a child), or kNotUnprivileged + why when it could not run without root. As root,
// `tree` (the test's temporary directory, whose permissions the test sets for its owner) is first given to
// nobody, so its owner permissions are nobody's.
inline std::string run_unprivileged(const std::filesystem::path& tree, const std::function<std::string()>& body) {
  if (::geteuid() != 0) return body();
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kNogroup = 65534;
  if (::chown(tree.c_str(), kNobody, kNogroup) != 0) return kNotUnprivileged + "cannot chown " + tree.string();
  for (const auto& e : std::filesystem::recursive_directory_iterator(tree))
    if (::lchown(e.path().c_str(), kNobody, kNogroup) != 0)
      return kNotUnprivileged + "cannot chown " + e.path().string();
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    std::string verdict;
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0) {
      verdict = kNotUnprivileged + "cannot drop root for nobody";
    } else if (::access(tree.c_str(), R_OK | W_OK | X_OK) != 0) {
      verdict = kNotUnprivileged + "nobody cannot reach " + tree.string();
    } else {
      try {
        verdict = body();
      } catch (const std::exception& e) {
        verdict = std::string("threw: ") + e.what();
      }
    }
    for (size_t off = 0; off < verdict.size();) {
      const ssize_t n = ::write(fds[1], verdict.data() + off, verdict.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(0);  // no atexit handlers: the test framework's state is the parent's
  }
  ::close(fds[1]);
  std::string verdict;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    verdict.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "waitpid failed";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the unprivileged child ended abnormally (status " + std::to_string(status) + ")" +
           (verdict.empty() ? "" : ": " + verdict);
  return verdict;
}

// The verdict of run_unprivileged as Catch sees it: a failure when the body failed; a warning, and false, when it
// could not run without root (what the caller checks of the body's effects is then not there to check).
inline bool check_unprivileged(const std::string& verdict) {
  if (verdict.compare(0, kNotUnprivileged.size(), kNotUnprivileged) == 0) {
    WARN("the unprivileged part " << verdict);
    return false;
  }
  CHECK(verdict == "");
  return true;
}

}  // namespace ktune::test
