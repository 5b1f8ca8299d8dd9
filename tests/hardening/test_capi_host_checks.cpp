// The C API's host path checks the index arrays itself (block tables, seq_lens, q_cu_seq_lens, top-k indices,
// grouped expert offsets): on the host backend they are host memory, so the library reads them before the
// kernel does and refuses a bad entry with an error naming the argument, the request or index, the value and
// the allowed range -- for a C caller that bypasses every binding, with or without a checked (.chk) problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "host/host_support.hpp"
#include "ktune/ktune.h"
#include "support/temp_dir.hpp"

namespace {

constexpr uint16_t kBf16One = 0x3F80;

struct CRuntime {
  ktune::test::TempDir dir;
  std::string db = dir.file("capi-host.db");
  ktune_runtime* rt = nullptr;
  CRuntime() {
    ktune_runtime_options o;
    ktune_runtime_options_default(&o);
    o.cache_path = db.c_str();
    o.allow_jit = 1;
    REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  }
  ~CRuntime() { ktune_runtime_destroy(rt); }
};

// Two requests of 20 KV tokens over 16-token pages (2 pages each, 4 pages in the cache), one query token each.
struct XqaCase {
  static constexpr int kHeads = 4, kDim = 64, kPage = 16, kBatch = 2, kPagesPerReq = 3, kPages = 4;
  std::vector<uint16_t> q = std::vector<uint16_t>(size_t(kBatch) * kHeads * kDim, kBf16One);
  std::vector<uint16_t> kv = std::vector<uint16_t>(size_t(kPages) * 2 * 1 * kPage * kDim, kBf16One);
  std::vector<uint16_t> out = std::vector<uint16_t>(size_t(kBatch) * kHeads * kDim, 0xFFFF);  // NaN in bf16
  std::vector<int32_t> block_tables = {2, 0, -1, 3, 1, -1};  // the spare column is never read
  std::vector<int32_t> seq_lens = {20, 20};
  std::vector<int32_t> q_cu = {0, 1, 2};
  ktune_xqa_args args() {
    ktune_xqa_args a;
    ktune_xqa_args_default(&a);
    a.q = q.data();
    a.kv_cache = kv.data();
    a.block_tables = block_tables.data();
    a.seq_lens = seq_lens.data();
    a.out = out.data();
    a.batch = kBatch;
    a.num_tokens = kBatch;
    a.q_len_per_req = 1;
    a.max_pages_per_req = kPagesPerReq;
    a.num_pages = kPages;
    a.max_seq_len = 32;
    a.softmax_scale = 0.125f;
    return a;
  }
};

const char* const kXqaKey = "d64.h4.kv1.p16.hnd.bf16-bf16-bf16.q1.none";
const char* const kXqaCheckedKey = "d64.h4.kv1.p16.hnd.bf16-bf16-bf16.q1.none.chk";

bool all_finite_bf16(const std::vector<uint16_t>& v) {
  for (uint16_t h : v)
    if ((h & 0x7F80) == 0x7F80) return false;
  return true;
}

}  // namespace

TEST_CASE("C API xqa_decode host: bad block-table entries, seq_lens and q_cu_seq_lens are refused by the library",
          "[attack][capi][host][xqa]") {
  KTUNE_REQUIRE_HOST();
  CRuntime c;
  for (const char* key : {kXqaKey, kXqaCheckedKey}) {
    INFO("problem " << key);
    struct Bad {
      const char* what;
      void (*mutate)(XqaCase&);
      const char* message;
    };
    const Bad cases[] = {
        {"entry 1e9", [](XqaCase& x) { x.block_tables[4] = 1000000000; },
         "block_tables[1][1] (request 1, page 1 of 2): expected a page index in [0, 4) (num_pages), got 1000000000"},
        {"entry -5", [](XqaCase& x) { x.block_tables[0] = -5; },
         "block_tables[0][0] (request 0, page 0 of 2): expected a page index in [0, 4) (num_pages), got -5"},
        {"seq_len past max_seq_len", [](XqaCase& x) { x.seq_lens[1] = 33; },
         "seq_lens[1] (request 1): expected 0..max_seq_len (32), got 33"},
        {"negative seq_len", [](XqaCase& x) { x.seq_lens[0] = -7; },
         "seq_lens[0] (request 0): expected 0..max_seq_len"},
    };
    for (const Bad& b : cases) {
      INFO(b.what);
      XqaCase x;
      b.mutate(x);
      ktune_xqa_args a = x.args();
      CHECK(ktune_xqa_decode_host(c.rt, key, &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
      CHECK_THAT(ktune_last_error(), Catch::Contains(b.message));
      CHECK(x.out[0] == 0xFFFF);  // nothing written
    }
    // Ragged form: a decreasing q_cu_seq_lens and one past num_tokens.
    XqaCase x;
    ktune_xqa_args a = x.args();
    x.q_cu = {0, 2, 1};
    a.q_cu_seq_lens = x.q_cu.data();
    CHECK(ktune_xqa_decode_host(c.rt, key, &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("q_cu_seq_lens[1] (request 0): expected a value in [0, 1]"));
    x.q_cu = {0, 1, 5};
    a.q_cu_seq_lens = x.q_cu.data();
    CHECK(ktune_xqa_decode_host(c.rt, key, &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("q_cu_seq_lens[2] (request 1)"));
    CHECK_THAT(ktune_last_error(), Catch::Contains("got 5"));
  }

  // The engine entry point on the host device (not the *_host name) runs the same check. On a thread of its
  // own: the host device is per thread, and this one must not stay on it for later cases.
  ktune_status use = KTUNE_ERROR_INTERNAL, call = KTUNE_OK;
  std::string message;
  std::thread([&] {
    use = ktune_use_device(KTUNE_HOST_DEVICE);
    XqaCase x;
    x.block_tables[3] = 1000000000;
    ktune_xqa_args a = x.args();
    call = ktune_xqa_decode(c.rt, kXqaKey, &a, nullptr);
    message = ktune_last_error();
  }).join();
  REQUIRE(use == KTUNE_OK);
  CHECK(call == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(message, Catch::Contains("block_tables[1][0]"));

  // The same arrays with valid entries run, and every output is finite (the check refuses only bad input).
  XqaCase good;
  ktune_xqa_args g = good.args();
  REQUIRE(ktune_xqa_decode_host(c.rt, kXqaKey, &g, 1) == KTUNE_OK);
  CHECK(all_finite_bf16(good.out));
}

TEST_CASE("C API: an empty problem key is refused like any unparsable key, on a thread's first call too",
          "[attack][capi]") {
  // Each family keeps the last key a thread parsed; an empty key must be parsed (and refused), never taken for
  // the default problem the cache starts with. A thread of its own: nothing parsed on it before.
  std::thread([] {
    size_t bytes = 7;
    ktune_runtime* rt = nullptr;
    REQUIRE(ktune_runtime_create(nullptr, &rt) == KTUNE_OK);
    CHECK(ktune_xqa_decode_workspace_bytes(rt, "", 1, 64, &bytes) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("cannot parse ''"));
    CHECK(ktune_sparse_mla_decode_workspace_bytes(rt, "", 1, nullptr, 0, &bytes) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(std::string(ktune_last_error()), Catch::Contains("cannot parse ''"));
    CHECK(bytes == 7);
    ktune_runtime_destroy(rt);
  }).join();
}

TEST_CASE("C API sparse_mla_decode host: a top-k index outside the cache is refused by the library",
          "[attack][capi][host][mla]") {
  KTUNE_REQUIRE_HOST();
  CRuntime c;
  const char* key = "h128.r512.d64.k2048.p64.bf16-fp8ds.q1";
  std::vector<uint16_t> q(size_t(128) * 576, kBf16One), out(size_t(128) * 512, 0xFFFF);
  std::vector<unsigned char> kv(size_t(64) * 656 + 16, 0);
  std::vector<int32_t> indices(2048, -1);
  indices[7] = 3;
  ktune_sparse_mla_args a;
  ktune_sparse_mla_args_default(&a);
  a.q = q.data();
  a.kv_cache = kv.data();
  a.indices = indices.data();
  a.out = out.data();
  a.num_tokens = 1;
  a.num_pages = 1;
  a.softmax_scale = 0.04f;
  for (int32_t v : {64, 1000000000, -5}) {
    INFO("index " << v);
    indices[9] = v;
    CHECK(ktune_sparse_mla_decode_host(c.rt, key, &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("indices (token 0, entry 9)"));
    CHECK_THAT(ktune_last_error(), Catch::Contains("got " + std::to_string(v)));
    CHECK(out[0] == 0xFFFF);
  }
}

TEST_CASE("C API mxfp4_gemm grouped host: bad expert offsets are refused by the library",
          "[attack][capi][host][mxfp4]") {
  KTUNE_REQUIRE_HOST();
  CRuntime c;
  const char* key = "n128.k128.e4.top2.bf16-bf16";
  size_t wbytes = 0, sbytes = 0;
  REQUIRE(ktune_mxfp4_packed_bytes(128, 128, 4, 0, &wbytes) == KTUNE_OK);
  REQUIRE(ktune_mxfp4_packed_bytes(128, 128, 4, 1, &sbytes) == KTUNE_OK);
  std::vector<uint32_t> w(wbytes / 4 + 4, 0), s(sbytes / 4 + 4, 0);
  std::vector<uint16_t> a_rows(size_t(8) * 128, kBf16One), out(size_t(8) * 128, 0xFFFF);
  ktune_mxfp4_args a;
  ktune_mxfp4_args_default(&a);
  a.a = a_rows.data();
  a.weight_packed = w.data();
  a.weight_scales = s.data();
  a.c = out.data();
  a.m = 8;
  const std::vector<std::pair<std::vector<int32_t>, std::string>> bad = {
      {{0, 2, 1000000000, 8, 8}, "expert_offsets[2]: expected a row offset in [2, 8]"},
      {{-5, 2, 4, 8, 8}, "expert_offsets[0]: expected a row offset in [0, 8]"},
      {{0, 4, 2, 8, 8}, "expert_offsets[2]: expected a row offset in [4, 8]"},
  };
  for (const auto& [offsets, message] : bad) {
    a.expert_offsets = offsets.data();
    CHECK(ktune_mxfp4_grouped_gemm_host(c.rt, key, &a, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains(message));
    CHECK(out[0] == 0xFFFF);
  }
}

TEST_CASE("C API prepared op on the host device: run_on_device(KTUNE_HOST_DEVICE) runs the host call, plan says why not",
          "[capi][host][xqa]") {
  KTUNE_REQUIRE_HOST();
  CRuntime c;
  ktune_op* op = nullptr;
  REQUIRE(ktune_op_prepare(c.rt, "xqa_decode", kXqaKey, &op) == KTUNE_OK);
  ktune_status run = KTUNE_ERROR_INTERNAL, plan = KTUNE_OK;
  std::string plan_message;
  XqaCase x;
  std::thread([&] {  // a thread of its own: the host device is per thread
    ktune_xqa_args a = x.args();
    run = ktune_op_run_on_device(op, &a, nullptr, KTUNE_HOST_DEVICE);
    const char* json = nullptr;
    plan = ktune_op_plan(op, &a, &json);
    plan_message = ktune_last_error();
  }).join();
  CHECK(run == KTUNE_OK);
  CHECK(all_finite_bf16(x.out));
  CHECK(plan == KTUNE_ERROR_UNSUPPORTED);
  CHECK_THAT(plan_message, Catch::Contains("this thread's device is the host CPU"));

  // A refused run changes nothing, the thread's device included: the plan on that thread is then not the host's
  // "unsupported" (on a machine without a GPU it fails for want of one).
  ktune_status refused = KTUNE_OK;
  std::string refused_message;
  std::thread([&] {
    ktune_xqa_args a = x.args();
    a.struct_size = 3;
    refused = ktune_op_run_on_device(op, &a, nullptr, KTUNE_HOST_DEVICE);
    refused_message = ktune_last_error();
    a = x.args();
    const char* json = nullptr;
    plan = ktune_op_plan(op, &a, &json);
  }).join();
  CHECK(refused == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(refused_message, Catch::Contains("ktune_op_run_on_device") && Catch::Contains("struct_size"));
  CHECK(plan != KTUNE_ERROR_UNSUPPORTED);
  ktune_op_free(op);
}
