// runtime/internal/ktune_internal/{tuning_store,compiler}.hpp.
#include "ktune/cache/sha256.hpp"
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

TuningFlight tuning_flight(Runtime& rt, const std::string& family, const std::string& key,
                           const std::string& fingerprint, double wait_s) {
  TuningFlight flight;
  Runtime::Impl& impl = RuntimeImplAccess::of(rt);
  if (!impl.tuning_locks) return flight;
  detail::KeyLocks::Held held = impl.tuning_locks->acquire(
      cache::sha256_hex(family + "\n" + key + "\n" + fingerprint), wait_s, &flight.note);
  flight.waited = held.waited();
  if (held.held()) flight.lock = std::make_shared<detail::KeyLocks::Held>(std::move(held));
  return flight;
}

void forget_tuned_config(Runtime& rt, const std::string& family, const std::string& key,
                         const std::string& fingerprint) {
  RuntimeImplAccess::of(rt).forget_tuned_config_for(family, key, fingerprint);
}

bool nvrtc_loadable(std::string* why_not) { return detail::try_nvrtc(why_not) != nullptr; }

}  // namespace ktune::internal
