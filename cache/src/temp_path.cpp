#include "ktune/cache/temp_path.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "ktune/cache/store.hpp"

namespace ktune::cache {

TempPath::TempPath(const std::string& dest, const std::string& tag) {
  std::random_device entropy;
  int err = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t r = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
    std::string candidate = fmt::format("{}.{}.{}.{:016x}", dest, tag, static_cast<long>(::getpid()), r);
    // 0666 less the umask: the file is linked into place as the export, so it gets a database file's usual
    // mode, not a private temporary's.
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      path_ = std::move(candidate);
      return;
    }
    err = errno;
    if (err != EEXIST) break;
  }
  throw CacheError(fmt::format("ktune cache: cannot create a temporary file next to {}: {}", dest,
                               std::strerror(err)));
}

TempPath::~TempPath() {
  if (keep_) return;
  std::error_code ec;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix, ec);
}

}  // namespace ktune::cache
