// A temporary file next to a destination, for writing a whole file and then moving it into place.
//
// The name is `<dest>.<tag>.<pid>.<random>`, and the file is created empty with O_EXCL, so concurrent writers of
// one destination (threads, or processes in different PID namespaces sharing a volume) never share a temporary.
// SQLite accepts an empty file as a new database and as a VACUUM INTO target. Unless keep() is called, the
// file and SQLite's companions (-journal, -wal, -shm) are removed when the object goes away, so a failed
// export leaves nothing behind.
#pragma once

#include <string>

namespace ktune::cache {

class TempPath {
 public:
  TempPath(const std::string& dest, const std::string& tag);  // throws CacheError naming the directory
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;

  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }  // it was moved into place (or is gone): do not remove it

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace ktune::cache
