// One error type for the C++ API; the C API turns it into a status code plus ktune_last_error().
#pragma once

#include <stdexcept>
#include <string>

#include "ktune/export.hpp"

namespace ktune {

enum class Status : int {
  ok = 0,
  invalid_argument = 1,   // a problem/argument field is wrong; the message names the field
  not_found = 2,          // unknown family, preset, cache entry, ...
  compile_error = 3,      // NVRTC (or LLVM) rejected generated source; message carries the log
  cuda_error = 4,         // a driver call failed
  cache_error = 5,        // SQLite or integrity failure
  jit_disabled = 6,       // a compile was needed but KTUNE_JIT=0
  no_driver = 7,          // libcuda.so.1 could not be loaded or no device
  no_compiler = 8,        // NVRTC could not be loaded
  unsupported = 9,        // valid input this build/arch cannot run
  internal = 10,
};

KTUNE_API const char* status_name(Status s);

class KTUNE_API Error : public std::runtime_error {
 public:
  Error(Status status, std::string subsystem, const std::string& message)
      : std::runtime_error("ktune " + subsystem + ": " + message),
        status_(status),
        subsystem_(std::move(subsystem)) {}
  Status status() const { return status_; }
  const std::string& subsystem() const { return subsystem_; }

 private:
  Status status_;
  std::string subsystem_;
};

// Thrown for a compile failure: carries the compiler log, the options and the readable kernel name.
class KTUNE_API CompileError : public Error {
 public:
  CompileError(std::string kernel_name, std::string log, std::string options, const std::string& message)
      : Error(Status::compile_error, "compiler", message),
        kernel_name_(std::move(kernel_name)),
        log_(std::move(log)),
        options_(std::move(options)) {}
  const std::string& kernel_name() const { return kernel_name_; }
  const std::string& log() const { return log_; }
  const std::string& options() const { return options_; }

 private:
  std::string kernel_name_, log_, options_;
};

}  // namespace ktune
