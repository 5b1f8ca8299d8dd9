#include "ktune/tuning.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/context.hpp"
#include "ktune_internal/log.hpp"
#include "runtime_impl.hpp"

namespace ktune {
using namespace detail;

int64_t bucket_pow2_ceil(int64_t value) {
  if (value <= 1) return 1;
  return int64_t{1} << (64 - __builtin_clzll(static_cast<uint64_t>(value - 1)));
}

std::string tuning_key(const std::string& problem_key, std::vector<std::pair<std::string, int64_t>> buckets) {
  if (buckets.empty()) return problem_key;
  std::sort(buckets.begin(), buckets.end());
  std::string key = problem_key + "|";
  for (size_t i = 0; i < buckets.size(); ++i)
    key += fmt::format("{}{}{}", i ? "." : "", buckets[i].first, buckets[i].second);
  return key;
}

const std::string& Runtime::Impl::fingerprint_of(void* ctx) {
  std::lock_guard<std::mutex> lock(tuning_mutex);
  auto it = fingerprints.find(ctx);
  if (it != fingerprints.end()) return it->second;
  const DriverApi& cu = driver();
  CUdevice dev = 0;
  check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  int ordinal = static_cast<int>(dev);  // CUdevice is the ordinal
  std::string fp;
  for (const auto& d : system_info().devices)
    if (d.ordinal == ordinal) fp = d.fingerprint;
  return fingerprints.emplace(ctx, fp).first->second;
}

std::string Runtime::Impl::tuned_config_for(const std::string& family, const std::string& key, const std::string& fp,
                                            const char* where) {
  const std::string memo_key = family + "\n" + key + "\n" + fp;
  {
    std::lock_guard<std::mutex> lock(tuning_mutex);
    auto it = tuned.find(memo_key);
    if (it != tuned.end()) {
      if (it->second.empty()) stats.tuning_misses++;
      return it->second;
    }
  }
  // Only a winner measured by this build counts: another version's kernels (and search space) may differ, so its
  // winner is a measurement of something else, as a binary of another version is never loaded.
  std::string winner, stale_version, passed_over;
  try {
    if (auto row = cache->get_tuning(family, key, fp, version(), &stale_version, &passed_over))
      winner = row->winner_config;
  } catch (const std::exception& e) {
    log(LogLevel::warn, "tuning lookup {} {} failed ({}); using the default config", family, key, e.what());
  }
  std::lock_guard<std::mutex> lock(tuning_mutex);
  // The row was read without the lock: a winner remembered meanwhile (the tuner, in this process) is newer than
  // what was read, and stays.
  const auto [slot, inserted] = tuned.emplace(memo_key, winner);
  if (!inserted) return slot->second;
  if (winner.empty()) {
    stats.tuning_misses++;
    if (!passed_over.empty()) {
      log(LogLevel::warn, "the tuned config for {} {} on {} could not be read ({}); using the default", family, key,
          where, passed_over);
    } else if (!stale_version.empty()) {
      log(stale_tuning_warned ? LogLevel::info : LogLevel::warn,
          "the tuned config for {} {} on {} was measured by ktune {}, not this ktune {}; using the default "
          "until `ktune warmup` tunes it again{}",
          family, key, where, stale_version, version(),
          stale_tuning_warned ? "" : " (other such keys are logged at level info)");
      stale_tuning_warned = true;
    } else {
      log(LogLevel::info, "no tuned config for {} {} on {}; using the default", family, key, where);
    }
  }
  return winner;
}

void Runtime::Impl::remember_tuned_config_for(const std::string& family, const std::string& key, const std::string& fp,
                                              const std::string& config) {
  std::lock_guard<std::mutex> lock(tuning_mutex);
  tuned[family + "\n" + key + "\n" + fp] = config;
  tuning_generation.fetch_add(1, std::memory_order_release);
}

void Runtime::Impl::forget_tuned_config_for(const std::string& family, const std::string& key, const std::string& fp) {
  std::lock_guard<std::mutex> lock(tuning_mutex);
  if (tuned.erase(family + "\n" + key + "\n" + fp) > 0)
    tuning_generation.fetch_add(1, std::memory_order_release);  // prepared ops resolve their config again
}

std::string Runtime::tuned_config(const std::string& family, const std::string& key) {
  void* ctx = internal::current_context();
  const std::string& fp = impl_->fingerprint_of(ctx);
  return impl_->tuned_config_for(family, key, fp, fp.c_str());
}

void Runtime::remember_tuned_config(const std::string& family, const std::string& key, const std::string& config) {
  void* ctx = internal::current_context();
  impl_->remember_tuned_config_for(family, key, impl_->fingerprint_of(ctx), config);
}

std::string Runtime::device_fingerprint() {
  void* ctx = internal::current_context();
  if (!ctx) throw Error(Status::cuda_error, "runtime", "no current CUDA context");
  return impl_->fingerprint_of(ctx);
}

}  // namespace ktune
