// The tuner's one write into the runtime's cache: a tuning row into the writable layer.
#pragma once

#include "ktune/cache/store.hpp"
#include "ktune/runtime.hpp"

namespace ktune::internal {

// Stores `row` in rt's writable cache layer; false (nothing written) when rt has none. Throws
// Error(cache_error) when the write fails.
bool store_tuning_row(Runtime& rt, const cache::TuningRecord& row);

}  // namespace ktune::internal
