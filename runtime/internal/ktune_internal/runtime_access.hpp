// Per-runtime state that lives as long as the Runtime: what prepared ops keep between one-shot calls, and the
// generation of tuned configs they resolved against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ktune/runtime.hpp"

namespace ktune::internal {

// The object stored under `name` in `rt`, made by `make` on first use (thread-safe); destroyed with `rt`.
std::shared_ptr<void> runtime_slot(Runtime& rt, const std::string& name,
                                   const std::function<std::shared_ptr<void>()>& make);

// Incremented whenever `rt` learns a new tuned config (Runtime::remember_tuned_config and its host twin), so a
// memoized config choice can tell it is stale with one atomic load.
uint64_t tuning_generation(const Runtime& rt);

}  // namespace ktune::internal
