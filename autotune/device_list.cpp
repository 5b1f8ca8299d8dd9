#include "autotune/device_list.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune {
namespace {

[[noreturn]] void bad(const std::string& what, const std::string& message) {
  throw Error(Status::invalid_argument, "warmup", fmt::format("{}: {}", what, message));
}

std::string machine_has(int device_count) {
  if (device_count <= 0) return "this machine has no GPU";
  if (device_count == 1) return "this machine has 1 GPU: ordinal 0";
  return fmt::format("this machine has {} GPUs: ordinals 0..{}", device_count, device_count - 1);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, int device_count, const std::string& what) {
  const std::string expected = "expected \"all\" or comma-separated GPU ordinals like 0,1";
  if (text.empty()) bad(what, fmt::format("{}, got nothing", expected));
  if (text == "all") {
    if (device_count <= 0) bad(what, "\"all\": expected at least one GPU, but " + machine_has(device_count));
    std::vector<int> every(static_cast<size_t>(device_count));
    for (int i = 0; i < device_count; ++i) every[static_cast<size_t>(i)] = i;
    return every;
  }
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(start, end - start);
    if (entry.empty()) bad(what, fmt::format("{}, got an empty entry in '{}'", expected, text));
    if (entry[0] == '-' && all_digits(entry.substr(1)))
      bad(what, fmt::format("'{}': expected a GPU ordinal >= 0 ({})", entry, machine_has(device_count)));
    if (!all_digits(entry) || entry.size() > 6) bad(what, fmt::format("{}, got '{}'", expected, entry));
    const int ordinal = std::stoi(entry);
    if (std::find(out.begin(), out.end(), ordinal) != out.end())
      bad(what, fmt::format("'{}' is given twice: expected each GPU once (one worker process per GPU)", entry));
    out.push_back(ordinal);
    start = end + 1;
  }
  // Against this machine only once the list is well formed, so a malformed list is named as such anywhere.
  for (int ordinal : out)
    if (ordinal >= device_count)
      bad(what, fmt::format("'{}': expected a GPU ordinal below {} ({})", ordinal, device_count,
                            machine_has(device_count)));
  return out;
}

}  // namespace ktune::autotune
