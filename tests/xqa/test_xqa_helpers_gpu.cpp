// The xqa_decode engine helpers on the GPU (ktune/xqa_helpers.hpp) against their host forms, which
// test_xqa_helpers.cpp checks against an independent reference: the draft-mask kernel (every source, uniform and
// ragged with zero-length padding requests, poisoned outputs, rows outside every request untouched), the
// q_cu_seq_lens scan for small and large batches in one launch, a CUDA-graph capture replayed with new data in the
// same buffers, and the helpers served from a warmed cache with JIT off, their module then held by the op. Fresh
// random data; the seed is printed and KTUNE_TEST_SEED replays it.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ktune/ktune.h"
#include "ktune/xqa_helpers.hpp"
#include "support/gpu.hpp"
#include "support/random_inputs.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace ktune::xqa;

namespace {

constexpr uint32_t kPoison = 0x5A3C5A3Cu;

// One seed for the whole run (printed once); each test offsets it.
uint64_t gpu_helper_seed() {
  static const uint64_t seed = test::run_seed("xqa helpers (gpu)");
  return seed;
}

Runtime& helper_runtime() {
  static Runtime rt(RuntimeOptions::from_env());
  return rt;
}

Problem explicit_problem(int max_q_len) {
  Problem p;
  p.max_q_len = max_q_len;
  p.mask = MaskKind::Explicit;
  p.validate();
  return p;
}

struct HostCase {
  DraftMaskArgs a;  // over the host vectors below
  std::vector<uint8_t> bools;
  std::vector<int32_t> cu, lens;
};

HostCase random_case(test::SplitMix& r, int max_q_len, bool ragged, DraftMaskSource source, int batch) {
  HostCase c;
  c.a.source = source;
  c.a.batch = batch;
  c.a.q_len = r.range(1, max_q_len);
  if (ragged) {
    c.cu.push_back(0);
    for (int b = 0; b < batch; ++b) {
      c.lens.push_back(r.uniform() < 0.25 ? 0 : r.range(1, max_q_len));
      c.cu.push_back(c.cu.back() + c.lens.back());
    }
    c.a.rows = std::min(c.cu.back() + r.range(0, 5), batch * max_q_len);
  } else {
    c.a.rows = batch * c.a.q_len;
  }
  c.bools.resize(size_t(c.a.rows) * c.a.q_len);
  for (uint8_t& v : c.bools) v = r.uniform() < 0.5 ? 0 : uint8_t(r.range(1, 255));
  c.a.bool_mask = source == DraftMaskSource::FromBool ? c.bools.data() : nullptr;
  c.a.q_cu_seq_lens = ragged ? c.cu.data() : nullptr;
  return c;
}

// The device form of `hc` into a poisoned buffer, compared with the host form over the same poison.
void check_mask_on_gpu(const XqaDecodeOp& op, const HostCase& hc, void* stream) {
  const Problem& p = op.problem();
  const int words = draft_mask_words(p);
  std::vector<uint32_t> want(size_t(hc.a.rows) * words, kPoison);
  DraftMaskArgs h = hc.a;
  h.out = reinterpret_cast<uint16_t*>(want.data());
  pack_draft_mask_host(p, h);

  test::DeviceBuffer bools(hc.bools.size()), cu(hc.cu.size() * 4 + 4), out(want.size() * 4 + 4);
  bools.upload(hc.bools);
  if (!hc.cu.empty()) cu.upload(hc.cu);
  out.upload(std::vector<uint32_t>(want.size(), kPoison));
  DraftMaskArgs d = hc.a;
  d.bool_mask = hc.a.bool_mask ? bools.as<uint8_t>() : nullptr;
  d.q_cu_seq_lens = hc.a.q_cu_seq_lens ? cu.as<int32_t>() : nullptr;
  d.out = out.as<uint16_t>();
  pack_draft_mask(op, d, stream);
  test::sync();
  CHECK(out.download<uint32_t>(want.size()) == want);
}

}  // namespace

TEST_CASE("xqa helpers: the draft-mask kernel matches the host form", "[gpu][xqa][helpers]") {
  KTUNE_REQUIRE_GPU();
  test::SplitMix r(gpu_helper_seed());
  for (int max_q_len : {1, 4, 7, 16}) {
    const XqaDecodeOp op = prepare(helper_runtime(), explicit_problem(max_q_len));
    for (int trial = 0; trial < 12; ++trial) {
      const int batch = trial < 6 ? r.range(1, 8) : r.range(100, 3000);
      const HostCase hc = random_case(r, max_q_len, trial % 2 == 1, DraftMaskSource(trial % 3), batch);
      INFO("max_q_len " << max_q_len << " trial " << trial << " batch " << batch << " rows " << hc.a.rows);
      check_mask_on_gpu(op, hc, nullptr);
    }
  }
}

TEST_CASE("xqa helpers: q_cu_seq_lens in one launch for any batch", "[gpu][xqa][helpers]") {
  KTUNE_REQUIRE_GPU();
  test::SplitMix r(gpu_helper_seed() + 1);
  const XqaDecodeOp op = prepare(helper_runtime(), explicit_problem(16));
  for (int batch : {0, 1, 5, 32, 1023, 1024, 1025, 4096, 70001}) {
    std::vector<int32_t> lens(batch);
    for (int32_t& n : lens) n = r.uniform() < 0.2 ? 0 : r.range(1, 16);
    std::vector<int32_t> want(batch + 1);
    build_q_cu_seq_lens_host(op.problem(), lens.data(), batch, want.data());
    test::DeviceBuffer dl(lens.size() * 4 + 4), dcu(want.size() * 4);
    if (batch) dl.upload(lens);
    dcu.poison();
    build_q_cu_seq_lens(op, dl.as<int32_t>(), batch, dcu.as<int32_t>(), nullptr);
    test::sync();
    INFO("batch " << batch);
    CHECK(dcu.download<int32_t>(want.size()) == want);
  }
}

TEST_CASE("xqa helpers: captured in a CUDA graph, replayed with new data in the same buffers", "[gpu][xqa][helpers]") {
  KTUNE_REQUIRE_GPU();
  Runtime& rt = helper_runtime();
  const auto& cu = detail::driver();
  test::SplitMix r(gpu_helper_seed() + 2);
  const int max_q_len = 8, batch = 16, rows = batch * max_q_len;
  const XqaDecodeOp op = prepare(rt, explicit_problem(max_q_len));
  test::DeviceBuffer bools(size_t(rows) * max_q_len), lens(batch * 4), cus((batch + 1) * 4), out(size_t(rows) * 4);
  DraftMaskArgs d;
  d.bool_mask = bools.as<uint8_t>();
  d.q_cu_seq_lens = cus.as<int32_t>();
  d.out = out.as<uint16_t>();
  d.batch = batch;
  d.q_len = max_q_len;
  d.rows = rows;
  CUstream stream = nullptr;
  CU_CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  build_q_cu_seq_lens(op, lens.as<int32_t>(), batch, cus.as<int32_t>(), stream);  // loads the module
  CU_CHECK(cu.cuStreamSynchronize(stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  const RuntimeStats before = rt.stats();
  CU_CHECK(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  try {
    build_q_cu_seq_lens(op, lens.as<int32_t>(), batch, cus.as<int32_t>(), stream);
    pack_draft_mask(op, d, stream);
  } catch (...) {
    cu.cuStreamEndCapture(stream, &graph);
    throw;
  }
  CU_CHECK(cu.cuStreamEndCapture(stream, &graph));
  CHECK(rt.stats().compiles == before.compiles);
  CHECK(rt.stats().loads == before.loads);
  CU_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
  for (int round = 0; round < 3; ++round) {
    std::vector<int32_t> h_lens(batch), h_cu(batch + 1);
    for (int32_t& n : h_lens) n = r.uniform() < 0.25 ? 0 : r.range(1, max_q_len);
    std::vector<uint8_t> h_bools(size_t(rows) * max_q_len);
    for (uint8_t& v : h_bools) v = uint8_t(r.range(0, 1));
    lens.upload(h_lens);
    bools.upload(h_bools);
    out.upload(std::vector<uint32_t>(rows, kPoison));
    CU_CHECK(cu.cuGraphLaunch(exec, stream));
    CU_CHECK(cu.cuStreamSynchronize(stream));
    build_q_cu_seq_lens_host(op.problem(), h_lens.data(), batch, h_cu.data());
    std::vector<uint32_t> want(rows, kPoison);
    DraftMaskArgs h = d;
    h.bool_mask = h_bools.data();
    h.q_cu_seq_lens = h_cu.data();
    h.out = reinterpret_cast<uint16_t*>(want.data());
    pack_draft_mask_host(op.problem(), h);
    INFO("replay " << round);
    CHECK(cus.download<int32_t>(batch + 1) == h_cu);
    CHECK(out.download<uint32_t>(rows) == want);
  }
  cu.cuGraphExecDestroy(exec);
  cu.cuGraphDestroy(graph);
  cu.cuStreamDestroy(stream);
}

TEST_CASE("xqa helpers: a warmed cache serves them with JIT off (0 compiles)", "[gpu][xqa][helpers]") {
  KTUNE_REQUIRE_GPU();
  test::TempDir dir;
  const Problem p = explicit_problem(4);
  RuntimeOptions o;
  o.cache_path = dir.file("w.db");
  {
    Runtime warm(o);  // of what a warmup leaves, only the problem's shared module: the helpers need nothing else
    const Arch arch = warm.current_arch();
    warm.ensure_binary(generate_shared(p, arch), arch);
  }
  o.allow_jit = false;
  Runtime rt(o);
  const XqaDecodeOp op = prepare(rt, p);
  HostCase hc;
  test::SplitMix r(gpu_helper_seed() + 3);
  hc = random_case(r, 4, true, DraftMaskSource::FromBool, 9);
  check_mask_on_gpu(op, hc, nullptr);
  const int64_t table_lookups = rt.stats().memory_hits;
  test::DeviceBuffer dl(9 * 4), dcu(10 * 4);
  dl.upload(hc.lens);
  build_q_cu_seq_lens(op, dl.as<int32_t>(), 9, dcu.as<int32_t>(), nullptr);
  test::sync();
  CHECK(dcu.download<int32_t>(10) == hc.cu);
  CHECK(rt.stats().compiles == 0);
  // once loaded on this context, the op holds the helpers' module: later calls skip the runtime's module table
  build_q_cu_seq_lens(op, dl.as<int32_t>(), 9, dcu.as<int32_t>(), nullptr);
  check_mask_on_gpu(op, hc, nullptr);
  CHECK(rt.stats().memory_hits == table_lookups);
}

TEST_CASE("xqa helpers: the C API launches them through a prepared op", "[gpu][xqa][helpers][capi]") {
  KTUNE_REQUIRE_GPU();
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  ktune_op* op = nullptr;
  REQUIRE(ktune_op_prepare(rt, "xqa_decode", explicit_problem(8).key().c_str(), &op) == KTUNE_OK);
  test::SplitMix r(gpu_helper_seed() + 4);
  const HostCase hc = random_case(r, 8, true, DraftMaskSource::FromBool, 11);
  std::vector<uint32_t> want(size_t(hc.a.rows), kPoison);
  DraftMaskArgs h = hc.a;
  h.out = reinterpret_cast<uint16_t*>(want.data());
  pack_draft_mask_host(explicit_problem(8), h);

  test::DeviceBuffer bools(hc.bools.size() + 1), lens(hc.lens.size() * 4), cu(hc.cu.size() * 4),
      out(want.size() * 4 + 4);
  bools.upload(hc.bools);
  lens.upload(hc.lens);
  out.upload(std::vector<uint32_t>(want.size() + 1, kPoison));
  cu.poison();
  REQUIRE(ktune_xqa_q_cu_seq_lens(op, lens.as<int32_t>(), 11, cu.as<int32_t>(), nullptr) == KTUNE_OK);
  ktune_xqa_mask_args m;
  ktune_xqa_mask_args_default(&m);
  m.bool_mask = bools.as<uint8_t>();
  m.q_cu_seq_lens = cu.as<int32_t>();
  m.out = out.as<uint16_t>();
  m.batch = 11;
  m.q_len = hc.a.q_len;
  m.rows = hc.a.rows;
  REQUIRE(ktune_xqa_pack_mask(op, &m, nullptr) == KTUNE_OK);
  test::sync();
  CHECK(cu.download<int32_t>(12) == hc.cu);
  CHECK(out.download<uint32_t>(want.size()) == want);
  ktune_op_free(op);
  ktune_runtime_destroy(rt);
}
