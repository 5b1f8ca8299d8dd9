// The tuner's access to the runtime's tuning rows: the one write (a row into the writable layer), the row a
// launch's lookup would use, and the single flight that lets processes warming one cache tune each key once.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ktune/cache/store.hpp"
#include "ktune/runtime.hpp"

namespace ktune::internal {

// Stores `row` in rt's writable cache layer; false (nothing written) when rt has none. Throws
// Error(cache_error) when the write fails.
bool store_tuning_row(Runtime& rt, const cache::TuningRecord& row);

// The row Runtime::tuned_config (host_tuned_config) reads for (family, key) on `fingerprint`: the writable layer's
// row that this ktune version tuned, else the first read-only layer's, or nullopt. Reads the cache every call (no memo).
std::optional<cache::TuningRecord> tuning_row(Runtime& rt, const std::string& family, const std::string& key,
                                              const std::string& fingerprint);

// Cross-process single flight for tuning (family, key) on the device with `fingerprint`: an advisory lock in
// `<writable layer>.tune-lock` (runtime/src/key_locks.hpp). While one process holds it, another warming the same
// layer waits (up to wait_s seconds) and then finds the row; so the key is measured once, and never by two
// processes timing candidates at the same time. Unheld without a writable layer or where the file system has no
// such locks.
struct TuningFlight {
  std::shared_ptr<void> lock;  // the held lock, released with the last copy
  bool waited = false;         // another process held it: it may have stored the row meanwhile
  std::string note;            // why the wait ended unheld (its time ran out), else ""
};
TuningFlight tuning_flight(Runtime& rt, const std::string& family, const std::string& key,
                           const std::string& fingerprint, double wait_s);

// Drops what rt remembers of (family, key) on `fingerprint` (a winner or a known miss), so the next
// tuned_config / host_tuned_config reads the cache again: another process may have stored the row since.
void forget_tuned_config(Runtime& rt, const std::string& family, const std::string& key,
                         const std::string& fingerprint);

}  // namespace ktune::internal
