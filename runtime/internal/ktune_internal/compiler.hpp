// Whether this process can compile CUDA kernels, without the NVRTC table.
#pragma once

#include <string>

namespace ktune::internal {

// True when NVRTC loads; otherwise *why_not (if given) says where it was looked for.
bool nvrtc_loadable(std::string* why_not = nullptr);

}  // namespace ktune::internal
