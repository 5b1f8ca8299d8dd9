// What every family's tuning workloads (templates/<family>/workload*.cpp) do alike: read the tuning key's
// buckets, make random values of a dtype, tile a small random pool over large buffers, and decide how many
// rotating copies of the inputs a GPU or host workload keeps so that back-to-back calls read memory, not cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune_internal/gpu.hpp"

namespace ktune::autotune::workload_support {

// The buckets of a tuning key by name. A name outside `dims` is Error(invalid_argument, who), saying what the
// family tunes (`tunes`, e.g. "xqa_decode tunes b = batch and l = seq_len").
std::map<std::string, int64_t> read_buckets(const TuningBuckets& buckets, const char* who,
                                            const std::vector<std::string>& dims, const char* tunes);

// `count` values drawn from N(0, 1) and stored as `dtype` (ktune_common::DType: bf16, fp16, e4m3 or fp32); one
// that rounds to zero in the dtype is stored as 0.5 with its sign (inputs are never zero). Reproducible for a
// seed, whatever the machine's threads.
std::vector<unsigned char> random_values(int dtype, size_t count, uint64_t seed);

// Covers [0, bytes) of a destination with pieces of `pool`: piece i starts at a pool offset that moves with i and
// `salt`, a multiple of `granule` (an element, a 16-byte word or a whole cache row: whatever the destination
// must hold whole), and is at most half the pool long (rounded down to granules), so neighbouring pieces and
// copies differ. write(destination offset, source, bytes) stores one piece. The pool holds at least 2 granules.
void tile_pool(size_t bytes, const std::vector<unsigned char>& pool, size_t granule, uint64_t salt,
               const std::function<void(size_t offset, const unsigned char* src, size_t n)>& write);
// The same into host memory at dst.
void tile_pool(unsigned char* dst, size_t bytes, const std::vector<unsigned char>& pool, size_t granule, uint64_t salt);

// Device memory of `bytes` on the current context, filled with pieces of `pool` (tile_pool). `what` names the
// allocation in an error.
internal::DeviceBuffer device_tiled(size_t bytes, const std::vector<unsigned char>& pool, size_t granule,
                                    uint64_t salt, const char* what);

// Device memory on the current context holding a copy of `host`.
template <class T>
internal::DeviceBuffer device_copy(const std::vector<T>& host, const char* what) {
  internal::DeviceBuffer d(host.size() * sizeof(T), what);
  d.upload(host.data(), host.size() * sizeof(T));
  return d;
}

// Rotating copies of inputs of `copy_bytes` each on the current GPU: enough that their total exceeds 2x its L2
// (one copy of a large shape already does), at most max_copies, and no more than 85% of its free memory holds.
// When one copy does not fit, Error(unsupported, who) says so with `what` (the bucket) and the sizes.
int gpu_copies(double copy_bytes, int max_copies, const char* who, const std::string& what);

// Rotating copies for a host workload: enough that their total exceeds 64 MiB (more than a CPU's last-level
// cache), at most max_copies, at least one, and no more than 85% of the memory the host has available holds beside
// `other_bytes` (outputs, tables). When one copy does not fit, Error(unsupported, who) says so with `what` (the
// bucket) and the sizes, before anything is allocated.
int host_copies(size_t copy_bytes, size_t other_bytes, int max_copies, const char* who, const std::string& what);

// A split call's device workspace, which only grows: `bytes` more than it holds reallocates it and points the
// call's arguments (workspace, workspace_bytes) at the new buffer. `what` names the allocation in an error.
template <class Args>
void grow_workspace(internal::DeviceBuffer& workspace, size_t bytes, Args& args, const char* what) {
  if (bytes == 0 || (workspace.get() && bytes <= workspace.bytes())) return;
  workspace = internal::DeviceBuffer(bytes, what);
  args.workspace = workspace.get();
  args.workspace_bytes = bytes;
}

// The largest workspace that any candidate of the family's search space which this device can run plans for
// the key: planned_bytes(config key) -> bytes. search_space and can_implement are the family's, found by
// argument-dependent lookup on the Problem as the launch pipeline finds them.
template <class Problem, class PlannedBytes>
size_t largest_candidate_workspace(const Problem& p, const Arch& arch, PlannedBytes&& planned_bytes) {
  size_t bytes = 0;
  const DeviceLimits lim = device_limits(internal::current_device_ordinal());
  for (const auto& c : search_space(p, arch))
    if (can_implement(p, c, arch, lim).empty()) bytes = std::max(bytes, size_t(planned_bytes(c.key().c_str())));
  return bytes;
}

}  // namespace ktune::autotune::workload_support
