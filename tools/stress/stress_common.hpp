// Shared by the ktune_stress modes: options, deterministic records, result reporting, child processes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ktune/cache/json.hpp"
#include "ktune/cache/store.hpp"

namespace ktune::stress {

// --name value / --name=value options with integer or string values; unknown options are errors.
class Options {
 public:
  Options(int argc, char** argv, int first);
  int num(const std::string& name, int fallback);
  std::string str(const std::string& name, const std::string& fallback);
  bool flag(const std::string& name);
  void done();  // throws for any option given but never asked for

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> used_;
};

// One line of the summary: name, value, and whether it is a failure when non-zero / false.
class Report {
 public:
  explicit Report(std::string mode) : mode_(std::move(mode)) {}
  void count(const std::string& name, int64_t value, bool must_be_zero = false);
  void text(const std::string& name, const std::string& value, const std::string& required = "");
  void fail(const std::string& why);  // a failure outside the counters
  bool ok() const { return failures_.empty(); }
  // Prints the table to stdout; writes JSON to json_path when non-empty. Returns the exit status.
  int finish(const std::string& json_path, double seconds) const;

 private:
  std::string mode_;
  std::vector<std::pair<std::string, cache::Json>> rows_;  // name, value
  std::vector<std::string> failures_;
};

// A binary record whose every byte follows from (key, size): anyone can check that a stored row is whole.
cache::BinaryRecord make_record(const std::string& key, size_t blob_size);
// True when `r` is exactly make_record(key-of-r, size-of-r) (metadata and blob).
bool is_whole(const cache::BinaryRecord& r);
cache::TuningRecord make_tuning(const std::string& key, const std::string& winner);

// fork()s a child that runs fn and _exit()s with its return value (1 on an exception, message on stderr).
pid_t spawn(const std::function<int()>& fn);
// Waits for pid; returns the exit status, or 128 + signal.
int wait_for(pid_t pid);

std::string temp_dir(const std::string& tag);  // a fresh directory under $TMPDIR
double now_seconds();

// PRAGMA integrity_check on a separate plain connection: "ok" or the first problem.
std::string integrity_check(const std::string& path);

int run_cache_stress(Options& o);
int run_runtime_race(Options& o);
int run_crash(Options& o);

}  // namespace ktune::stress
