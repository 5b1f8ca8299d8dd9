// Prepared ops: the engine-facing form of every kernel family.
//
//   auto op = ktune::xqa::prepare(rt, problem);   // validates the static problem once
//   op.run(args, stream);                          // checks only the run-time arguments, then launches
//
// prepare() keeps what every call needs: the problem and its key, the device facts, and a plan memo keyed by
// plain integers (the context, the family's shape -- e.g. batch and the max_seq_len bucket -- and any forced
// config or split count) that holds the chosen config, split count, workspace size and the loaded module. The
// steady state of run() is one context read, one hash lookup and the launch: no string is built, no SQLite
// row read, no compiler touched. A plan resolved before the tuner stored a new winner is resolved again.
//
// An Op is a cheap handle (copies share state), safe to call from many threads at once, and refers to the
// Runtime it was prepared on, which must outlive it. The family's one-shot call (xqa_decode(rt, problem, ...))
// is the same pipeline through an op the runtime keeps per problem.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ktune/export.hpp"
#include "ktune/runtime.hpp"

namespace ktune {

namespace detail {
template <class Family>
struct OpState;  // templates/pipeline.hpp
}

// What a call will launch: the same fields for every family (families without split-KV always plan 1 split
// and no workspace).
struct KTUNE_API LaunchPlan {
  std::string config;          // the config key used
  std::string source;          // "forced", "tuned" or "default"
  int num_splits = 1;
  size_t workspace_bytes = 0;  // 0 when num_splits == 1
  std::string tuning_key;      // the key the tuned config was looked up under
};

// Family: a tag type naming the family's Problem, Args (run-time arguments), Plan (what a call runs) and kName, e.g.
// XqaDecodeFamily in ktune/xqa_decode.hpp.
template <class Family>
class Op {
 public:
  using Problem = typename Family::Problem;
  using Args = typename Family::Args;
  using Plan = typename Family::Plan;

  Op() = default;  // empty: run() and plan() throw Error(invalid_argument)

  // Validates `problem` (Error(invalid_argument) naming the field). Needs no GPU.
  static Op prepare(Runtime& rt, const Problem& problem);

  // Enqueues the family's kernel(s) on `stream` (a CUstream; nullptr = the legacy default stream). No
  // device->host read, allocation or synchronization: capturable in a CUDA graph once a call of its shape has
  // run outside the capture (that call loads the modules; plan() alone loads none). On a thread where
  // use_device(kHostDevice) is current it is the family's host call (host pointers, synchronous).
  void run(const Args& args, void* stream) const;

  // Programmatic dependent launch for this op's launches from now on (every copy of the handle): on sm_90+ a
  // launch may be scheduled while the kernel before it on the stream is still finishing, overlapping its
  // prologue with that kernel's tail; the kernels wait (griddepcontrol.wait) before touching memory, so results
  // are unchanged. Off by default. Error(unsupported) for a family whose kernels do not wait (enable only).
  void set_pdl(bool enable) const;

  // What run(args) would launch on a GPU. Reads only the shape fields of `args` (the family's header says which)
  // and its forced config / split count; needs a current context unless both are forced. On a thread where
  // use_device(kHostDevice) is current it still describes the GPU launches (the free *_plan and *_workspace_bytes
  // functions are built on it), not the host call, which plans per call (the family's *_host_plan);
  // ktune_op_plan refuses there instead.
  Plan plan(const Args& args) const;

  // The problem's shared module on the current context (FamilyInfo::has_shared_module: the kernels no tile
  // config changes, such as the split-KV combine and the family's helper kernels), loaded once per context (from
  // the cache, or compiled when JIT is allowed) and then held by the op (one lookup per call). Every warmup and
  // `ktune compile` of the problem compiles it. Error(unsupported) for a family without one.
  const LoadedKernel& shared_module() const;

  const Problem& problem() const;
  const std::string& problem_key() const;  // canonical key, without the checked flag
  explicit operator bool() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::OpState<Family>> state_;
};

}  // namespace ktune
