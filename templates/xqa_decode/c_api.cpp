// The C API of xqa_decode (ktune.h): its argument struct, the one-shot GPU and host calls, workspace and plan.
#include "ktune/ktune.h"

#include <string>
#include <vector>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/xqa_decode.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "c_op.hpp"
#include "ktune_internal/c_api.hpp"
#include "xqa_decode/family.hpp"

namespace {
using namespace ktune::capi;

const std::vector<uint32_t> kOlderSizes = {ktune::xqa::kCArgsSizeBeforeForms};

const ktune::xqa::Problem& xqa_problem(const char* key) {
  return ktune::problem_for_key<ktune::xqa::Problem>(key, [](const char* k) {
    ktune::xqa::Problem p = ktune::xqa::Problem::from_key(k);
    p.validate();
    return p;
  });
}

}  // namespace

extern "C" {

ktune_status ktune_xqa_args_init(ktune_xqa_args* a, size_t struct_size) {
  ktune::XqaDecodeArgs d;
  const ktune_xqa_args defaults{sizeof(ktune_xqa_args), ktune::c_family_id("xqa_decode"), d.q, d.kv_cache, d.block_tables, d.seq_lens, d.q_cu_seq_lens, d.mask, d.sinks, d.out, d.lse,
                      d.workspace, d.workspace_bytes, d.batch, d.num_tokens, d.q_len_per_req, d.max_pages_per_req,
                      d.num_pages, d.max_seq_len, d.softmax_scale, d.q_scale, d.k_scale, d.v_scale, d.o_scale,
                      d.softcap, d.window_left, d.config, d.num_splits, d.q_stride_token, d.q_stride_head,
                      d.out_stride_token, d.out_stride_head, d.k_cache, d.v_cache, d.kv_page_stride,
                      d.q_scale_ptr, d.k_scale_ptr, d.v_scale_ptr, d.o_scale_ptr};
  return init_c_struct(a, struct_size, defaults, "ktune_xqa_args_init", kOlderSizes);
}

ktune_status ktune_xqa_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key, int batch,
                                              int max_seq_len, size_t* bytes) {
  if (!runtime) return invalid("ktune_xqa_decode_workspace_bytes: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_workspace_bytes: problem_key must not be NULL");
  if (!bytes) return invalid("ktune_xqa_decode_workspace_bytes: bytes must not be NULL");
  return guarded([&] { *bytes = ktune::xqa_decode_workspace_bytes(runtime->rt, xqa_problem(problem_key), batch, max_seq_len); });
}

ktune_status ktune_xqa_decode(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* a, void* stream) {
  if (!runtime) return invalid("ktune_xqa_decode: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode: problem_key must not be NULL");
  if (!a) return invalid("ktune_xqa_decode: args must not be NULL");
  if (ktune_status st = check_args_header(a, "xqa_decode", sizeof(*a), "ktune_xqa_decode", kOlderSizes)) return st;
  return guarded([&] {
    const ktune::xqa::Problem& p = xqa_problem(problem_key);
    ktune::xqa_decode(runtime->rt, p, ktune::xqa::args_from_c(p, ktune::read_c_args<ktune_xqa_args>(a)), stream);
  });
}

ktune_status ktune_xqa_decode_workspace_bytes_ex(ktune_runtime* runtime, const char* problem_key, int batch,
                                                 int max_seq_len, const char* config, int num_splits, size_t* bytes) {
  if (!runtime) return invalid("ktune_xqa_decode_workspace_bytes_ex: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_workspace_bytes_ex: problem_key must not be NULL");
  if (!bytes) return invalid("ktune_xqa_decode_workspace_bytes_ex: bytes must not be NULL");
  return guarded([&] {
    *bytes = ktune::xqa_decode_workspace_bytes(runtime->rt, xqa_problem(problem_key), batch, max_seq_len, config,
                                               num_splits);
  });
}

ktune_status ktune_xqa_decode_host(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* a,
                                   int threads) {
  if (!runtime) return invalid("ktune_xqa_decode_host: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_host: problem_key must not be NULL");
  if (!a) return invalid("ktune_xqa_decode_host: args must not be NULL");
  if (ktune_status st = check_args_header(a, "xqa_decode", sizeof(*a), "ktune_xqa_decode_host", kOlderSizes))
    return st;
  return guarded([&] {
    const ktune::xqa::Problem& p = xqa_problem(problem_key);
    ktune::xqa_decode_host(runtime->rt, p, ktune::xqa::args_from_c(p, ktune::read_c_args<ktune_xqa_args>(a)), threads);
  });
}

ktune_status ktune_xqa_decode_plan(ktune_runtime* runtime, const char* problem_key, int batch, int max_seq_len,
                                   const char* config, int num_splits, int host, int threads, const char** plan_json) {
  if (!runtime) return invalid("ktune_xqa_decode_plan: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_plan: problem_key must not be NULL");
  if (!plan_json) return invalid("ktune_xqa_decode_plan: plan_json must not be NULL");
  static thread_local std::string result;
  return guarded([&] {
    ktune::cache::Json j = ktune::cache::Json::object();
    if (host) {
      ktune::XqaHostPlan p = ktune::xqa_decode_host_plan(runtime->rt, xqa_problem(problem_key), batch, max_seq_len,
                                                         threads, config, num_splits);
      j.set("config", p.config).set("source", p.source).set("num_splits", p.num_splits)
          .set("workspace_bytes", static_cast<int64_t>(p.workspace_bytes)).set("threads", p.threads);
    } else {
      j = ktune::plan_json(
          ktune::xqa_decode_plan(runtime->rt, xqa_problem(problem_key), batch, max_seq_len, config, num_splits));
    }
    result = j.dump();
    *plan_json = result.c_str();
  });
}


}  // extern "C"
