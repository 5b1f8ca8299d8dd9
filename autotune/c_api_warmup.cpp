// The C API's warmup entry and preset listing (ktune.h): the autotune/ side of the C API, kept out of
// runtime/ so the runtime core never includes the tuner.
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autotune/device_list.hpp"
#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/device.hpp"
#include "ktune/ktune.h"
#include "ktune_internal/c_api.hpp"
#include "ktune_internal/context.hpp"

namespace {
using namespace ktune::capi;

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> bindings_split(const char* s) {
  std::vector<std::string> out;
  if (!s) return out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

extern "C" {

ktune_status ktune_preset_names(const char** names) {
  if (!names) return invalid("ktune_preset_names: names must not be NULL");
  static thread_local std::string result;
  return guarded([&] {
    result = join(ktune::autotune::preset_names());
    *names = result.c_str();
  });
}

void ktune_warmup_options_default(ktune_warmup_options* o) {
  if (!o) return;
  *o = ktune_warmup_options{nullptr, nullptr, nullptr, 0, 0, -1, 1, 0.0, 0, -1, nullptr, nullptr};
}

ktune_status ktune_warmup(ktune_runtime* runtime, const ktune_warmup_options* o, ktune_warmup_result* out) {
  return ktune_warmup_workers(runtime, o, nullptr, 0, out);
}

ktune_status ktune_warmup_workers(ktune_runtime* runtime, const ktune_warmup_options* o, const char* devices,
                                  int host_workers, ktune_warmup_result* out) {
  ktune_warmup_request request;
  ktune_warmup_request_default(&request);
  request.options = o;
  request.devices = devices;
  request.host_workers = host_workers;
  return ktune_warmup_run(runtime, &request, out);
}

ktune_status ktune_warmup_request_init(ktune_warmup_request* request, size_t struct_size) {
  ktune_warmup_request defaults{};
  defaults.struct_size = sizeof(ktune_warmup_request);
  defaults.family_id = ktune::c_family_id("warmup_request");
  return init_c_struct(request, struct_size, defaults, "ktune_warmup_request_init");
}

ktune_status ktune_warmup_run(ktune_runtime* runtime, const ktune_warmup_request* request, ktune_warmup_result* out) {
  if (!runtime) return invalid("ktune_warmup: runtime must not be NULL");
  if (!request) return invalid("ktune_warmup: request must not be NULL");
  if (ktune_status st = check_args_header(request, "warmup_request", ktune::c_family_id("warmup_request"),
                                          sizeof(ktune_warmup_request), "ktune_warmup", {}, "request",
                                          "ktune_warmup_request_default"))
    return st;
  const ktune_warmup_request req = ktune::read_c_args<ktune_warmup_request>(request);
  const ktune_warmup_options* o = req.options;
  const char* devices = req.devices;
  const int host_workers = req.host_workers;
  if (!o) return invalid("ktune_warmup: options must not be NULL");
  if (!out) return invalid("ktune_warmup: result must not be NULL");
  if (!o->preset || !*o->preset) return invalid("ktune_warmup: options.preset: expected a preset name or file, got none");
  if (o->max_batch < 0) return invalid(("ktune_warmup: options.max_batch: expected 0 (preset's) or a positive batch, got " + std::to_string(o->max_batch)).c_str());
  if (o->max_seq_len < 0) return invalid(("ktune_warmup: options.max_seq_len: expected 0 (preset's) or a positive length, got " + std::to_string(o->max_seq_len)).c_str());
  if (o->spec_tokens < -1) return invalid(("ktune_warmup: options.spec_tokens: expected -1 (preset's) or >= 0, got " + std::to_string(o->spec_tokens)).c_str());
  if (!(o->budget_s >= 0)) return invalid("ktune_warmup: options.budget_s: expected seconds >= 0");
  if (o->jobs < 0) return invalid(("ktune_warmup: options.jobs: expected >= 0, got " + std::to_string(o->jobs)).c_str());
  if (host_workers < 0)
    return invalid(("ktune_warmup: host_workers: expected 0 (none) or a count of host workers, got " + std::to_string(host_workers)).c_str());
  const bool multi_device = devices && *devices;
  if (multi_device && o->device >= 0)
    return invalid("ktune_warmup: options.device and devices: expected one of them (device -1 with devices)");
  *out = ktune_warmup_result{};
  static thread_local std::string items;
  // options.device switches this thread to that GPU for the warmup only: the caller's own context (or none, or
  // the host device) is current again when ktune_warmup returns, whatever the outcome.
  std::optional<ktune::internal::CallerDeviceScope> caller_device;
  if (o->device >= 0) {
    caller_device.emplace();
    ktune_status s = ktune_ensure_device(o->device);
    if (s != KTUNE_OK) return s;
  }
  return guarded([&] {
    namespace at = ktune::autotune;
    at::Preset preset = at::load_preset(o->preset);
    std::optional<std::string> kv;
    if (o->kv_dtype && *o->kv_dtype) kv = std::string(o->kv_dtype);
    std::optional<int> mb, ms, st;
    if (o->max_batch > 0) mb = o->max_batch;
    if (o->max_seq_len > 0) ms = o->max_seq_len;
    if (o->spec_tokens >= 0) st = o->spec_tokens;
    preset = at::with_overrides(preset, kv, mb, ms, st);
    at::WarmupOptions w;
    w.arches = bindings_split(o->arches);
    w.all_candidates = o->all_candidates != 0;
    w.budget_s = o->budget_s;
    w.jobs = o->jobs;
    if (multi_device)
      w.devices = at::parse_device_list(devices, static_cast<int>(ktune::system_info().devices.size()),
                                        "devices");
    w.host_workers = host_workers;
    w.retune = req.retune != 0;
    std::mutex progress_mutex;  // the callback is never entered by two threads at once
    if (o->progress)
      w.progress = [&](const std::string& what, size_t done, size_t total) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        o->progress(what.c_str(), done, total, o->progress_user);
      };
    // A warmup's results are what it stores: with no writable layer (a read-only image, KTUNE_CACHE_READONLY=1)
    // it would tune and report keys that no process ever finds, so it refuses up front, as `ktune warmup` does.
    std::string why;
    if (runtime->rt.writable_cache_layer(&why).empty())
      throw ktune::Error(ktune::Status::cache_error, "warmup", "nothing could be stored: " + why);
    at::WarmupReport r = at::warmup(runtime->rt, preset, w);
    ktune::cache::Json arr = ktune::cache::Json::array();
    for (const auto& it : r.items) {
      ktune::cache::Json e = ktune::cache::Json::object();
      e.set("arch", it.arch).set("family", it.family).set("key", it.tuning_key).set("status", it.status)
          .set("winner", it.winner).set("ms", it.ms).set("device", it.device);
      arr.push(std::move(e));
    }
    items = arr.dump();
    *out = ktune_warmup_result{r.keys, r.tuned, r.already_done, r.skipped, r.failed, r.compile_jobs, r.compiled,
                               r.cache_hits, r.compile_failed, r.compile_wall_ms, r.tune_ms, r.wall_ms,
                               r.budget_exhausted ? 1 : 0, items.c_str()};
  });
}

}  // extern "C"
