// The C API's prepared ops: ktune_op_prepare / ktune_op_run / ktune_op_plan / ktune_op_free, over each family's
// FamilyInfo::prepare_c_op. ktune_op_run is the engine hot path: two header words compared, one virtual call.
#include <memory>
#include <string>

#include "ktune_internal/c_api.hpp"

using namespace ktune::capi;

extern "C" {

uint32_t ktune_family_id(const char* family) { return ktune::c_family_id(family); }

ktune_status ktune_op_prepare(ktune_runtime* runtime, const char* family, const char* problem, ktune_op** out) {
  if (!runtime) return invalid("ktune_op_prepare: runtime must not be NULL");
  if (!family) return invalid("ktune_op_prepare: family must not be NULL");
  if (!problem) return invalid("ktune_op_prepare: problem must not be NULL");
  if (!out) return invalid("ktune_op_prepare: out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    const ktune::FamilyInfo& f = ktune::family(family);
    if (!f.prepare_c_op)
      throw ktune::Error(ktune::Status::unsupported, f.name, "ktune_op_prepare: this family has no C op");
    const std::string text(problem);
    const size_t first = text.find_first_not_of(" \t\r\n");
    const bool json = first != std::string::npos && text[first] == '{';
    const std::string key = json ? f.problem_from_json(text) : f.canonical_problem(text);
    auto op = std::make_unique<ktune_op>();
    op->family = &f;
    op->family_id = ktune::c_family_id(f.name.c_str());
    op->op = f.prepare_c_op(runtime->rt, key);
    *out = op.release();
  });
}

namespace {

// The checks of a run's op and argument header, before anything changes (the thread's device included).
ktune_status check_run(const ktune_op* op, const void* args, const char* what) {
  if (!op) return invalid((std::string(what) + ": op must not be NULL").c_str());
  if (!args) return invalid((std::string(what) + ": args must not be NULL").c_str());
  return check_args_header(args, op->family->name.c_str(), op->family_id, op->family->c_args_size, what,
                           op->family->c_args_older_sizes);
}

}  // namespace

ktune_status ktune_op_run(const ktune_op* op, const void* args, void* stream) {
  if (ktune_status st = check_run(op, args, "ktune_op_run")) return st;
  return guarded([&] { op->op->run(args, stream); });
}

ktune_status ktune_op_run_on_device(const ktune_op* op, const void* args, void* stream, int device) {
  if (ktune_status st = check_run(op, args, "ktune_op_run_on_device")) return st;
  if (ktune_status st = ktune_ensure_device(device)) return st;
  return guarded([&] { op->op->run(args, stream); });
}

ktune_status ktune_op_plan(const ktune_op* op, const void* args, const char** plan_json) {
  if (!op) return invalid("ktune_op_plan: op must not be NULL");
  if (!args) return invalid("ktune_op_plan: args must not be NULL");
  if (!plan_json) return invalid("ktune_op_plan: plan_json must not be NULL");
  if (ktune_status st = check_args_header(args, op->family->name.c_str(), op->family_id, op->family->c_args_size,
                                           "ktune_op_plan", op->family->c_args_older_sizes))
    return st;
  static thread_local std::string result;
  return guarded([&] {
    result = op->op->plan_json(args);
    *plan_json = result.c_str();
  });
}

ktune_status ktune_op_set_pdl(ktune_op* op, int enable) {
  if (!op) return invalid("ktune_op_set_pdl: op must not be NULL");
  return guarded([&] { op->op->set_pdl(enable != 0); });
}

void ktune_op_free(ktune_op* op) { delete op; }

}  // extern "C"
