// ktune cache check: does the layered cache cover a preset? GPU-free: for every key the preset needs, whether
// the default config's binary and the tuned config's binary are in a layer (found by the runtime's own lookup
// with compiling forbidden, so "present" means a KTUNE_JIT=0 runtime finds it), and whether a tuning row
// exists for the device named. Exit 1 when a binary is missing.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "arch_options.hpp"
#include "args.hpp"
#include "autotune/plan.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_view.hpp"
#include "autotune/warmup.hpp"
#include "commands.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/tuning.hpp"
#include "preset_options.hpp"

namespace ktune::cli {
namespace {

using cache::Json;

constexpr size_t kMaxFingerprintFileBytes = size_t{1} << 20;

// Which device's tuning rows count: an exact fingerprint, or every fingerprint whose device name matches.
struct DeviceSelector {
  std::string fingerprint;  // exact (from --fingerprint, or the current GPU)
  std::string name;         // --device: the fingerprint's first field
  std::string describe() const {
    if (!fingerprint.empty()) return "fingerprint " + fingerprint;
    if (!name.empty()) return "device " + name;
    return "";
  }
  bool matches(const std::string& fp) const {
    if (!fingerprint.empty()) return fp == fingerprint;
    return !name.empty() && fp.substr(0, fp.find('|')) == name;
  }
};

// A fingerprint file holds one fingerprint line ("NVIDIA H200|cc9.0|sm132|...") or `ktune info --json` output
// (its first device's fingerprint is used).
std::string read_fingerprint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("--fingerprint: cannot read " + path);
  std::string text(kMaxFingerprintFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFingerprintFileBytes)
    throw UsageError(fmt::format("--fingerprint: {} is larger than {} bytes", path, kMaxFingerprintFileBytes));
  const size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) throw UsageError("--fingerprint: " + path + " is empty");
  text = text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
  if (text[0] != '{') {
    if (text.find('\n') != std::string::npos)
      throw UsageError("--fingerprint: " + path + " holds more than one line (expected one device fingerprint)");
    return text;
  }
  try {
    const Json j = Json::parse(text);
    const Json* devices = j.find("devices");
    if (devices && devices->is_array() && devices->size() > 0 && devices->at(0).find("fingerprint"))
      return devices->at(0).at("fingerprint").as_string();
  } catch (const std::exception& e) {
    throw UsageError("--fingerprint: " + path + " is not `ktune info --json` output (" + e.what() + ")");
  }
  throw UsageError("--fingerprint: " + path + " lists no device (expected `ktune info --json` output from a GPU)");
}

// The arch a fingerprint's "ccM.N" field implies, if it has one.
std::optional<Arch> arch_of_fingerprint(const std::string& fp) {
  const size_t at = fp.find("|cc");
  if (at == std::string::npos) return std::nullopt;
  int major = 0, minor = 0;
  if (std::sscanf(fp.c_str() + at + 3, "%d.%d", &major, &minor) != 2) return std::nullopt;
  return arch_for_compute_capability(major, minor);
}

struct Binary {
  bool present = false;
  std::string detail;  // the readable name when present, else why not
};

// The runtime's lookup with compiling forbidden: present iff a KTUNE_JIT=0 runtime would find it.
Binary find_binary(Runtime& rt, const FamilyInfo& fam, const std::string& problem, const std::string& config,
                   const Arch& arch) {
  try {
    return {true, rt.ensure_binary(fam.generate(problem, config, arch), arch).name};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

}  // namespace

int cmd_cache_check(const std::vector<std::string>& argv) {
  std::vector<std::string> valued = preset_option_names();
  valued.insert(valued.end(), {"arch", "device", "fingerprint", "cache"});
  Args args(argv, valued, {"json"});
  if (args.has("device") && args.has("fingerprint"))
    throw UsageError("give --device NAME or --fingerprint FILE, not both");
  std::vector<Arch> arches;
  if (args.has("arch")) arches = parse_arch_option(args.get("arch"), true);
  autotune::Preset preset = load_preset_option(args);

  DeviceSelector device;
  if (args.has("fingerprint")) device.fingerprint = read_fingerprint_file(args.get("fingerprint"));
  else if (args.has("device")) device.name = args.get("device");
  else if (make_gpu_current()) device.fingerprint = system_info().devices[0].fingerprint;
  if (arches.empty()) {
    // The device's arch when it is known, else every arch a GPU-less warmup compiles for.
    if (auto a = arch_of_fingerprint(device.fingerprint)) arches.push_back(*a);
    else
      for (const auto& name : supported_cuda_arches()) arches.push_back(Arch::parse(name));
  }

  RuntimeOptions o = RuntimeOptions::from_env();
  if (args.has("cache")) o.cache_path = args.get("cache");
  o.allow_jit = false;  // a check never compiles: a miss is reported, not filled
  o.read_only = true;
  Runtime rt(o);

  // Tuning rows by (family, tuning key) of a matching device, the one a process would run. Rows tuned by another
  // ktune version are listed apart: the runtime does not use them (its kernels may differ), so their keys run the
  // default until a warmup of this version tunes them again.
  std::map<std::string, CacheTuningEntry> rows, stale_rows;
  // The row a process would run where several layers hold one: the writable layer's (or the one a writable
  // process would write), else the first layer's in the search path (LayeredCache::get_tuning).
  std::map<std::string, size_t> layer_rank;
  std::set<std::string> unserved;  // with KTUNE_TRUSTED_KEYS: layers whose rows a trusting runtime never uses
  {
    const std::string first = cache_tuning_first_layer(o.cache_path);
    size_t next = 1;
    for (const auto& l : cache_layers(o.cache_path)) {
      layer_rank.emplace(l.path, l.path == first ? 0 : next++);
      if (!l.served) unserved.insert(l.path);
    }
  }
  const auto rank_of = [&](const std::string& layer) {
    auto it = layer_rank.find(layer);
    return it == layer_rank.end() ? layer_rank.size() + 1 : it->second;
  };
  const auto keep_served = [&](const std::string& slot_key, const CacheTuningEntry& t) {
    auto& slot = (t.ktune_version == version() ? rows : stale_rows)[slot_key];
    if (slot.problem_key.empty() || rank_of(t.layer) < rank_of(slot.layer)) slot = t;
  };
  std::vector<CacheTuningEntry> tuning_rows = cache_list_tuning(o.cache_path);
  tuning_rows.erase(std::remove_if(tuning_rows.begin(), tuning_rows.end(),
                                   [&](const CacheTuningEntry& t) { return unserved.count(t.layer) > 0; }),
                    tuning_rows.end());
  for (const auto& t : tuning_rows) {
    // This host's rows are read below, under host keys: a host config never runs on a CUDA arch.
    const bool host_row = t.device_fingerprint.find(";cores=") != std::string::npos;
    if (host_row || !device.matches(t.device_fingerprint)) continue;
    keep_served(t.family + "\n" + t.problem_key, t);
  }
  std::string host_fp;
  if (std::find_if(arches.begin(), arches.end(), [](const Arch& a) { return a.host; }) != arches.end() &&
      Runtime::host_available()) {
    host_fp = rt.host_fingerprint();
    for (const auto& t : tuning_rows)
      if (t.device_fingerprint == host_fp) keep_served("host\n" + t.family + "\n" + t.problem_key, t);
  }

  std::vector<std::string> arch_names;
  for (const auto& a : arches) arch_names.push_back(a.str());
  std::map<std::string, Binary> seen;  // family/arch/problem/config -> lookup result
  std::set<std::string> missing;       // the distinct binaries not found
  Json keys = Json::array();
  int rejected = 0, tuned = 0, untuned = 0, stale_tuned = 0, other_compiler = 0, total = 0;
  const std::string nvrtc_here = nvrtc_version_or_empty();  // what a warmup on this machine compiles with
  std::vector<std::string> lines;
  for (const autotune::WorkItem& item : autotune::make_plan(autotune::with_pow2_buckets(preset), arch_names)) {
    ++total;
    const Arch arch = Arch::parse(item.arch);
    Json k = Json::object();
    Json labels = Json::array();
    for (const auto& l : item.labels) labels.push(l);
    k.set("arch", item.arch).set("family", item.family).set("labels", std::move(labels));
    // A key the family refuses (its problem, or every config of it on this arch): named with the reason.
    const auto reject = [&](const std::string& problem, const Error& e) {
      ++rejected;
      k.set("problem", problem).set("error", e.what());
      lines.push_back(fmt::format("REJECTED {} {} {}: {}", item.arch, item.family, fmt::join(item.labels, ","),
                                  e.what()));
      keys.push(std::move(k));
    };
    std::string pk;
    try {
      pk = family(item.family).problem_from_json(item.problem_json);
    } catch (const Error& e) {
      reject(item.problem_json, e);
      continue;
    }
    const FamilyInfo& fam = family(item.family);
    std::vector<std::pair<std::string, int64_t>> buckets;
    for (const auto& b : item.buckets)
      buckets.emplace_back(b.dim == "batch" ? "b" : b.dim == "seq_len" ? "l" : b.dim == "tokens" ? "m" : b.dim,
                           b.value);
    const std::string tkey = tuning_key(pk, buckets);
    const auto lookup = [&](const std::string& config) -> const Binary& {
      const std::string id = fmt::format("{}/{}/{}/{}", item.family, item.arch, pk, config);
      auto it = seen.find(id);
      if (it == seen.end()) it = seen.emplace(id, find_binary(rt, fam, pk, config, arch)).first;
      if (!it->second.present) missing.insert(id);
      return it->second;
    };
    std::string def;
    try {
      def = fam.default_config(pk, arch);
    } catch (const Error& e) {  // the family runs no config of this problem on this arch (e.g. sm_70)
      reject(pk, e);
      continue;
    }
    const Binary& def_bin = lookup(def);
    k.set("key", tkey).set("default_config", def).set("default_binary", def_bin.present);
    if (!def_bin.present) k.set("default_binary_error", def_bin.detail);
    // The problem's shared module (split-KV combine, helpers): every config's launches may need it.
    bool shared_present = true;
    std::string shared_text;
    for (const std::string& shared : shared_module_configs(fam, pk, arch)) {
      const Binary& b = lookup(shared);
      shared_present = shared_present && b.present;
      k.set("shared_binary", b.present);
      if (!b.present) k.set("shared_binary_error", b.detail);
      shared_text = fmt::format(", {} {}", shared, b.present ? "present" : "MISSING");
    }

    const std::string row_key = (arch.host ? "host\n" : "") + item.family + "\n" + tkey;
    auto row = rows.find(row_key);
    std::string tuned_text = "no tuning row";
    bool complete = def_bin.present && shared_present;
    if (row != rows.end()) {
      ++tuned;
      const std::string& winner = row->second.winner_config;
      const Binary& tuned_bin = winner == def ? def_bin : lookup(winner);
      k.set("tuning_row", true).set("device", row->second.device_fingerprint).set("tuned_config", winner)
          .set("tuned_binary", tuned_bin.present);
      if (!tuned_bin.present) k.set("tuned_binary_error", tuned_bin.detail);
      tuned_text = fmt::format("tuned {} {}", winner, tuned_bin.present ? "present" : "MISSING");
      complete = complete && tuned_bin.present;
      if (!arch.host) {  // GPU rows: measured on which NVRTC's binaries (the runtime uses the winner either way)
        const std::string measured_with = autotune::read_tuning_entry(row->second).compiler_version;
        if (!measured_with.empty()) k.set("tuned_compiler_version", measured_with);
        if (autotune::tuned_by_another_compiler(measured_with, nvrtc_here)) {
          ++other_compiler;
          tuned_text += fmt::format(" (measured on NVRTC {} binaries; a warmup here, NVRTC {}, tunes it again)",
                                    measured_with, nvrtc_here);
        }
      }
    } else {
      ++untuned;
      k.set("tuning_row", false);
      auto stale = stale_rows.find(row_key);
      if (stale != stale_rows.end()) {
        ++stale_tuned;
        k.set("stale_tuning_version", stale->second.ktune_version);
        tuned_text = fmt::format("tuning row of ktune {} only (not used by ktune {})", stale->second.ktune_version,
                                 version());
      }
    }
    lines.push_back(fmt::format("{} {} {} {}: default {} {}{}; {}", complete ? "ok" : "MISSING", item.arch,
                                fmt::join(item.labels, ","), tkey, def, def_bin.present ? "present" : "MISSING",
                                shared_text, tuned_text));
    keys.push(std::move(k));
  }

  const int missing_binaries = static_cast<int>(missing.size());
  const std::string who = device.describe().empty() ? "no device given" : device.describe();
  if (args.has("json")) {
    fmt::print("{}\n", Json::object()
                           .set("preset", preset.name).set("cache", o.cache_path).set("device", who)
                           .set("host_fingerprint", host_fp).set("keys_total", total)
                           .set("missing_binaries", missing_binaries).set("rejected", rejected)
                           .set("tuned", tuned).set("untuned", untuned).set("stale_tuned", stale_tuned)
                           .set("other_compiler_tuned", other_compiler)
                           .set("complete", missing_binaries == 0 && rejected == 0)
                           .set("keys", std::move(keys))
                           .dump());
  } else {
    for (const auto& l : lines) fmt::print("{}\n", l);
    fmt::print("preset {}: {} keys on {}; {} binaries missing, {} ops rejected; tuning rows ({}): {} keys, {} "
               "without (those run the default; {} of them have only another ktune version's row); {} tuned on "
               "another NVRTC's binaries than this machine's\n",
               preset.name, total, fmt::join(arch_names, ","), missing_binaries, rejected, who, tuned, untuned,
               stale_tuned, other_compiler);
  }
  return missing_binaries == 0 && rejected == 0 ? 0 : 1;
}

}  // namespace ktune::cli
