// --arch lists and the GPU the commands run on.
#pragma once

#include <string>
#include <vector>

#include "ktune/arch.hpp"

namespace ktune::cli {

// A comma-separated --arch list, each name checked up front: a well-formed name that is no GPU's compute
// capability (sm_91) is a UsageError like a malformed one (90a); "host" is one only when allow_host. A name
// that no runtime looks up (sm_90: a Hopper runtime loads sm_90a, arch_for_compute_capability) is kept with a
// warning on stderr, since binaries for it ship but never load on that GPU. Duplicates are dropped.
std::vector<Arch> parse_arch_option(const std::string& list, bool allow_host);

// Makes GPU 0 current on this thread when there is one; false without a GPU.
bool make_gpu_current();

}  // namespace ktune::cli
