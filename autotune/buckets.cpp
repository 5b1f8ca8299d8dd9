#include "autotune/buckets.hpp"

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune {
namespace {

[[noreturn]] void bad_range(const char* field, int64_t min_bucket, int64_t max_bucket) {
  throw Error(Status::invalid_argument, "autotune",
              fmt::format("{}: bucket range expected 1 <= min <= max, got min {} and max {}", field, min_bucket,
                          max_bucket));
}

// Smallest power of two >= v, for 1 <= v < 2^62.
int64_t next_pow2(int64_t v) {
  if (v <= 1) return 1;
  return int64_t{1} << (64 - __builtin_clzll(static_cast<unsigned long long>(v - 1)));
}

}  // namespace

int bucket_pow2(int64_t value, int min_bucket, int max_bucket, const char* field) {
  if (min_bucket < 1 || max_bucket < min_bucket) bad_range(field, min_bucket, max_bucket);
  if (value <= 0)
    throw Error(Status::invalid_argument, "autotune", fmt::format("{}: expected a positive size, got {}", field, value));
  // Checked before rounding so that huge values cannot overflow next_pow2.
  if (value >= max_bucket) return max_bucket;
  if (value <= min_bucket) return min_bucket;
  int64_t b = next_pow2(value);
  return b > max_bucket ? max_bucket : static_cast<int>(b);
}

int bucket_for(const BucketSpec& spec, int64_t value) {
  return bucket_pow2(value, spec.min, spec.max, spec.dim.empty() ? "value" : spec.dim.c_str());
}

void validate_bucket_spec(const BucketSpec& spec) {
  if (spec.dim.empty()) throw Error(Status::invalid_argument, "autotune", "bucket spec: dim: expected a name, got \"\"");
  if (spec.min < 1 || spec.max < spec.min) bad_range(spec.dim.c_str(), spec.min, spec.max);
}

std::vector<int> bucket_values(const BucketSpec& spec) {
  validate_bucket_spec(spec);
  std::vector<int> out{spec.min};
  for (int64_t b = next_pow2(spec.min) == spec.min ? int64_t{spec.min} * 2 : next_pow2(spec.min); b < spec.max; b *= 2)
    out.push_back(static_cast<int>(b));
  if (spec.max != spec.min) out.push_back(spec.max);
  return out;
}

std::string short_dim(const std::string& dim) {
  if (dim == "batch") return "b";
  if (dim == "seq_len") return "l";
  if (dim == "tokens") return "m";
  return dim;
}

std::vector<std::pair<std::string, int64_t>> short_buckets(const std::vector<BucketValue>& buckets) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& b : buckets) out.emplace_back(short_dim(b.dim), b.value);
  return out;
}

}  // namespace ktune::autotune
