#include "key_locks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace ktune::detail {
namespace {

// One byte per key, at an offset from the digest's first 15 hex digits (60 bits: distinct keys collide with
// negligible odds, and a collision only serialises two pieces of work).
long long offset_of(const std::string& digest) {
  unsigned long long v = 0;
  for (size_t i = 0; i < digest.size() && i < 15; ++i) {
    const char c = digest[i];
    const unsigned d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
    v = v * 16 + d;
  }
  return static_cast<long long>(v);
}

int set_lock(int fd, short type, long long offset) {
  struct flock fl;
  std::memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(offset);
  fl.l_len = 1;
  fl.l_pid = 0;  // required for OFD locks
  return ::fcntl(fd, F_OFD_SETLK, &fl);
}

}  // namespace

KeyLocks::KeyLocks(const std::string& layer_path, const char* suffix, const char* doing)
    : path_(layer_path + suffix), doing_(doing) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
}

KeyLocks::~KeyLocks() {
  if (fd_ >= 0) ::close(fd_);
}

KeyLocks::Held::~Held() {
  if (fd_ >= 0) {
    set_lock(fd_, F_UNLCK, offset_);
    ::close(fd_);
  }
}

KeyLocks::Held KeyLocks::acquire(const std::string& digest, double wait_s, std::string* note) {
  if (fd_ < 0) return Held();
  // A description of its own per acquisition: OFD locks of one description do not exclude each other, and
  // two threads of this process working on different keys must not release each other's lock.
  int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Held();
  const long long offset = offset_of(digest);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  auto pause = std::chrono::milliseconds(2);
  for (bool waited = false;; waited = true) {
    if (set_lock(fd, F_WRLCK, offset) == 0) return Held(fd, offset, waited);
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) break;  // e.g. no OFD locks on this filesystem
    if (std::chrono::steady_clock::now() >= deadline) {
      *note = fmt::format("waited {:g} s for another process {} it (lock {}); {} here too", wait_s, doing_, path_,
                          doing_);
      ::close(fd);
      return Held(-1, offset, true);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  ::close(fd);
  return Held();
}

}  // namespace ktune::detail
