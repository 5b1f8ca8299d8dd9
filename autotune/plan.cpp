#include "autotune/plan.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "autotune/preset_schema.hpp"
#include "autotune/tuning_record.hpp"
#include "ktune/arch.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"

namespace ktune::autotune {
namespace {

std::vector<std::string> normalized_arches(const std::vector<std::string>& arches) {
  if (arches.empty()) throw Error(Status::invalid_argument, "plan", "arches: expected at least one arch, got none");
  std::vector<std::string> out;
  for (size_t i = 0; i < arches.size(); ++i) {
    std::string norm;
    try {
      norm = Arch::parse(arches[i]).str();
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, "plan", fmt::format("arches[{}]: {}", i, e.what()));
    }
    if (std::find(out.begin(), out.end(), norm) == out.end()) out.push_back(norm);
  }
  return out;
}

// The GEMM rows per step of `batch` requests of spec_tokens + 1 tokens each, as the launch buckets them: the
// power of two at or above. A bucket past 2^30 is an error (no int bucket holds the next power of two).
int tokens_bucket(int batch, int spec_tokens, const char* bound) {
  const int64_t tokens = int64_t{batch} * (int64_t{spec_tokens} + 1);
  const int64_t bucket = bucket_pow2_ceil(tokens);
  if (bucket > (int64_t{1} << 30))
    throw Error(Status::invalid_argument, "plan",
                fmt::format("buckets.batch.{} x (spec_tokens + 1) = {} x {}: expected GEMM rows per step up to 2^30",
                            bound, batch, spec_tokens + 1));
  return static_cast<int>(bucket);
}

// Every combination of the specs' bucket values, the first spec outermost.
std::vector<std::vector<BucketValue>> combinations(const std::vector<BucketSpec>& specs) {
  std::vector<std::vector<BucketValue>> out{{}};
  for (const auto& spec : specs) {
    std::vector<std::vector<BucketValue>> next;
    for (const auto& prefix : out)
      for (int v : bucket_values(spec)) {
        next.push_back(prefix);
        next.back().push_back({spec.dim, v});
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<BucketSpec> op_bucket_specs(const Preset& preset, const PresetOp& op) {
  const FamilyInfo* family = detail::find_family(op.family);
  if (!family)
    throw Error(Status::invalid_argument, "plan",
                fmt::format("op {}: family: expected one of {}, got \"{}\"", op.label, detail::known_families(), op.family));
  std::vector<BucketSpec> specs;
  for (const std::string& d : family->tuning_dims) {
    if (d == "batch") specs.push_back(preset.batch);
    else if (d == "seq_len") specs.push_back(preset.seq_len);
    else if (d == "tokens")
      specs.push_back({"tokens", tokens_bucket(preset.batch.min, preset.spec_tokens, "min"),
                       tokens_bucket(preset.batch.max, preset.spec_tokens, "max")});
    else
      throw Error(Status::internal, "plan",
                  fmt::format("family {}: tuning_dims: expected batch, seq_len or tokens, got \"{}\"", family->name, d));
  }
  return specs;
}

// Whether `op` is tuned for `arch`: no list, or a listed arch of the same GPU. An arch in a list names a GPU, so
// its variant does not matter ("sm_90" and "sm_90a" are the same H100), while a warmup's arch is the variant
// compiled for.
bool op_runs_on(const PresetOp& op, const std::string& arch) {
  if (op.arches.empty()) return true;
  const Arch a = Arch::parse(arch);
  for (const std::string& listed : op.arches) {
    const Arch l = Arch::parse(listed);
    if (l.host == a.host && l.major == a.major && l.minor == a.minor) return true;
  }
  return false;
}

std::vector<WorkItem> make_plan(const Preset& preset, const std::vector<std::string>& arches) {
  std::vector<WorkItem> items;
  std::unordered_map<std::string, size_t> index;
  for (const std::string& arch : normalized_arches(arches)) {
    for (const PresetOp& op : preset.ops) {
      if (!op_runs_on(op, arch)) continue;
      for (auto& buckets : combinations(op_bucket_specs(preset, op))) {
        std::string key = fmt::format("{}/{}/{}", arch, op.family, tuning_problem_key(op.problem_json, buckets));
        auto [it, inserted] = index.emplace(key, items.size());
        if (!inserted) {
          auto& labels = items[it->second].labels;
          if (std::find(labels.begin(), labels.end(), op.label) == labels.end()) labels.push_back(op.label);
          continue;
        }
        items.push_back(WorkItem{arch, op.family, op.problem_json, std::move(buckets), {op.label}, std::move(key)});
      }
    }
  }
  return items;
}

int64_t item_kv_tokens(const WorkItem& item) {
  int64_t batch = 1, seq = 1;
  for (const auto& b : item.buckets) {
    if (b.dim == "batch") batch = b.value;
    if (b.dim == "seq_len") seq = b.value;
  }
  const FamilyInfo* family = detail::find_family(item.family);
  if (family && family->work_tokens) return family->work_tokens(item.problem_json, short_buckets(item.buckets));
  return batch * seq;
}

}  // namespace ktune::autotune
