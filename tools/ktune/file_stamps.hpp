// What says that several reads of a cache's layer files read the same files: `cache verify` checks integrity,
// loads and signatures in separate passes, each opening the layers again, so a file renamed over a layer, rewritten
// or committed to between the passes would give a report no single file matches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ktune::cli {

// One file's identity and state: absent, or its device, inode, size and modification time (ns). A write-ahead
// log that is absent or empty holds no commit, whichever it is (a reader may create an empty one, and the last
// connection to close removes it), so two such stamps of one are equal.
struct FileStamp {
  std::string path;
  bool wal = false, present = false;
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const;
};

// Stamps of each layer file and its SQLite write-ahead log (PATH-wal: a commit that has not been checkpointed
// changes only that file). The shared-memory index (PATH-shm) is left out: readers write to it.
std::vector<FileStamp> stamp_layer_files(const std::vector<std::string>& layer_paths);
// The paths whose stamp differs between two stampings of the same layers.
std::vector<std::string> changed_files(const std::vector<FileStamp>& before, const std::vector<FileStamp>& after);

}  // namespace ktune::cli
