// What every family's engine call (templates/<family>/launch.cpp) needs besides its own kernel: argument
// errors in one format ("<field>: expected <what>, got <value>", Error(invalid_argument) from the family), and
// the arch and limits of the device the calling thread's context runs on, queried once per device.
#pragma once

#include <cstddef>
#include <string>

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::launch_support {

[[noreturn]] void bad_arg(const char* family, const std::string& field, const std::string& expected,
                          const std::string& got);
// "0x7f..." or "null".
std::string ptr_text(const void* p);
// Non-null and `align`-byte aligned, else bad_arg naming `field`.
void need_device_ptr(const char* family, const void* p, const char* field, size_t align);

struct DeviceFacts {
  Arch arch;
  DeviceLimits limits;
  int ordinal = -1;
};
// The current context's device. Throws Error(cuda_error) without a current context (saying how to make one).
// After the first call per device and thread: no driver query beyond two cheap context reads.
const DeviceFacts& current_device(const char* family);

}  // namespace ktune::launch_support
