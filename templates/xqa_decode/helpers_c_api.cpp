// The C API of the xqa_decode engine helpers (ktune.h): the mask argument struct and the calls over a prepared op.
#include <string>

#include "c_op.hpp"
#include "ktune/ktune.h"
#include "ktune/xqa_helpers.hpp"
#include "ktune_internal/c_api.hpp"
#include "xqa_decode/family.hpp"

namespace {
using namespace ktune::capi;

constexpr const char* kMaskArgsFamily = "xqa_decode/mask";

// The XqaDecodeOp behind a C op, or an error naming the op's family.
const ktune::XqaDecodeOp* xqa_op(const ktune_op* op, const char* fn) {
  using XqaCOp = ktune::FamilyCOp<ktune::XqaDecodeFamily, ktune_xqa_args>;
  const auto* c = op->op ? dynamic_cast<const XqaCOp*>(op->op.get()) : nullptr;
  if (!c)
    throw ktune::Error(ktune::Status::invalid_argument, "xqa_decode",
                       std::string(fn) + ": op: expected a prepared xqa_decode op, got one of " + op->family->name);
  return &c->op();
}

}  // namespace

extern "C" {

ktune_status ktune_xqa_mask_args_init(ktune_xqa_mask_args* a, size_t struct_size) {
  ktune::xqa::DraftMaskArgs d;
  const ktune_xqa_mask_args defaults{sizeof(ktune_xqa_mask_args), ktune::c_family_id(kMaskArgsFamily), d.bool_mask,
                                     d.q_cu_seq_lens, d.out, static_cast<int>(d.source), d.batch, d.q_len, d.rows};
  return init_c_struct(a, struct_size, defaults, "ktune_xqa_mask_args_init");
}

ktune_status ktune_xqa_mask_words(const ktune_op* op, int* words) {
  if (!op) return invalid("ktune_xqa_mask_words: op must not be NULL");
  if (!words) return invalid("ktune_xqa_mask_words: words must not be NULL");
  return guarded([&] { *words = ktune::xqa::draft_mask_words(xqa_op(op, "ktune_xqa_mask_words")->problem()); });
}

ktune_status ktune_xqa_pack_mask(const ktune_op* op, const ktune_xqa_mask_args* a, void* stream) {
  if (!op) return invalid("ktune_xqa_pack_mask: op must not be NULL");
  if (!a) return invalid("ktune_xqa_pack_mask: args must not be NULL");
  if (ktune_status st = check_args_header(a, kMaskArgsFamily, sizeof(*a), "ktune_xqa_pack_mask")) return st;
  return guarded([&] {
    const ktune_xqa_mask_args c = ktune::read_c_args<ktune_xqa_mask_args>(a);
    ktune::xqa::DraftMaskArgs d;
    d.bool_mask = c.bool_mask, d.q_cu_seq_lens = c.q_cu_seq_lens, d.out = c.out;
    d.source = static_cast<ktune::xqa::DraftMaskSource>(c.source);
    d.batch = c.batch, d.q_len = c.q_len, d.rows = c.rows;
    ktune::xqa::pack_draft_mask(*xqa_op(op, "ktune_xqa_pack_mask"), d, stream);
  });
}

ktune_status ktune_xqa_q_cu_seq_lens(const ktune_op* op, const int32_t* q_lens, int batch, int32_t* q_cu_seq_lens,
                                     void* stream) {
  if (!op) return invalid("ktune_xqa_q_cu_seq_lens: op must not be NULL");
  return guarded([&] {
    ktune::xqa::build_q_cu_seq_lens(*xqa_op(op, "ktune_xqa_q_cu_seq_lens"), q_lens, batch, q_cu_seq_lens, stream);
  });
}

}  // extern "C"
