// A family's prepared op behind the C API (ktune_op_prepare / ktune_op_run): the C argument struct converted to
// the family's Args, then Op<Family>::run. Each family supplies the conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <string>
#include <utility>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/op.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/c_api.hpp"

namespace ktune {

// {"config","source","num_splits","workspace_bytes","tuning_key"}: the plan as the C API and bindings read it.
inline cache::Json plan_json(const LaunchPlan& p) {
  cache::Json j = cache::Json::object();
  j.set("config", p.config).set("source", p.source).set("num_splits", p.num_splits)
      .set("workspace_bytes", static_cast<int64_t>(p.workspace_bytes)).set("tuning_key", p.tuning_key);
  return j;
}

// The problem of a C caller's key, parsed once per thread and key (the hot path of a C caller is then a string
// compare). `parse` turns a key into a validated problem or throws. Every key, the empty one too, is parsed the
// first time it is seen on a thread: nothing stands for a default problem.
template <class Problem, class Parse>
const Problem& problem_for_key(const char* key, Parse parse) {
  thread_local bool filled = false;
  thread_local std::string last_key;
  thread_local Problem last;
  if (!filled || last_key != key) {
    filled = false;  // stays false if parse throws
    last = parse(key);
    last_key = key;
    filled = true;
  }
  return last;
}

template <class Family, class CArgs>
class FamilyCOp final : public COp {
 public:
  using Problem = typename Family::Problem;
  using ToArgs = typename Family::Args (*)(const Problem&, const CArgs&);

  FamilyCOp(Op<Family> op, ToArgs to_args) : op_(std::move(op)), to_args_(to_args) {}

  void run(const void* c_args, void* stream) const override {
    op_.run(to_args_(op_.problem(), read_c_args<CArgs>(c_args)), stream);
  }
  std::string plan_json(const void* c_args) const override {
    // On a host thread ktune_op_run is the host call, which plans per call: a GPU plan would not describe it.
    if (host_device_current())
      throw Error(Status::unsupported, Family::kName,
                  "plan: this thread's device is the host CPU, and ktune_op_plan describes the op's GPU launches (the "
                  "host call plans per call: the family's *_host_plan)");
    return ktune::plan_json(op_.plan(to_args_(op_.problem(), read_c_args<CArgs>(c_args)))).dump();
  }
  void set_pdl(bool enable) const override { op_.set_pdl(enable); }
  const Op<Family>& op() const { return op_; }

 private:
  Op<Family> op_;
  ToArgs to_args_;
};

template <class Family, class CArgs>
std::unique_ptr<COp> make_c_op(Runtime& rt, const typename Family::Problem& problem,
                               typename FamilyCOp<Family, CArgs>::ToArgs to_args) {
  return std::make_unique<FamilyCOp<Family, CArgs>>(Op<Family>::prepare(rt, problem), to_args);
}

}  // namespace ktune
