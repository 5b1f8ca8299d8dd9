// Buckets for the dynamic dimensions of a problem (batch, max sequence length, GEMM M), so that a finite set of
// tuning keys covers every request.
//
// The buckets of a BucketSpec are min, the powers of two between min and max, and max; a value maps to the
// smallest bucket >= it (between the ends, the next power of two). The largest bucket is `max` itself even when
// it is not a power of two (a 40960-token context gives ..., 16384, 32768, 40960).
//
// A request larger than the largest bucket maps to the largest. That is safe: a tile config never depends on
// the bucket for correctness (every config handles any shape), only for speed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ktune/export.hpp"

namespace ktune::autotune {

// The largest bucket range end a preset or an override may give: launches round a value up to a power of
// two, and 2^30 is the largest that is still an int.
constexpr int kMaxBucketValue = 1 << 30;

struct BucketSpec {
  std::string dim;  // "batch", "seq_len", "tokens"
  int min = 1;      // smallest bucket, >= 1
  int max = 1;      // largest bucket, >= min
};

// One dynamic dimension's bucket, as it appears in a tuning key.
struct BucketValue {
  std::string dim;  // BucketSpec::dim
  int value = 0;
};

// O(1): no loop, no allocation. Throws Error(invalid_argument, "autotune") naming `field` when value <= 0, and
// when the range is empty (min_bucket < 1 or max_bucket < min_bucket).
KTUNE_API int bucket_pow2(int64_t value, int min_bucket, int max_bucket, const char* field = "value");
// bucket_pow2 with the spec's range; errors name spec.dim.
KTUNE_API int bucket_for(const BucketSpec& spec, int64_t value);
// Every bucket bucket_for can return, ascending: min, the powers of two between, max (what warmup tunes).
KTUNE_API std::vector<int> bucket_values(const BucketSpec& spec);
// Throws Error(invalid_argument) unless 1 <= min <= max and dim is non-empty.
KTUNE_API void validate_bucket_spec(const BucketSpec& spec);

// A dim's short name in tuning keys: batch -> b, seq_len -> l, tokens -> m, any other dim its own name.
KTUNE_API std::string short_dim(const std::string& dim);
// Bucket values by short name, the form tuning keys and workloads take ({"b", 64}, {"l", 4096}).
KTUNE_API std::vector<std::pair<std::string, int64_t>> short_buckets(const std::vector<BucketValue>& buckets);

}  // namespace ktune::autotune
