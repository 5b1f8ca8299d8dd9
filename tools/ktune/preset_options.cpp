#include "preset_options.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "autotune/buckets.hpp"
#include "autotune/presets.hpp"

namespace ktune::cli {
namespace {

std::optional<int> opt_int(const Args& a, const char* name, int min, int max) {
  if (!a.has(name)) return std::nullopt;
  return a.get_int(name, 0, min, max);
}

}  // namespace

const std::vector<std::string>& preset_option_names() {
  static const std::vector<std::string> names = {"preset", "kv-dtype", "max-batch", "max-seq-len", "spec-tokens"};
  return names;
}

autotune::Preset load_preset_option(const Args& args) {
  if (!args.has("preset")) throw UsageError("--preset is required (see ktune presets)");
  autotune::Preset p = autotune::load_preset(args.get("preset"));
  std::optional<std::string> kv;
  if (args.has("kv-dtype")) {
    kv = args.get("kv-dtype");
    const std::vector<std::string> dtypes = autotune::override_kv_dtypes();
    if (std::find(dtypes.begin(), dtypes.end(), *kv) == dtypes.end())
      throw UsageError(fmt::format("--kv-dtype: expected one of {}, got '{}'", fmt::join(dtypes, ", "), *kv));
  }
  return autotune::with_overrides(p, kv, opt_int(args, "max-batch", 1, autotune::kMaxBucketValue),
                                  opt_int(args, "max-seq-len", 1, autotune::kMaxBucketValue),
                                  opt_int(args, "spec-tokens", 0, autotune::kMaxSpecTokens));
}

double parse_budget(const std::string& s) { return s.empty() ? 0 : parse_duration(s, "--budget"); }

double parse_duration(const std::string& s, const std::string& flag) {
  const char unit = s.empty() ? '\0' : s.back();
  const double mult = unit == 'h' ? 3600 : unit == 'm' ? 60 : 1;
  const std::string num = (unit == 'h' || unit == 'm' || unit == 's') ? s.substr(0, s.size() - 1) : s;
  char* end = nullptr;
  const double v = num.empty() ? 0 : std::strtod(num.c_str(), &end);
  // Plain decimals only: strtod would also take hex (0x10) and exponents (1e-300).
  const bool decimal = num.find_first_not_of("0123456789.") == std::string::npos;
  if (num.empty() || !decimal || end != num.c_str() + num.size() || !std::isfinite(v) || v <= 0)
    throw UsageError(flag + ": expected a positive duration like 90s, 10m or 1h, got '" + s + "'");
  return v * mult;
}

}  // namespace ktune::cli
