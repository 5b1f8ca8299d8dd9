// [host] test support: skip cleanly (with the reason) when the LLVM host backend is not built or not found;
// host arrays for an xqa case in the engine's argument struct.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"
#include "support/random_inputs.hpp"
#include "support/skip.hpp"

#define KTUNE_REQUIRE_HOST()                                                                   \
  do {                                                                                        \
    std::string why_no_host;                                                                  \
    const bool have_host = ::ktune::Runtime::host_available(&why_no_host);                    \
    KTUNE_GATE("host", have_host, "the LLVM host backend is absent (" << why_no_host << ")"); \
  } while (0)

namespace ktune::test {

// The engine arguments over a case's host arrays. make_xqa_case folds q_scale 0.25 (FP8 Q) and 1/o_scale 4
// (FP8 output) into its bmm scales; the launcher recomputes them from these fields.
inline XqaDecodeArgs host_args(const XqaRandomCase& c, void* out, float* lse) {
  XqaDecodeArgs a;
  const auto& p = c.problem;
  alignas(16) static const unsigned char kEmpty[16] = {};  // all-padding batches have no query token at all
  a.q = c.q.empty() ? kEmpty : c.q.data();
  a.kv_cache = c.kv.data();
  a.block_tables = c.block_tables.data();
  a.seq_lens = c.seq_lens.data();
  a.q_cu_seq_lens = c.opt.ragged ? c.q_cu.data() : nullptr;
  a.mask = p.mask == xqa::MaskKind::Explicit ? c.mask.data() : nullptr;
  a.sinks = p.has_sinks ? c.sinks.data() : nullptr;
  a.out = out;
  a.lse = p.write_lse ? lse : nullptr;
  a.batch = c.batch;
  a.num_tokens = c.num_tokens;
  a.q_len_per_req = c.q_len_per_req;
  a.max_pages_per_req = c.max_pages_per_req;
  a.num_pages = c.num_pages;
  a.max_seq_len = c.max_seq_len > 0 ? c.max_seq_len : 1;
  a.softmax_scale = c.opt.logit_sharpness / std::sqrt(float(p.head_dim));
  a.k_scale = c.k_scale;
  a.v_scale = c.v_scale;
  a.q_scale = 0.25f;
  a.o_scale = 0.25f;
  a.softcap = p.softcap ? c.softcap : 0.f;
  a.window_left = p.sliding_window ? c.window_left : -1;
  return a;
}

}  // namespace ktune::test
