// runtime/internal/ktune_internal/{tuning_store,compiler}.hpp.
#include "ktune_internal/compiler.hpp"
#include "ktune_internal/tuning_store.hpp"
#include "nvrtc_api.hpp"
#include "runtime_impl.hpp"

namespace ktune::internal {

bool store_tuning_row(Runtime& rt, const cache::TuningRecord& row) {
  cache::LayeredCache& cache = *RuntimeImplAccess::of(rt).cache;
  if (!cache.writable_layer()) return false;
  cache.put_tuning(row);
  return true;
}

std::optional<cache::TuningRecord> tuning_row(Runtime& rt, const std::string& family, const std::string& key,
                                              const std::string& fingerprint) {
  return RuntimeImplAccess::of(rt).cache->get_tuning(family, key, fingerprint, version());
}

bool nvrtc_loadable(std::string* why_not) { return detail::try_nvrtc(why_not) != nullptr; }

}  // namespace ktune::internal
