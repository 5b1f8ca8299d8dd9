// XQA bit-packed draft mask (host + device). Per query row, W = ceil(max_q_len/32) 32-bit words (1 for
// max_q_len <= 32, 2 up to 64) stored as uint16 pairs, low half first; bit j of word w set => draft key 32*w + j
// is visible to that row. W is the problem's, the same for every row (a fixed row stride, so the rows of a
// ragged batch are addressed by their global query-token index alone); a request with fewer query tokens
// leaves its high bits unread.
#pragma once
#include "common/dtype.h"

namespace ktune_common {

KT_HD constexpr int draft_mask_words(int max_q_len) { return (max_q_len + 31) / 32; }

// Word w of query row `row` (row = global query-token index) for a mask with `words` words per row.
KT_HD unsigned draft_mask_word(const unsigned short* mask, long long row, int words, int w) {
  const unsigned short* p = mask + (row * words + w) * 2;
  return unsigned(p[0]) | (unsigned(p[1]) << 16);
}
KT_HD bool draft_mask_visible(const unsigned short* mask, long long row, int words, int j) {
  return (draft_mask_word(mask, row, words, j >> 5) >> (j & 31)) & 1u;
}
// Bit j (0 <= j < 32 * W) of one row whose W (1 or 2) words are held in registers: w[0] holds keys 0..31.
template <int W>
KT_HD bool draft_mask_bit(const unsigned (&w)[W], int j) {
  static_assert(W == 1 || W == 2, "a draft mask row has 1 or 2 words");
  const unsigned x = (W == 1 || j < 32) ? w[0] : w[W - 1];
  return (x >> (j & 31)) & 1u;
}
// Host helper for building masks: sets bit j of row `row`.
KT_HD void draft_mask_set(unsigned short* mask, long long row, int words, int j) {
  unsigned short* p = mask + (row * words + (j >> 5)) * 2;
  int b = j & 31;
  if (b < 16) p[0] = (unsigned short)(p[0] | (1u << b));
  else p[1] = (unsigned short)(p[1] | (1u << (b - 16)));
}

}  // namespace ktune_common
