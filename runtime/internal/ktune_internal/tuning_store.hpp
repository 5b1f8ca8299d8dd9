// The tuner's access to the runtime's tuning rows: the one write (a row into the writable layer) and the row a
// launch's lookup would use.
#pragma once

#include <optional>
#include <string>

#include "ktune/cache/store.hpp"
#include "ktune/runtime.hpp"

namespace ktune::internal {

// Stores `row` in rt's writable cache layer; false (nothing written) when rt has none. Throws
// Error(cache_error) when the write fails.
bool store_tuning_row(Runtime& rt, const cache::TuningRecord& row);

// The row Runtime::tuned_config (host_tuned_config) reads for (family, key) on `fingerprint`: the first cache
// layer's row that this ktune version tuned, or nullopt. Reads the cache every call (no memo).
std::optional<cache::TuningRecord> tuning_row(Runtime& rt, const std::string& family, const std::string& key,
                                              const std::string& fingerprint);

}  // namespace ktune::internal
