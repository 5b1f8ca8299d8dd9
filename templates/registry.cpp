// The families compiled into this build. Adding a family = its folder + one entry in kBuiltin below (explicit,
// so no static registration is silently dropped by a static link); register_family adds others at run time.
#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "templates/xqa_decode/family.hpp"
#include "templates/sparse_mla_decode/family.hpp"
#include "templates/mxfp4_gemm/family.hpp"

namespace ktune {
namespace {

FamilyInfo (*const kBuiltin[])() = {
    xqa::family_info,
    mla::family_info,
    mxfp4::family_info,
};

struct Registry {
  std::mutex mutex;
  std::vector<FamilyInfo> all;
  bool read = false;  // set by the first families()/family(): from then on `all` never changes
  Registry() {
    for (auto make : kBuiltin) all.push_back(make());
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

bool valid_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// What every entry must provide; the rest is optional (a family without a C op, a workload, presets rules).
void check_entry(const FamilyInfo& f) {
  const auto need = [&](bool ok, const char* what) {
    if (!ok)
      throw Error(Status::invalid_argument, "families",
                  fmt::format("register_family: {}: expected {} in its FamilyInfo", f.name, what));
  };
  if (!valid_name(f.name))
    throw Error(Status::invalid_argument, "families",
                fmt::format("register_family: name: expected [a-z0-9_]+, got '{}'", f.name));
  need(!f.problem_fields.empty(), "problem_fields");
  need(bool(f.problem_from_json), "problem_from_json");
  need(bool(f.canonical_problem), "canonical_problem");
  need(bool(f.default_config), "default_config");
  need(bool(f.search_space), "search_space");
  need(bool(f.generate), "generate");
  need(!f.prepare_c_op || f.c_args_size >= 8, "c_args_size (the C struct's size) with prepare_c_op");
  for (uint32_t older : f.c_args_older_sizes)
    need(older >= 8 && older < f.c_args_size, "c_args_older_sizes: each >= 8 and below c_args_size");
  need(f.tp_splits.empty() || std::find(f.tp_splits.begin(), f.tp_splits.end(), "none") != f.tp_splits.end(),
       "\"none\" among tp_splits");
}

}  // namespace

const std::vector<FamilyInfo>& families() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.read = true;
  return r.all;
}

const FamilyInfo& family(const std::string& name) {
  std::string known;
  for (const auto& f : families()) {
    if (f.name == name) return f;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  throw Error(Status::not_found, "families", fmt::format("unknown family '{}': expected one of {}", name, known));
}

std::vector<std::string> shared_module_configs(const FamilyInfo& f, const std::string& problem_key,
                                               const Arch& arch) {
  if (f.has_shared_module && f.has_shared_module(problem_key, arch)) return {kSharedConfig};
  return {};
}

void register_family(FamilyInfo info) {
  check_entry(info);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.read)
    throw Error(Status::internal, "families",
                fmt::format("register_family({}): the registry has been read already; register families before "
                            "anything calls families() or family() (a static initializer, or first in main)",
                            info.name));
  for (const auto& f : r.all)
    if (f.name == info.name)
      throw Error(Status::invalid_argument, "families",
                  fmt::format("register_family: name: '{}' is taken by another family", info.name));
  r.all.push_back(std::move(info));
}

}  // namespace ktune
