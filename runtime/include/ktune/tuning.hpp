// Tuning keys as launches compute them: the static problem key plus power-of-two buckets of the dynamic
// dimensions, e.g. "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none|b64.l4096". Warmup tunes exactly these
// buckets, so a request finds its tuned config in O(1); a request outside every tuned bucket gets the
// family's default config (correct for any shape, perhaps slower) and is counted as a tuning miss.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ktune/export.hpp"

namespace ktune {

// The smallest power of two >= value (value >= 1; values < 1 map to 1). O(1).
KTUNE_API int64_t bucket_pow2_ceil(int64_t value);

// "<problem_key>|<d1><v1>.<d2><v2>" with dims given by their short names (b = batch, l = max seq len,
// m = GEMM rows), sorted by name. Matches autotune::tuning_problem_key.
KTUNE_API std::string tuning_key(const std::string& problem_key,
                                 std::vector<std::pair<std::string, int64_t>> short_dim_buckets);

}  // namespace ktune
