// What the C API's translation units share (runtime/src/c_api*.cpp, autotune/c_api_warmup.cpp): the runtime
// handle, and exceptions turned into status codes plus the thread's last error message.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
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


namespace ktune {

// A C struct that begins with struct_size, as this library reads it, after check_struct_size took the caller's
// size: an older, shorter struct is copied with its missing tail zero (a field added at the end means "as
// before" when zero, ktune.h), a newer, longer one up to this library's fields (the rest was checked to be zero).
template <class CStruct>
CStruct read_c_args(const void* c_struct) {
  static_assert(std::is_trivially_copyable_v<CStruct>, "C structs are plain data");
  CStruct full;
  std::memset(&full, 0, sizeof full);
  uint32_t size = 0;
  std::memcpy(&size, c_struct, sizeof size);
  std::memcpy(&full, c_struct, size < sizeof full ? size : sizeof full);
  full.struct_size = sizeof full;
  return full;
}

}  // namespace ktune

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

// The sizes a C struct that begins with struct_size may have. Structs grow at their end, and a field added means
// "as before" when zero, so a caller's struct is taken at this library's size, at one of the older sizes it
// had (read with the missing tail zero), or longer (a caller built against a newer header) as long as the bytes
// this library does not know are all zero; a newer field that is set is refused rather than ignored. A size
// past kMaxStructBytes is not a ktune struct (an uninitialized struct_size): refused before anything past the
// header is read.
constexpr uint32_t kMaxStructBytes = 4096;

// Whether this library takes a caller's struct_size: its own struct's size, an older form's, or a newer, longer
// struct of whole 8-byte units up to kMaxStructBytes.
inline bool size_taken(size_t struct_size, uint32_t size, const std::vector<uint32_t>& older_sizes) {
  if (struct_size == size) return true;
  for (uint32_t o : older_sizes)
    if (struct_size == o) return true;
  return struct_size > size && struct_size <= kMaxStructBytes && struct_size % 8 == 0;
}

// The sizes size_taken takes, for messages: "one of 256, 168 (...) or a newer, longer struct ...".
inline std::string sizes_taken(uint32_t size, const std::vector<uint32_t>& older_sizes) {
  std::string s = "one of " + std::to_string(size);
  for (uint32_t o : older_sizes) s += ", " + std::to_string(o);
  return s + " (the sizes of this library's struct and its older forms) or a newer, longer struct of whole 8-byte " +
         "units up to " + std::to_string(kMaxStructBytes) + " bytes";
}

// Checks the struct_size a caller stamped on `p` (`what`: "args", "request"; names the struct's *_default), and
// that the bytes of a longer struct past this library's fields are zero.
inline ktune_status check_struct_size(const void* p, uint32_t struct_size, uint32_t size,
                                      const std::vector<uint32_t>& older_sizes, const char* fn, const char* what,
                                      const char* default_fn) {
  static thread_local std::string msg;
  if (!size_taken(struct_size, size, older_sizes))
    return invalid((msg = std::string(fn) + ": " + what + ".struct_size: expected " +
                          sizes_taken(size, older_sizes) + "; start it from " + default_fn + ", got " +
                          std::to_string(struct_size))
                       .c_str());
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (uint32_t i = size; i < struct_size; ++i)
    if (bytes[i] != 0)
      return invalid((msg = std::string(fn) + ": " + what + ": byte " + std::to_string(i) + " of a " +
                            std::to_string(struct_size) + "-byte struct is set, in a field of a newer ktune that " +
                            "this library (" + ktune::version() + ", " + std::to_string(size) +
                            " bytes) does not know; it would be ignored")
                         .c_str());
  return KTUNE_OK;
}

// Every growable C struct begins with {struct_size, family_id} (set by its *_default; `what` names it in
// messages: "args", "request"). A struct of another family, or of a size check_struct_size refuses, is refused
// before any byte past the header is read.
inline ktune_status check_args_header(const void* args, const char* family, uint32_t id, uint32_t size,
                                      const char* fn, const std::vector<uint32_t>& older_sizes = {},
                                      const char* what = "args", const char* default_fn = "its *_args_default") {
  uint32_t header[2];
  std::memcpy(header, args, sizeof(header));
  static thread_local std::string msg;
  if (header[1] != id)
    return invalid((msg = std::string(fn) + ": " + what + ".family_id: expected " + std::to_string(id) + " (" +
                          family + "; start the struct from " + default_fn + "), got " + std::to_string(header[1]))
                       .c_str());
  return check_struct_size(args, header[0], size, older_sizes, fn, what, default_fn);
}
inline ktune_status check_args_header(const void* args, const char* family, uint32_t size, const char* fn,
                                      const std::vector<uint32_t>& older_sizes = {}) {
  return check_args_header(args, family, ktune::c_family_id(family), size, fn, older_sizes);
}

// A *_init(s, struct_size) call (what the header's *_default macros expand to, with the caller's own sizeof):
// fills the caller's struct of `struct_size` bytes from this library's defaults `d`. A shorter struct (an older
// header) gets only its own fields, a longer one (a newer header) its unknown tail zero ("as before"), and the
// struct is stamped with the caller's size, so the calls taking it read exactly the caller's struct.
template <class CStruct>
ktune_status init_c_struct(CStruct* s, size_t struct_size, const CStruct& d, const char* fn,
                           const std::vector<uint32_t>& older_sizes = {}) {
  static_assert(std::is_trivially_copyable_v<CStruct>, "C structs are plain data");
  static_assert(sizeof(CStruct) % 8 == 0, "growable C structs come in whole 8-byte units (ktune.h)");
  static thread_local std::string msg;
  if (!s) return invalid((msg = std::string(fn) + ": the struct must not be NULL").c_str());
  const uint32_t size = sizeof(CStruct);
  if (!size_taken(struct_size, size, older_sizes))
    return invalid((msg = std::string(fn) + ": struct_size: expected " + sizes_taken(size, older_sizes) + ", got " +
                          std::to_string(struct_size))
                       .c_str());
  auto* bytes = reinterpret_cast<unsigned char*>(s);
  std::memcpy(bytes, &d, struct_size < size ? struct_size : size);
  if (struct_size > size) std::memset(bytes + size, 0, struct_size - size);
  const uint32_t stamp = static_cast<uint32_t>(struct_size);
  std::memcpy(bytes, &stamp, sizeof stamp);  // struct_size is every such struct's first field
  return KTUNE_OK;
}

}  // namespace ktune::capi
