// What a warmup coordinator and its tuning worker processes say to each other: one JSON object per line over
// a socket (the worker's fd 3), so a message is never half-read and a worker's logs (stderr) never mix in.
//
//   worker -> coordinator, once at start:  {"hello": 1, "arch": "sm_90a", "fingerprint": "..."}
//                                      or  {"fatal": "why the worker could not start"}
//   coordinator -> worker, per key:        {"task": 7, "family": ..., "problem_key": ..., "buckets": [["b", 4], ...],
//                                           "noise_fraction": 0.02, "measure": {...}, "compile_jobs": 0}
//   worker -> coordinator, per key:        {"task": 7, "status": "tuned" | "done earlier" | "failed: ...",
//                                           "winner": "...", "ms": 812.5}
//
// "tuned" is sent only after the row is in the cache, so a worker that dies before answering has stored
// nothing the coordinator counts. The coordinator closing its end tells the worker to exit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autotune/measure.hpp"

namespace ktune::autotune {

struct WorkerHello {
  std::string arch, fingerprint;  // what the worker tunes for; workers with both equal share one queue
  std::string fatal;              // non-empty: the worker could not start, and says why
};

struct TuneTask {
  int64_t id = 0;
  std::string family, problem_key;
  std::vector<std::pair<std::string, int64_t>> buckets;  // short dim name -> bucket value
  double noise_fraction = 0.02;
  MeasureOptions measure;
  int compile_jobs = 0;
  bool retune = false;  // measure even when the key has a row of this version for this device
  // How long the worker waits for another process tuning the same key (claim_key): what is left of the
  // warmup's budget when the key is dealt, at most kTuningFlightWait_s and half the key timeout.
  double flight_wait_s = 0;
};

struct TaskResult {
  int64_t id = 0;
  std::string status;  // "tuned", "done earlier" or "failed: ..."
  std::string winner;
  double ms = 0;
};

std::string encode(const WorkerHello& m);
std::string encode(const TuneTask& m);
std::string encode(const TaskResult& m);
// Each throws Error(internal, "warmup", ...) naming the field for a line that is not such a message.
WorkerHello decode_hello(const std::string& line);
TuneTask decode_task(const std::string& line);
TaskResult decode_result(const std::string& line);

// One end of a worker socket: whole lines out, whole lines in. Does not own the fd.
class LineChannel {
 public:
  explicit LineChannel(int fd) : fd_(fd) {}
  int fd() const { return fd_; }
  // false when the peer is gone (never raises SIGPIPE).
  bool send_line(const std::string& line);
  // The next complete line; nullopt at end of stream or on an error. Blocks until one arrives.
  std::optional<std::string> read_line();
  // Reads into the buffer: waits for the first bytes, then takes all that is there without waiting; false at end
  // of stream (bytes read before it stay buffered).
  bool fill();
  // A complete line already buffered, if any. Throws Error(internal, "warmup") once kMaxLine bytes are buffered
  // without a newline: no message of the protocol is that long, so the peer is not speaking it.
  std::optional<std::string> buffered_line();

  static constexpr size_t kMaxLine = size_t{16} << 20;

 private:
  int fd_;
  std::string buffer_;
  size_t scanned_ = 0;  // buffer_[0, scanned_) holds no newline: each byte is searched once
};

}  // namespace ktune::autotune
