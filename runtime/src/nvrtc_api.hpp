// NVRTC loaded with dlopen: a container holding only the driver and a shipped cache runs every cached kernel
// without it. Compiling needs it; a cache miss without NVRTC is a clear error.
#pragma once

#include <nvrtc.h>

#include <string>

namespace ktune::detail {

struct NvrtcApi {
#define KTUNE_NVRTC_FUNCTIONS(X)                                                                    \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)                \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize)        \
  X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName) \
  X(nvrtcGetSupportedArchs) X(nvrtcGetNumSupportedArchs)

#define KTUNE_DECLARE(name) decltype(&::name) name = nullptr;
  KTUNE_NVRTC_FUNCTIONS(KTUNE_DECLARE)
#undef KTUNE_DECLARE

  std::string library_path;
  std::string version;  // "13.0.88": major.minor from nvrtcVersion, build from the compiler banner
};

// Process-wide NVRTC, loaded on first use. Search order: $KTUNE_NVRTC, libnvrtc.so.13 / libnvrtc.so on the
// loader path, $CUDA_HOME/lib64, /usr/local/cuda/lib64. Throws Error(no_compiler) naming where it looked.
const NvrtcApi& nvrtc();
const NvrtcApi* try_nvrtc(std::string* why_not = nullptr);
// Whether NVRTC `version` ("13.0.88", or just "12.4") takes --minimal (added in 12.4), which leaves the
// texture, device-runtime and driver-type declarations out of NVRTC's built-in prelude.
bool nvrtc_takes_minimal(const std::string& version);
// True in a process forked from one that had loaded NVRTC (where CUDA can no longer be initialised).
bool forked_after_nvrtc();

}  // namespace ktune::detail
