// The xqa_decode engine helpers on the host (ktune/xqa_helpers.hpp): the host forms against an independent
// reference (random boolean masks, uniform and ragged, zero-length padding requests, every q_len, W = 1..3 words
// a row), argument errors naming the field, the C API over a prepared op, and the helper entry points compiled
// into the xqa_decode module by NVRTC. Fresh random data every run; the seed is printed and KTUNE_TEST_SEED
// replays it. The GPU forms: test_xqa_helpers_gpu.cpp.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/xqa_helpers.hpp"
#include "support/random_inputs.hpp"
#include "support/seed.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "xqa_decode/helpers_host.hpp"

using namespace ktune;
using namespace ktune::xqa;

namespace {

constexpr uint32_t kPoison = 0xA5C3A5C3u;

// One seed for the whole run (printed once); each test offsets it.
uint64_t helper_seed() {
  static const uint64_t seed = test::run_seed("xqa helpers");
  return seed;
}

Problem explicit_problem(int max_q_len) {
  Problem p;
  p.max_q_len = max_q_len;
  p.mask = MaskKind::Explicit;
  p.validate();
  return p;
}

// One draft-mask case: the request lengths, the boolean mask and where each request's rows start.
struct MaskCase {
  int batch = 0, q_len = 0, rows = 0, max_q_len = 0;
  bool ragged = false;
  DraftMaskSource source = DraftMaskSource::FromBool;
  std::vector<int32_t> lens, cu;  // cu only when ragged
  std::vector<uint8_t> bools;     // [rows, q_len]
};

MaskCase random_case(test::SplitMix& r, int max_q_len, bool ragged, DraftMaskSource source) {
  MaskCase c;
  c.max_q_len = max_q_len;
  c.ragged = ragged;
  c.source = source;
  c.batch = r.range(1, 9);
  c.q_len = r.range(1, max_q_len);
  if (ragged) {
    c.cu.push_back(0);
    for (int b = 0; b < c.batch; ++b) {
      const int n = r.uniform() < 0.25 ? 0 : r.range(1, max_q_len);  // zero-length: CUDA-graph padding
      c.lens.push_back(n);
      c.cu.push_back(c.cu.back() + n);
    }
    // rows past the last request (a padded buffer): never written
    c.rows = std::min<int>(c.cu.back() + r.range(0, 3), c.batch * max_q_len);
  } else {
    c.lens.assign(c.batch, c.q_len);
    c.rows = c.batch * c.q_len;
  }
  c.bools.resize(size_t(c.rows) * c.q_len);
  for (uint8_t& v : c.bools) v = r.uniform() < 0.5 ? 0 : uint8_t(r.range(1, 255));  // any nonzero is true
  return c;
}

// Independent of helpers.h: key by key, bit by bit, then the 32-bit words, W per row.
std::vector<uint32_t> reference_words(const MaskCase& c, int words) {
  std::vector<uint32_t> out(size_t(c.rows) * words, kPoison);
  int start = 0;
  for (int b = 0; b < c.batch; ++b) {
    const int n = c.lens[b];
    if (c.ragged) start = c.cu[b];
    for (int i = 0; i < n; ++i) {
      const int row = start + i;
      for (int w = 0; w < words; ++w) out[size_t(row) * words + w] = 0;
      for (int j = 0; j < n && j < c.q_len; ++j) {
        bool visible = true;
        if (c.source == DraftMaskSource::FromBool) visible = c.bools[size_t(row) * c.q_len + j] != 0;
        if (c.source == DraftMaskSource::Causal) visible = j <= i;
        if (visible) out[size_t(row) * words + j / 32] |= 1u << (j % 32);
      }
    }
    if (!c.ragged) start += c.q_len;
  }
  return out;
}

DraftMaskArgs args_of(const MaskCase& c, std::vector<uint32_t>& out) {
  DraftMaskArgs a;
  a.bool_mask = c.source == DraftMaskSource::FromBool ? c.bools.data() : nullptr;
  a.q_cu_seq_lens = c.ragged ? c.cu.data() : nullptr;
  a.out = reinterpret_cast<uint16_t*>(out.data());
  a.source = c.source;
  a.batch = c.batch;
  a.q_len = c.q_len;
  a.rows = c.rows;
  return a;
}

std::string describe(const MaskCase& c) {
  std::string s = "batch " + std::to_string(c.batch) + " q_len " + std::to_string(c.q_len) + " rows " +
                  std::to_string(c.rows) + " max_q_len " + std::to_string(c.max_q_len) + " source " +
                  std::to_string(int(c.source)) + (c.ragged ? " ragged lens" : " uniform");
  if (c.ragged)
    for (int n : c.lens) s += " " + std::to_string(n);
  return s;
}

// The error a call throws: it must be invalid_argument and name `field`.
template <class F>
void expect_bad(F&& f, const std::string& field) {
  try {
    f();
    FAIL("expected Error(invalid_argument) naming " << field);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.status() == Status::invalid_argument);
    CHECK_THAT(std::string(e.what()), Catch::Contains("xqa_decode") && Catch::Contains(field + ":"));
  }
}

}  // namespace

TEST_CASE("xqa helpers: host draft-mask packing matches the reference", "[xqa][helpers]") {
  test::SplitMix r(helper_seed());
  const DraftMaskSource sources[] = {DraftMaskSource::FromBool, DraftMaskSource::Causal, DraftMaskSource::Full};
  for (int max_q_len : {1, 2, 5, 8, 16}) {
    const Problem p = explicit_problem(max_q_len);
    REQUIRE(draft_mask_words(p) == 1);
    for (int trial = 0; trial < 24; ++trial) {
      const MaskCase c = random_case(r, max_q_len, trial % 2 == 1, sources[trial % 3]);
      INFO(describe(c));
      std::vector<uint32_t> out(size_t(c.rows), kPoison);
      pack_draft_mask_host(p, args_of(c, out));
      CHECK(out == reference_words(c, 1));
    }
  }
}

TEST_CASE("xqa helpers: the row rule for every W (ceil(max_q_len / 32) words a row)", "[xqa][helpers]") {
  // Row strides beyond this build's max_q_len of 16, through the loop the host form runs.
  test::SplitMix r(helper_seed() + 1);
  for (int max_q_len : {17, 32, 33, 40, 64, 96}) {
    const int words = (max_q_len + 31) / 32;
    for (int trial = 0; trial < 12; ++trial) {
      const MaskCase c = random_case(r, max_q_len, trial % 2 == 0, DraftMaskSource(trial % 3));
      INFO(describe(c) << " words " << words);
      std::vector<uint32_t> out(size_t(c.rows) * words, kPoison);
      const DraftMaskArgs a = args_of(c, out);
      ktune_xqa::DraftMaskParams prm{a.bool_mask, a.q_cu_seq_lens, a.out, int(a.source), a.q_len, a.rows, a.batch};
      draft_mask_rows_host(prm, words, max_q_len);
      CHECK(out == reference_words(c, words));
    }
  }
}

TEST_CASE("xqa helpers: host q_cu_seq_lens is the exclusive prefix sum", "[xqa][helpers]") {
  test::SplitMix r(helper_seed() + 2);
  const Problem p = explicit_problem(16);
  for (int batch : {0, 1, 2, 31, 1000, 5000}) {
    std::vector<int32_t> lens(batch);
    for (int32_t& n : lens) n = r.uniform() < 0.2 ? 0 : r.range(1, 16);
    std::vector<int32_t> cu(batch + 1, -7), want(batch + 1, 0);
    for (int b = 0; b < batch; ++b) want[b + 1] = want[b] + lens[b];
    build_q_cu_seq_lens_host(p, lens.data(), batch, cu.data());
    INFO("batch " << batch);
    CHECK(cu == want);
  }
}

TEST_CASE("xqa helpers: bad arguments are errors naming the field, nothing written", "[xqa][helpers]") {
  const Problem p = explicit_problem(4);
  std::vector<uint8_t> bools(64, 1);
  std::vector<uint32_t> out(16, kPoison);
  std::vector<int32_t> cu = {0, 4, 9};  // request 1 has 5 > max_q_len tokens
  auto base = [&] {
    DraftMaskArgs a;
    a.bool_mask = bools.data();
    a.out = reinterpret_cast<uint16_t*>(out.data());
    a.batch = 2;
    a.q_len = 4;
    a.rows = 8;
    return a;
  };
  expect_bad([&] { auto a = base(); a.bool_mask = nullptr; pack_draft_mask_host(p, a); }, "bool_mask");
  expect_bad([&] { auto a = base(); a.out = nullptr; pack_draft_mask_host(p, a); }, "out");
  expect_bad([&] { auto a = base(); a.batch = 0; pack_draft_mask_host(p, a); }, "batch");
  expect_bad([&] { auto a = base(); a.q_len = 5; a.rows = 10; pack_draft_mask_host(p, a); }, "q_len");
  expect_bad([&] { auto a = base(); a.q_len = 0; pack_draft_mask_host(p, a); }, "q_len");
  expect_bad([&] { auto a = base(); a.rows = 7; pack_draft_mask_host(p, a); }, "rows");
  expect_bad([&] { auto a = base(); a.q_cu_seq_lens = cu.data(); a.rows = 9; pack_draft_mask_host(p, a); }, "rows");
  expect_bad([&] { auto a = base(); a.q_cu_seq_lens = cu.data(); a.rows = 8; pack_draft_mask_host(p, a); },
             "q_cu_seq_lens[2] (request 1)");
  expect_bad([&] { auto a = base(); a.source = DraftMaskSource::Causal; pack_draft_mask_host(p, a); }, "bool_mask");
  expect_bad([&] { auto a = base(); a.source = DraftMaskSource(7); pack_draft_mask_host(p, a); }, "source");
  Problem causal = p;
  causal.mask = MaskKind::Causal;
  expect_bad([&] { pack_draft_mask_host(causal, base()); }, "mask");
  CHECK(out == std::vector<uint32_t>(16, kPoison));

  std::vector<int32_t> lens = {1, 17}, cu_out(3, -1);
  expect_bad([&] { build_q_cu_seq_lens_host(p, lens.data(), 2, cu_out.data()); }, "q_lens[1]");
  lens[1] = -1;
  expect_bad([&] { build_q_cu_seq_lens_host(p, lens.data(), 2, cu_out.data()); }, "q_lens[1]");
  expect_bad([&] { build_q_cu_seq_lens_host(p, nullptr, 2, cu_out.data()); }, "q_lens");
  expect_bad([&] { build_q_cu_seq_lens_host(p, lens.data(), 2, nullptr); }, "q_cu_seq_lens");
  expect_bad([&] { build_q_cu_seq_lens_host(p, lens.data(), -1, cu_out.data()); }, "batch");
  CHECK(cu_out == std::vector<int32_t>(3, -1));
}

TEST_CASE("xqa helpers: the GPU calls check their arguments before any driver call", "[xqa][helpers]") {
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("h.db");
  Runtime rt(o);
  const XqaDecodeOp op = prepare(rt, explicit_problem(4));
  auto fake = [](uintptr_t v) { return reinterpret_cast<void*>(v); };
  DraftMaskArgs a;
  a.bool_mask = static_cast<const uint8_t*>(fake(0x10000));
  a.out = static_cast<uint16_t*>(fake(0x20002));  // not 4-byte aligned
  a.batch = 2;
  a.q_len = 4;
  a.rows = 8;
  expect_bad([&] { pack_draft_mask(op, a, nullptr); }, "out");
  a.out = static_cast<uint16_t*>(fake(0x20000));
  a.q_cu_seq_lens = static_cast<const int32_t*>(fake(0x30001));
  expect_bad([&] { pack_draft_mask(op, a, nullptr); }, "q_cu_seq_lens");
  expect_bad([&] { build_q_cu_seq_lens(op, nullptr, 3, static_cast<int32_t*>(fake(0x30000)), nullptr); }, "q_lens");
  expect_bad([&] { build_q_cu_seq_lens(op, static_cast<const int32_t*>(fake(0x30000)), kMaxHelperBatch + 1,
                                       static_cast<int32_t*>(fake(0x40000)), nullptr); }, "batch");
  Problem cp = explicit_problem(4);
  cp.mask = MaskKind::Causal;
  const XqaDecodeOp causal_op = prepare(rt, cp);
  a.q_cu_seq_lens = nullptr;
  expect_bad([&] { pack_draft_mask(causal_op, a, nullptr); }, "mask");
  expect_bad([&] { pack_draft_mask(XqaDecodeOp(), a, nullptr); }, "op");
}

TEST_CASE("xqa helpers: the C API over a prepared op (host device: host pointers)", "[xqa][helpers][capi]") {
  test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  ktune_op* op = nullptr;
  REQUIRE(ktune_op_prepare(rt, "xqa_decode", R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,)"
                                             R"("max_q_len":8,"mask":"explicit"})", &op) == KTUNE_OK);
  ktune_op* gemm = nullptr;
  REQUIRE(ktune_op_prepare(rt, "mxfp4_gemm", "n256.k512.bf16-bf16", &gemm) == KTUNE_OK);

  int words = 0;
  CHECK(ktune_xqa_mask_words(op, &words) == KTUNE_OK);
  CHECK(words == 1);
  CHECK(ktune_xqa_mask_words(op, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_xqa_mask_words(gemm, &words) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("op: expected a prepared xqa_decode op"));

  ktune_xqa_mask_args m;
  ktune_xqa_mask_args_default(&m);
  CHECK(m.struct_size == sizeof(ktune_xqa_mask_args));
  CHECK(m.family_id == ktune_family_id("xqa_decode/mask"));
  CHECK(m.source == KTUNE_XQA_MASK_FROM_BOOL);
  CHECK(ktune_xqa_pack_mask(nullptr, &m, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_xqa_pack_mask(op, nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  ktune_xqa_args decode_args;
  ktune_xqa_args_default(&decode_args);
  CHECK(ktune_xqa_pack_mask(op, reinterpret_cast<const ktune_xqa_mask_args*>(&decode_args), nullptr) ==
        KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.family_id"));
  CHECK(ktune_xqa_pack_mask(op, &m, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);  // defaults: batch 0
  CHECK_THAT(ktune_last_error(), Catch::Contains("batch:"));
  CHECK(ktune_xqa_q_cu_seq_lens(nullptr, nullptr, 1, nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_xqa_q_cu_seq_lens(gemm, nullptr, 1, nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);

  // On the host device the same calls take host pointers and run the host forms.
  test::SplitMix r(helper_seed() + 3);
  const MaskCase c = random_case(r, 8, true, DraftMaskSource::FromBool);
  std::vector<uint32_t> out(size_t(c.rows), kPoison);
  std::vector<int32_t> cu(c.batch + 1, -1);
  ktune_status st_mask = KTUNE_ERROR_INTERNAL, st_cu = KTUNE_ERROR_INTERNAL, st_bad = KTUNE_OK;
  std::string bad_msg;
  std::thread([&] {
    ktune_use_device(KTUNE_HOST_DEVICE);
    m.bool_mask = c.bools.data();
    m.q_cu_seq_lens = c.cu.data();
    m.out = reinterpret_cast<uint16_t*>(out.data());
    m.batch = c.batch;
    m.q_len = c.q_len;
    m.rows = c.rows;
    st_mask = ktune_xqa_pack_mask(op, &m, nullptr);
    st_cu = ktune_xqa_q_cu_seq_lens(op, c.lens.data(), c.batch, cu.data(), nullptr);
    std::vector<int32_t> too_long = {9};
    st_bad = ktune_xqa_q_cu_seq_lens(op, too_long.data(), 1, cu.data(), nullptr);
    bad_msg = ktune_last_error();
  }).join();
  INFO(describe(c));
  CHECK(st_mask == KTUNE_OK);
  CHECK(out == reference_words(c, 1));
  CHECK(st_cu == KTUNE_OK);
  CHECK(cu == c.cu);
  CHECK(st_bad == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(bad_msg, Catch::Contains("q_lens[0]:"));
  ktune_op_free(gemm);
  ktune_op_free(op);
  ktune_runtime_destroy(rt);
}

TEST_CASE("xqa helpers: the problem's shared module carries the combine and the helper entry points (NVRTC, sm_90a)",
          "[xqa][helpers][compile]") {
  KTUNE_REQUIRE_NVRTC();
  // The CI arches are compiled by test_xqa_compile.cpp, whose problems compile their shared modules too.
  const Problem p = explicit_problem(16);
  const Arch arch = Arch::parse("sm_90a");
  const GeneratedKernel k = generate_shared(p, arch);
  CHECK(k.config_key == kSharedConfig);
  REQUIRE(k.entry_points.size() == 3);
  CHECK(k.entry_points[kCombineEntry] == "ktune_xqa::combine_kernel<ktune_xqa::Spec>");
  CHECK(k.entry_points[kHelperMaskEntry] == "ktune_xqa::draft_mask_kernel<ktune_xqa::Spec>");
  CHECK(k.entry_points[kHelperCuSeqLensEntry] == "ktune_xqa::cu_seq_lens_kernel<ktune_xqa::Spec>");
  // A config's module holds its decode kernel only.
  const GeneratedKernel d = generate(p, default_config(p, arch), arch);
  CHECK(d.entry_points == std::vector<std::string>{"ktune_xqa::decode_kernel<ktune_xqa::Spec>"});
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("x.db");
  Runtime rt(o);
  const EnsureResult e = rt.ensure_binary(k, arch);  // the stored blob's symbols are checked against the list
  CHECK(e.compiled);
  CHECK(e.not_stored.empty());
}
