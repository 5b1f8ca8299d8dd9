// A family's prepared op behind the C API (ktune_op_prepare / ktune_op_run): the C argument struct converted to
// the family's Args, then Op<Family>::run. Each family supplies the conversion and the JSON of its plan.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "ktune/cache/json.hpp"
#include "ktune/family.hpp"
#include "ktune/op.hpp"

namespace ktune {

template <class Family, class CArgs>
class FamilyCOp final : public COp {
 public:
  using Problem = typename Family::Problem;
  using ToArgs = typename Family::Args (*)(const Problem&, const CArgs&);
  using PlanJson = cache::Json (*)(const typename Family::Plan&);

  FamilyCOp(Op<Family> op, ToArgs to_args, PlanJson plan_json)
      : op_(std::move(op)), to_args_(to_args), plan_json_(plan_json) {}

  void run(const void* c_args, void* stream) const override {
    op_.run(to_args_(op_.problem(), *static_cast<const CArgs*>(c_args)), stream);
  }
  std::string plan_json(const void* c_args) const override {
    return plan_json_(op_.plan(to_args_(op_.problem(), *static_cast<const CArgs*>(c_args)))).dump();
  }

 private:
  Op<Family> op_;
  ToArgs to_args_;
  PlanJson plan_json_;
};

template <class Family, class CArgs>
std::unique_ptr<COp> make_c_op(Runtime& rt, const typename Family::Problem& problem,
                               typename FamilyCOp<Family, CArgs>::ToArgs to_args,
                               typename FamilyCOp<Family, CArgs>::PlanJson plan_json) {
  return std::make_unique<FamilyCOp<Family, CArgs>>(Op<Family>::prepare(rt, problem), to_args, plan_json);
}

}  // namespace ktune
