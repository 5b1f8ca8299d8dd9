#include "args.hpp"

#include <algorithm>

#include "ktune/error.hpp"
#include "ktune/family.hpp"

namespace ktune::cli {

Args::Args(const std::vector<std::string>& argv, const std::vector<std::string>& valued,
           const std::vector<std::string>& flags, size_t max_positional) {
  auto known = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (known(flags, name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      values_[name] = "1";
    } else if (known(valued, name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
        value = argv[++i];
      }
      if (value.empty()) throw UsageError("--" + name + " needs a non-empty value");
      // A second value would silently replace the first (`--arch host --arch sm_90a` compiling sm_90a only).
      if (values_.count(name))
        throw UsageError("--" + name + " given twice ('" + values_[name] + "', then '" + value +
                         "'): give it once (lists take commas where the option allows several)");
      values_[name] = value;
    } else {
      throw UsageError("unknown option --" + name + " (see --help)");
    }
  }
  if (positional_.size() > max_positional)
    throw UsageError("unexpected argument '" + positional_[max_positional] +
                     "' (options are --name value; see --help)");
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int Args::get_int(const std::string& name, int fallback, int min, int max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string range = min == INT_MIN && max == INT_MAX ? "an integer"
                            : max == INT_MAX ? "an integer >= " + std::to_string(min)
                                             : "an integer in " + std::to_string(min) + ".." + std::to_string(max);
  long long v = 0;
  try {
    size_t used = 0;
    v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw UsageError("--" + name + ": expected " + range + ", got '" + it->second + "'");
  }
  if (v < min || v > max) throw UsageError("--" + name + ": expected " + range + ", got " + it->second);
  return static_cast<int>(v);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

const FamilyInfo& family_option(const Args& args) {
  if (!args.has("family")) throw UsageError("--family is required");
  try {
    return family(args.get("family"));
  } catch (const Error& e) {
    if (e.status() != Status::not_found) throw;
    std::string known;
    for (const auto& f : families()) known += (known.empty() ? "" : ", ") + f.name;
    throw UsageError("--family: unknown family '" + args.get("family") + "': expected one of " + known);
  }
}

}  // namespace ktune::cli
