// Cross-process single flight on one writable cache layer: before doing work whose result goes into the layer
// (compiling a missing binary, tuning a key), a process takes an advisory lock on one byte of a sidecar file
// next to the layer (`<layer>.compile-lock`, `<layer>.tune-lock`), at an offset derived from the work's digest,
// and looks the cache up again once it holds it. Processes warming one cache therefore do each piece of work
// once; the others wait and then find the stored row.
//
// The locks are Linux open-file-description locks (F_OFD_SETLK): they belong to this open file, not to the
// process, so threads never share one by accident, and the kernel drops them when the holder exits or is
// killed (SIGKILL included), so a dead holder never blocks the others. A holder that is alive but stuck is
// waited for at most a bounded time; then the waiter does the work anyway (duplicate work, never a hang).
#pragma once

#include <string>
#include <utility>

namespace ktune::detail {

class KeyLocks {
 public:
  // `suffix` names the sidecar file (".compile-lock"); `doing` the work in a waiter's note ("compiling").
  // Disabled (every acquire returns at once, unheld) when the sidecar file cannot be opened or created.
  KeyLocks(const std::string& layer_path, const char* suffix, const char* doing);
  ~KeyLocks();
  KeyLocks(const KeyLocks&) = delete;
  KeyLocks& operator=(const KeyLocks&) = delete;

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
    bool waited() const { return waited_; }  // another holder had it: it may have stored its result meanwhile

   private:
    friend class KeyLocks;
    Held(int fd, long long offset, bool waited) : fd_(fd), offset_(offset), waited_(waited) {}
    int fd_ = -1;
    long long offset_ = 0;
    bool waited_ = false;
  };

  // Waits for the lock of `digest` (lowercase hex; up to wait_s seconds: then *note says so and an unheld Held
  // is returned, with waited() true).
  Held acquire(const std::string& digest, double wait_s, std::string* note);
  const std::string& path() const { return path_; }
  bool enabled() const { return fd_ >= 0; }

 private:
  std::string path_;
  const char* doing_;
  int fd_ = -1;
};

}  // namespace ktune::detail
