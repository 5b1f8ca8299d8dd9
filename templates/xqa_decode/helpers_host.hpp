// The host loop of the draft-mask helper (helpers.cpp), over the same per-word rule as the kernel (helpers.h).
// Internal: the public calls are in ktune/xqa_helpers.hpp; tests call this directly for every W, including
// row strides a problem of this build cannot have yet.
#pragma once

#include "xqa_decode/helpers.h"

namespace ktune::xqa {

// Writes every row of every request (the kernel's rows); `prm` already checked, its request lengths valid.
void draft_mask_rows_host(const ktune_xqa::DraftMaskParams& prm, int words, int max_q_len);

}  // namespace ktune::xqa
