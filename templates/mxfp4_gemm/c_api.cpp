// The C API of mxfp4_gemm (ktune.h): its argument struct, the layout and prepack helpers, the GPU and host calls.
#include "ktune/ktune.h"

#include <algorithm>
#include <string>

#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "ktune_internal/c_api.hpp"
#include "mxfp4_gemm/family.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace {
using namespace ktune::capi;

// threads < 0: the GPU call on `stream`; else the host call on that many threads (0: all).
ktune_status mxfp4_call(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* a, void* stream,
                        bool grouped, const char* fn, int threads = -1) {
  static thread_local std::string msg;
  if (!runtime) return invalid((msg = std::string(fn) + ": runtime must not be NULL").c_str());
  if (!problem_key) return invalid((msg = std::string(fn) + ": problem_key must not be NULL").c_str());
  if (!a) return invalid((msg = std::string(fn) + ": args must not be NULL").c_str());
  if (ktune_status st = check_args_header(a, "mxfp4_gemm", sizeof(*a), fn)) return st;
  return guarded([&] {
    const ktune::mxfp4::Problem p = ktune::mxfp4::Problem::from_key(problem_key);
    if (p.grouped() != grouped)
      throw ktune::Error(ktune::Status::invalid_argument, "mxfp4_gemm",
                         std::string("problem_key: expected a ") + (grouped ? "grouped (num_experts > 1)" : "dense") +
                             " problem for " + fn + ", got '" + problem_key + "'");
    const ktune::Mxfp4GemmArgs d = ktune::mxfp4::args_from_c(p, ktune::read_c_args<ktune_mxfp4_args>(a));
    if (threads >= 0) ktune::mxfp4_gemm_host(runtime->rt, p, d, threads);
    else ktune::mxfp4_gemm(runtime->rt, p, d, stream);
  });
}

}  // namespace

extern "C" {

ktune_status ktune_mxfp4_unpack_host(const uint8_t* packed_weight, const uint8_t* packed_scales, int n, int k,
                                     int num_experts, uint8_t* w_packed, uint8_t* w_scale) {
  if (!packed_weight || !packed_scales || !w_packed || !w_scale)
    return invalid("ktune_mxfp4_unpack_host: packed_weight, packed_scales, w_packed and w_scale must not be NULL");
  return guarded([&] { ktune::mxfp4::unpack_host(packed_weight, packed_scales, n, k, num_experts, w_packed, w_scale); });
}


ktune_status ktune_mxfp4_args_init(ktune_mxfp4_args* args, size_t struct_size) {
  ktune_mxfp4_args defaults{};
  defaults.struct_size = sizeof(ktune_mxfp4_args);
  defaults.family_id = ktune::c_family_id("mxfp4_gemm");
  defaults.layout_version = ktune::mxfp4::packed_layout_version();
  return init_c_struct(args, struct_size, defaults, "ktune_mxfp4_args_init");
}

int ktune_mxfp4_layout_version(void) { return ktune::mxfp4::packed_layout_version(); }

ktune_status ktune_mxfp4_packed_bytes(int n, int k, int num_experts, int which, size_t* bytes) {
  if (!bytes) return invalid("ktune_mxfp4_packed_bytes: bytes must not be NULL");
  if (which != 0 && which != 1) return invalid("ktune_mxfp4_packed_bytes: which: expected 0 (weight) or 1 (scales)");
  return guarded([&] {
    *bytes = which == 0 ? ktune::mxfp4::packed_weight_bytes(n, k, num_experts)
                        : ktune::mxfp4::packed_scale_bytes(n, k, num_experts);
  });
}

ktune_status ktune_mxfp4_prepack_host(const uint8_t* w_packed, const uint8_t* w_scale, int n, int k, int num_experts,
                                      uint8_t* out_weight, uint8_t* out_scales) {
  return guarded([&] { ktune::mxfp4::prepack_host(w_packed, w_scale, n, k, num_experts, out_weight, out_scales); });
}

ktune_status ktune_mxfp4_gemm(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                              void* stream) {
  return mxfp4_call(runtime, problem_key, args, stream, false, "ktune_mxfp4_gemm");
}

ktune_status ktune_mxfp4_grouped_gemm(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                                      void* stream) {
  return mxfp4_call(runtime, problem_key, args, stream, true, "ktune_mxfp4_grouped_gemm");
}

ktune_status ktune_mxfp4_gemm_host(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                                   int threads) {
  return mxfp4_call(runtime, problem_key, args, nullptr, false, "ktune_mxfp4_gemm_host", std::max(threads, 0));
}

ktune_status ktune_mxfp4_grouped_gemm_host(ktune_runtime* runtime, const char* problem_key,
                                           const ktune_mxfp4_args* args, int threads) {
  return mxfp4_call(runtime, problem_key, args, nullptr, true, "ktune_mxfp4_grouped_gemm_host", std::max(threads, 0));
}

}  // extern "C"
