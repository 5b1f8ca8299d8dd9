#include "file_stamps.hpp"

#include <sys/stat.h>

namespace ktune::cli {

bool FileStamp::operator==(const FileStamp& o) const {
  if (path != o.path || wal != o.wal) return false;
  if (wal && (!present || size == 0) && (!o.present || o.size == 0)) return true;  // no commit in either
  return present == o.present && device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
}

namespace {

FileStamp stamp(const std::string& path, bool wal) {
  FileStamp s;
  s.path = path;
  s.wal = wal;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return s;  // absent (or unreadable: compared as such)
  s.present = true;
  s.device = static_cast<uint64_t>(st.st_dev);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

}  // namespace

std::vector<FileStamp> stamp_layer_files(const std::vector<std::string>& layer_paths) {
  std::vector<FileStamp> out;
  for (const std::string& p : layer_paths) {
    out.push_back(stamp(p, false));
    out.push_back(stamp(p + "-wal", true));
  }
  return out;
}

std::vector<std::string> changed_files(const std::vector<FileStamp>& before, const std::vector<FileStamp>& after) {
  std::vector<std::string> out;
  for (size_t i = 0; i < before.size() || i < after.size(); ++i) {
    if (i < before.size() && i < after.size() && before[i] == after[i]) continue;
    out.push_back(i < before.size() ? before[i].path : after[i].path);
  }
  return out;
}

}  // namespace ktune::cli
