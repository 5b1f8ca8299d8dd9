// A warmup plan: every (arch, family, problem, buckets) a preset needs, in a fixed order, each once.
//
// Pure: nothing is compiled, timed or looked up here. item_key is stable across runs and processes, so a
// warmup that stops half way can be resumed; the caller decides what is done (a row in the tuning table for
// the item's tuning key on this device) and skips it.
#pragma once

#include <string>
#include <vector>

#include "autotune/buckets.hpp"
#include "autotune/presets.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

struct WorkItem {
  std::string arch;                  // normalized, "sm_90a"
  std::string family;                // "xqa_decode"
  std::string problem_json;          // PresetOp::problem_json (per GPU, canonical member order)
  std::vector<BucketValue> buckets;  // one per bucketed dim of the family, e.g. {batch 64}, {seq_len 4096}
  std::vector<std::string> labels;   // the preset ops this item serves ("attn.full", ...)
  // "<arch>/<family>/<problem_json>|<buckets>", e.g.
  // sm_90a/xqa_decode/{"head_dim":128,...}|b64.l4096 (buckets as in tuning_problem_key).
  std::string item_key;
};

// The bucketed dimensions of an op and their ranges: batch and seq_len from the preset; tokens (GEMM rows per
// step) = batch * (spec_tokens + 1).
KTUNE_API std::vector<BucketSpec> op_bucket_specs(const Preset& preset, const PresetOp& op);

// Items ordered by arch (as given, duplicates dropped), then op (preset order), then buckets (ascending, the
// first dim outermost). Ops limited to other arches are left out for an arch. Items with equal keys (identical
// problems under different labels) appear once, with every label. Throws Error(invalid_argument, "plan") for
// an empty arch list or a name Arch::parse rejects.
KTUNE_API std::vector<WorkItem> make_plan(const Preset& preset, const std::vector<std::string>& arches);

// KV tokens one call of a work item attends to, summed over its requests: the family's work_tokens
// (FamilyInfo; batch x seq_len unless the family says otherwise, e.g. a top-k bounded one). What the host cap
// (WarmupOptions::host_max_total_tokens) bounds.
KTUNE_API int64_t item_kv_tokens(const WorkItem& item);

}  // namespace ktune::autotune
