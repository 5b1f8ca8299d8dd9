#include "ktune/error.hpp"

namespace ktune {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid_argument";
    case Status::not_found: return "not_found";
    case Status::compile_error: return "compile_error";
    case Status::cuda_error: return "cuda_error";
    case Status::cache_error: return "cache_error";
    case Status::jit_disabled: return "jit_disabled";
    case Status::no_driver: return "no_driver";
    case Status::no_compiler: return "no_compiler";
    case Status::unsupported: return "unsupported";
    case Status::internal: return "internal";
  }
  return "unknown";
}

}  // namespace ktune
