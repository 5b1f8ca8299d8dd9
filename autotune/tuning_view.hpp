// A tuning row as listed by cache_list_tuning(), read for display (`ktune report`): the candidate table, the
// winner, and — when the row records them — bytes/FLOPs per call and the device's roofline ceilings. Needs no
// cache internals, so the CLI can use it through the public API.
#pragma once

#include <string>
#include <vector>

#include "autotune/select.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/device.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

struct TuningView {
  CacheTuningEntry entry;  // the row as listed
  bool readable = false;   // candidates_json was read (the fields below are filled)
  std::string error;       // why not: the reader's message naming the row and field
  std::vector<CandidateResult> candidates;
  size_t winner = 0;  // index into candidates
  double noise_fraction = 0;
  double bytes_per_call = 0, flops_per_call = 0;  // 0: not recorded (rows of older builds)
  DeviceCeilings ceilings;                        // 0: unknown
  int device_index = -1;  // the GPU ordinal or host worker of a multi-device warmup that measured it; -1: none
  std::string compiler_version;  // the NVRTC that compiled a GPU row's candidates; "": not recorded
};

// Never throws for a bad row: it comes back with readable = false and the reason.
KTUNE_API TuningView read_tuning_entry(const CacheTuningEntry& entry);

}  // namespace ktune::autotune
