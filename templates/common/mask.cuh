// XQA bit-packed draft mask (host + device). Per query row, ceil(q_len/32) 32-bit words stored as uint16
// pairs, low half first; bit j of word w set => draft key 32*w + j is visible to that row.
#pragma once
#include "common/dtype.h"

namespace ktune_common {

KT_HD constexpr int draft_mask_words(int q_len) { return (q_len + 31) / 32; }

// Word w of query row `row` (row = global query-token index) for a mask with `words` words per row.
KT_HD unsigned draft_mask_word(const unsigned short* mask, long long row, int words, int w) {
  const unsigned short* p = mask + (row * words + w) * 2;
  return unsigned(p[0]) | (unsigned(p[1]) << 16);
}
KT_HD bool draft_mask_visible(const unsigned short* mask, long long row, int words, int j) {
  return (draft_mask_word(mask, row, words, j >> 5) >> (j & 31)) & 1u;
}
// Host helper for building masks: sets bit j of row `row`.
KT_HD void draft_mask_set(unsigned short* mask, long long row, int words, int j) {
  unsigned short* p = mask + (row * words + (j >> 5)) * 2;
  int b = j & 31;
  if (b < 16) p[0] = (unsigned short)(p[0] | (1u << b));
  else p[1] = (unsigned short)(p[1] | (1u << (b - 16)));
}

}  // namespace ktune_common
