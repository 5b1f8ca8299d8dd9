// Command-line parsing for ktune subcommands: `--name value`, `--name=value`, boolean `--flag`.
#pragma once

#include <climits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ktune {
struct FamilyInfo;
}

namespace ktune::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `flags` are options that take no value; every other --option takes one, and an empty value is an error.
  // Unknown options are errors, and so are more than `max_positional` arguments that are not options.
  Args(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
       const std::vector<std::string>& flags, size_t max_positional = 0);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // The integer value of --name (fallback when absent); a value outside [min, max] is a UsageError.
  int get_int(const std::string& name, int fallback, int min = INT_MIN, int max = INT_MAX) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

std::vector<std::string> split(const std::string& s, char sep);

// The kernel family --family names; missing or unknown is a usage error (an unknown name lists the known ones).
const FamilyInfo& family_option(const Args& args);

}  // namespace ktune::cli
