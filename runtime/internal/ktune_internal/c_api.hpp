// What the C API's translation units share (runtime/src/c_api*.cpp, autotune/c_api_warmup.cpp): the runtime
// handle, and exceptions turned into status codes plus the thread's last error message.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/runtime.hpp"

struct ktune_runtime {
  ktune::Runtime rt;
  explicit ktune_runtime(ktune::RuntimeOptions o) : rt(std::move(o)) {}
};

// A prepared op (ktune_op_prepare); a family's own C entry points that take one reach its Op through `op`.
struct ktune_op {
  const ktune::FamilyInfo* family = nullptr;
  uint32_t family_id = 0;
  std::unique_ptr<ktune::COp> op;
};


namespace ktune::capi {

inline thread_local std::string last_error;

template <class F>
ktune_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return KTUNE_OK;
  } catch (const ktune::Error& e) {
    last_error = e.what();
    return static_cast<ktune_status>(e.status());
  } catch (const std::bad_alloc&) {
    last_error = "ktune: out of host memory";
    return KTUNE_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    last_error = std::string("ktune internal: ") + e.what();
    return KTUNE_ERROR_INTERNAL;
  } catch (...) {
    last_error = "ktune internal: unknown exception";
    return KTUNE_ERROR_INTERNAL;
  }
}

inline ktune_status invalid(const char* what) {
  last_error = std::string("ktune api: ") + what;
  return KTUNE_ERROR_INVALID_ARGUMENT;
}

// Every C argument struct begins with {struct_size, family_id} (set by its *_args_default). A struct of another
// family or of a size this library does not know (neither `size` nor one of the older sizes) is refused before
// any field is read.
inline ktune_status check_args_header(const void* args, const char* family, uint32_t id, uint32_t size,
                                      const char* fn, const std::vector<uint32_t>& older_sizes = {}) {
  uint32_t header[2];
  std::memcpy(header, args, sizeof(header));
  static thread_local std::string msg;
  if (header[1] != id)
    return invalid((msg = std::string(fn) + ": args.family_id: expected " + std::to_string(id) + " (" + family +
                          "; start the struct from its *_args_default), got " + std::to_string(header[1]))
                       .c_str());
  if (header[0] == size) return KTUNE_OK;
  for (uint32_t s : older_sizes)
    if (header[0] == s) return KTUNE_OK;
  std::string older;
  for (uint32_t s : older_sizes) older += " or " + std::to_string(s);
  return invalid((msg = std::string(fn) + ": args.struct_size: expected " + std::to_string(size) + " (sizeof the " +
                        family + " argument struct of this library)" + older + ", got " + std::to_string(header[0]))
                     .c_str());
}
inline ktune_status check_args_header(const void* args, const char* family, uint32_t size, const char* fn,
                                      const std::vector<uint32_t>& older_sizes = {}) {
  return check_args_header(args, family, ktune::c_family_id(family), size, fn, older_sizes);
}


}  // namespace ktune::capi
