// Cross-process single flight for compiles into one writable cache layer: before compiling a missing binary,
// a process takes an advisory lock on one byte of a sidecar file next to the layer (`<layer>.compile-lock`),
// at an offset derived from the binary's digest, and looks the cache up again once it holds it. Processes
// warming one cache therefore compile each missing key once; the others wait and then load the stored row.
//
// The locks are Linux open-file-description locks (F_OFD_SETLK): they belong to this open file, not to the
// process, so threads never share one by accident, and the kernel drops them when the holder exits or is
// killed (SIGKILL included), so a dead holder never blocks the others. A holder that is alive but stuck is
// waited for at most a bounded time; then the waiter compiles anyway (a duplicate compile, never a hang).
#pragma once

#include <string>
#include <utility>

namespace ktune::detail {

class CompileLocks {
 public:
  // Disabled (every acquire returns at once, unheld) when the sidecar file cannot be opened or created.
  explicit CompileLocks(const std::string& layer_path);
  ~CompileLocks();
  CompileLocks(const CompileLocks&) = delete;
  CompileLocks& operator=(const CompileLocks&) = delete;

  class Held {
   public:
    Held() = default;
    Held(Held&& o) noexcept : fd_(o.fd_), offset_(o.offset_), waited_(o.waited_) { o.fd_ = -1; }
    Held& operator=(Held&& o) noexcept {
      std::swap(fd_, o.fd_);
      std::swap(offset_, o.offset_);
      std::swap(waited_, o.waited_);
      return *this;
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held();
    bool held() const { return fd_ >= 0; }
    bool waited() const { return waited_; }  // another holder had it: it may have stored the binary meanwhile

   private:
    friend class CompileLocks;
    Held(int fd, long long offset, bool waited) : fd_(fd), offset_(offset), waited_(waited) {}
    int fd_ = -1;
    long long offset_ = 0;
    bool waited_ = false;
  };

  // Waits for the lock of `digest` (up to wait_s seconds; then *note says so and an unheld Held is returned).
  Held acquire(const std::string& digest, double wait_s, std::string* note);
  const std::string& path() const { return path_; }
  bool enabled() const { return fd_ >= 0; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace ktune::detail
