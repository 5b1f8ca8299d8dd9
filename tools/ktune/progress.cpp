#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace ktune::cli {

Progress::Progress(std::string what, int total, bool quiet)
    : what_(std::move(what)), total_(total), quiet_(quiet), tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::step(const std::string& item) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  if (quiet_) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : 0;
  if (tty_) {
    int width = 30, filled = total_ ? width * done_ / total_ : width;
    fmt::print(stderr, "\r{} [{}{}] {}/{} {:.1f}s ETA {:.1f}s  {:.40}\x1b[K", what_, std::string(filled, '#'),
               std::string(width - filled, '.'), done_, total_, elapsed, eta, item);
  } else {
    fmt::print(stderr, "{} {}/{} ({:.1f}s, ETA {:.1f}s) {}\n", what_, done_, total_, elapsed, eta, item);
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (!quiet_ && tty_) fmt::print(stderr, "\n");
}

}  // namespace ktune::cli
