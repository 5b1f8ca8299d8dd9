// Progress for long work: a redrawn bar with ETA on a terminal, plain lines otherwise (logs, CI).
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace ktune::cli {

class Progress {
 public:
  Progress(std::string what, int total, bool quiet);
  void step(const std::string& item);  // thread-safe
  void finish();

 private:
  std::string what_;
  int total_, done_ = 0;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
};

}  // namespace ktune::cli
