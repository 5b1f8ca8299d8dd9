// Which GPUs a multi-device warmup runs on: "all" or a comma-separated list of ordinals ("0,1,3").
#pragma once

#include <string>
#include <vector>

#include "ktune/export.hpp"

namespace ktune::autotune {

// The ordinals `text` names, in the order given, checked against `device_count` GPUs. `what` names the
// setting in errors ("--devices", "options.devices"). Throws Error(invalid_argument, "warmup", ...) naming
// `what`, the bad entry and what was expected, for: an empty list or entry, anything but a decimal ordinal,
// a negative ordinal, an ordinal given twice, an ordinal not below device_count, and "all" on a machine
// without a GPU. The whole list is checked for form first, then against the machine, so a malformed list is
// named as such on any machine.
KTUNE_API std::vector<int> parse_device_list(const std::string& text, int device_count, const std::string& what);

}  // namespace ktune::autotune
