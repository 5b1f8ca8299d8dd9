#include <fmt/format.h>

#include "args.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/arch.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"

namespace ktune::cli {

int cmd_info(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    fmt::print("usage: ktune info [--cache PATH] [--json]\n  Shows the driver, NVRTC, devices, target arches, "
               "families and cache layers. Works without a GPU.\n");
    return 0;
  }
  Args args(argv, {"cache"}, {"json"});
  std::string cache = args.get("cache", default_cache_path());
  SystemInfo s = system_info();
  auto layers = cache_layers(cache);
  if (args.has("json")) {
    std::vector<std::string> devs, lays, fams, arches;
    for (const auto& d : s.devices)
      devs.push_back(JsonObject()
                         .num("ordinal", d.ordinal).str("name", d.name).str("arch", d.arch)
                         .num("sm_count", d.sm_count).num("memory_bytes", d.total_memory_bytes)
                         .num("memory_clock_khz", d.memory_clock_khz).str("fingerprint", d.fingerprint)
                         .dump());
    for (const auto& l : layers)
      lays.push_back(JsonObject().str("path", l.path).boolean("present", l.present).boolean("writable", l.writable)
                         .num("binaries", l.binaries).num("tuning", l.tuning).boolean("served", l.served)
                         .str("note", l.note).dump());
    for (const auto& f : families()) fams.push_back(json_quote(f.name));
    for (const auto& a : supported_cuda_arches()) arches.push_back(json_quote(a));
    fmt::print("{}\n", JsonObject()
                           .str("ktune_version", version())
                           .boolean("driver_loaded", s.driver_loaded).num("driver_version", s.driver_version)
                           .str("driver_error", s.driver_error)
                           .boolean("nvrtc_loaded", s.nvrtc_loaded).str("nvrtc_version", s.nvrtc_version)
                           .str("nvrtc_path", s.nvrtc_path).str("nvrtc_error", s.nvrtc_error)
                           .raw("devices", json_array(devs)).raw("arches", json_array(arches))
                           .raw("families", json_array(fams)).raw("cache_layers", json_array(lays))
                           .dump());
    return 0;
  }
  fmt::print("ktune {}\n", version());
  if (s.driver_loaded)
    fmt::print("driver:  CUDA {}.{} ({})\n", s.driver_version / 1000, (s.driver_version % 1000) / 10, s.driver_path);
  else
    fmt::print("driver:  none — {}\n", s.driver_error);
  if (s.nvrtc_loaded)
    fmt::print("nvrtc:   {} ({})\n", s.nvrtc_version, s.nvrtc_path);
  else
    fmt::print("nvrtc:   none — {}\n", s.nvrtc_error);
  if (s.devices.empty()) fmt::print("devices: none\n");
  for (const auto& d : s.devices)
    fmt::print("device {}: {} ({}, {} SMs, {:.1f} GiB, mem clock {} MHz)\n", d.ordinal, d.name, d.arch, d.sm_count,
               d.total_memory_bytes / double(1 << 30), d.memory_clock_khz / 1000);
  fmt::print("arches:  {}\n", fmt::join(supported_cuda_arches(), " "));
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.name);
  fmt::print("families: {}\n", fmt::join(names, " "));
  for (const auto& l : layers) {
    if (l.present)
      fmt::print("cache:   {} ({}, {} binaries, {} tuning rows){}\n", l.path, l.writable ? "rw" : "ro", l.binaries,
                 l.tuning, l.served ? std::string() : " — not served under KTUNE_TRUSTED_KEYS: " + l.note);
    else
      fmt::print("cache:   {} (absent{}{})\n", l.path, l.note.empty() ? "" : ": ", l.note);
  }
  return 0;
}

}  // namespace ktune::cli
