// The options warmup, replay and cache check share: the preset and its bucket overrides, the tuning budget.
#pragma once

#include <string>
#include <vector>

#include "args.hpp"
#include "autotune/presets.hpp"

namespace ktune::cli {

// Names of the options load_preset_option reads (for an Args option list).
const std::vector<std::string>& preset_option_names();  // preset, kv-dtype, max-batch, max-seq-len, spec-tokens

// --preset NAME|FILE with --kv-dtype / --max-batch / --max-seq-len / --spec-tokens applied. Integer options
// out of range are a UsageError naming the option; the rest is checked by autotune::with_overrides.
autotune::Preset load_preset_option(const Args& args);

// --budget: a positive duration "90", "90s", "10m" or "1.5h" in seconds; absent (empty) is 0 (no budget).
double parse_budget(const std::string& text);
// The same for any duration flag (named in the error); empty is an error.
double parse_duration(const std::string& text, const std::string& flag);

}  // namespace ktune::cli
