// Prepared ops without a GPU: what prepare() and run() refuse before any driver call, device-free plans, and the
// C API's argument-struct header (struct_size, family_id).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>

#include <string>
#include <thread>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "ktune/xqa_decode.hpp"
#include "support/c_runtime.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

namespace {

RuntimeOptions temp_options(const test::TempDir& dir) {
  RuntimeOptions o;
  o.cache_path = dir.file("ops.db");
  return o;
}

ktune_runtime* c_runtime(const test::TempDir&, const std::string& db) { return test::c_runtime(db); }

}  // namespace

TEST_CASE("prepare validates the static problem once and names the field", "[op]") {
  test::TempDir dir;
  Runtime rt(temp_options(dir));
  xqa::Problem bad;
  bad.num_kv_heads = 5;  // 32 query heads do not split into 5 groups
  try {
    xqa::prepare(rt, bad);
    FAIL("prepare accepted a bad problem");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains("num_kv_heads"));
  }
  XqaDecodeOp empty;
  CHECK_FALSE(empty);
  CHECK_THROWS_WITH(empty.run(XqaDecodeArgs{}, nullptr), Catch::Contains("expected a prepared op"));
}

TEST_CASE("op.run checks the run-time arguments before any driver call", "[op]") {
  test::TempDir dir;
  Runtime rt(temp_options(dir));
  xqa::Problem p;
  p.mask = xqa::MaskKind::None;
  XqaDecodeOp op = xqa::prepare(rt, p);
  CHECK(op.problem_key() == p.key());
  XqaDecodeArgs a;
  a.batch = 2;
  a.max_seq_len = 1024;
  CHECK_THROWS_WITH(op.run(a, nullptr), Catch::Contains("q: expected a device pointer, got null"));
  a.batch = 0;
  CHECK_THROWS_WITH(op.run(a, nullptr), Catch::Contains("batch: expected 1..65535"));
  a.batch = 2;
  a.num_splits = 5000;
  CHECK_THROWS_WITH(op.plan(a), Catch::Contains("num_splits"));

  mla::Problem mp;
  SparseMlaDecodeOp mop = mla::prepare(rt, mp);
  SparseMlaDecodeArgs ma;
  ma.num_tokens = 70000;
  CHECK_THROWS_WITH(mop.run(ma, nullptr), Catch::Contains("num_tokens: expected 0..65535"));

  mxfp4::Problem xp;
  xp.n = 256, xp.k = 256;
  Mxfp4GemmOp xop = mxfp4::prepare(rt, xp);
  Mxfp4GemmArgs xa;
  xa.m = 4;
  CHECK_THROWS_WITH(xop.run(xa, nullptr), Catch::Contains("weight.layout_version"));
  // Rows no config can launch are refused before any module is loaded or compiled.
  alignas(16) static unsigned char device_stand_in[64];
  xa.weight = Mxfp4Weight{mxfp4::packed_layout_version(), xp.n, xp.k, 1, device_stand_in, device_stand_in};
  xa.a = device_stand_in;
  xa.c = device_stand_in;
  xa.m = 65535 * 256 + 1;
  CHECK_THROWS_WITH(mxfp4_gemm_validate(xp, xa), Catch::Contains("m: expected at most 16776960 rows"));
  CHECK_THROWS_WITH(xop.run(xa, nullptr), Catch::Contains("m: expected at most 16776960 rows"));
  xa.m = 65535 * 256;
  CHECK_NOTHROW(mxfp4_gemm_validate(xp, xa));
}

TEST_CASE("an op plans without a GPU when config and split count are forced", "[op]") {
  test::TempDir dir;
  Runtime rt(temp_options(dir));
  xqa::Problem p;
  XqaDecodeOp op = xqa::prepare(rt, p);
  XqaDecodeArgs a;
  a.batch = 3;
  a.max_seq_len = 9000;
  a.config = "t64.s3.w4";
  a.num_splits = 4;
  const XqaDecodePlan plan = op.plan(a);
  CHECK(plan.source == "forced");
  CHECK(plan.config == "t64.s3.w4");
  CHECK(plan.num_splits == 4);
  CHECK(plan.workspace_bytes == xqa_decode_workspace_bytes(rt, p, 3, 9000, "t64.s3.w4", 4));
  CHECK(plan.workspace_bytes > 0);
  a.config = "t64.s3";  // not a config key
  CHECK_THROWS_WITH(op.plan(a), Catch::Contains("config: expected a config key"));

  // On a thread whose device is the host CPU, plan() still describes the GPU launch (the free *_plan and
  // *_workspace_bytes functions are built on it): the same forced plan.
  std::string host_thread_config;
  a.config = "t64.s3.w4";
  std::thread([&] {
    use_device(kHostDevice);
    host_thread_config = op.plan(a).config;
  }).join();
  CHECK(host_thread_config == "t64.s3.w4");
}

TEST_CASE("programmatic dependent launch is an op setting the C++ and C ops accept", "[op][pdl]") {
  test::TempDir dir;
  Runtime rt(temp_options(dir));
  XqaDecodeOp op = xqa::prepare(rt, xqa::Problem{});
  op.set_pdl(true);
  op.set_pdl(false);
  XqaDecodeOp empty;
  CHECK_THROWS_WITH(empty.set_pdl(true), Catch::Contains("expected a prepared op"));
  mla::prepare(rt, mla::Problem{}).set_pdl(true);

  const std::string db = dir.file("c.db");
  ktune_runtime* crt = c_runtime(dir, db);
  ktune_op* cop = nullptr;
  REQUIRE(ktune_op_prepare(crt, "xqa_decode", "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", &cop) == KTUNE_OK);
  CHECK(ktune_op_set_pdl(cop, 1) == KTUNE_OK);
  CHECK(ktune_op_set_pdl(nullptr, 1) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("op must not be NULL"));
  ktune_op_free(cop);
  ktune_runtime_destroy(crt);
}

TEST_CASE("ktune_op_prepare and ktune_op_run refuse what they cannot run, naming it", "[op][capi]") {
  test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime* rt = c_runtime(dir, db);
  ktune_op* op = nullptr;
  CHECK(ktune_op_prepare(rt, "no_such_family", "x", &op) == KTUNE_ERROR_NOT_FOUND);
  CHECK(op == nullptr);
  CHECK(ktune_op_prepare(rt, "xqa_decode", "not-a-key", &op) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_op_prepare(rt, "xqa_decode", "{\"head_dim\": 128, \"num_q_heads\": 32, \"num_kv_heads\": 8, "
                                           "\"page_size\": 32}", &op) == KTUNE_OK);
  REQUIRE(op != nullptr);

  ktune_sparse_mla_args other;
  ktune_sparse_mla_args_default(&other);
  CHECK(ktune_op_run(op, &other, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.family_id") && Catch::Contains("xqa_decode"));

  ktune_xqa_args a;
  ktune_xqa_args_default(&a);
  CHECK(a.struct_size == sizeof(ktune_xqa_args));
  CHECK(a.family_id == ktune_family_id("xqa_decode"));
  CHECK(a.family_id == c_family_id("xqa_decode"));
  a.struct_size = 12;
  CHECK(ktune_op_run(op, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.struct_size"));
  {
    // A caller built against the struct before its strided/pair/device-scale fields: accepted, and its missing
    // tail read as zero (the bytes past its struct_size here are garbage and must not be read).
    ktune_xqa_args older;
    std::memset(&older, 0xAB, sizeof older);
    ktune_xqa_args_default(&a);
    std::memcpy(&older, &a, offsetof(ktune_xqa_args, q_stride_token));
    older.struct_size = offsetof(ktune_xqa_args, q_stride_token);
    older.batch = 2, older.max_seq_len = 4096, older.config = "t64.s3.w4", older.num_splits = 2;
    const char* older_plan = nullptr;
    REQUIRE(ktune_op_plan(op, &older, &older_plan) == KTUNE_OK);
    CHECK_THAT(older_plan, Catch::Contains("\"num_splits\":2"));
    older.q = reinterpret_cast<const void*>(uintptr_t{0x10000});
    older.kv_cache = nullptr;
    CHECK(ktune_op_run(op, &older, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("kv_cache:") && Catch::Contains("got neither"));
    CHECK(ktune_xqa_decode(rt, "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", &older, nullptr) ==
          KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("got neither"));
    older.struct_size = offsetof(ktune_xqa_args, q_stride_token) + 8;  // no size this library ever had
    CHECK(ktune_op_run(op, &older, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("args.struct_size"));
  }
  {
    // A caller built against that older header: its *_default fills its own, shorter struct (nothing written
    // past it) and stamps its size, and every call reads that struct with the missing tail zero.
    struct OlderXqaArgs {
      unsigned char fields[offsetof(ktune_xqa_args, q_stride_token)];
      uint64_t canary;
    } old_caller;
    old_caller.canary = 0x0123456789abcdefull;
    REQUIRE(ktune_xqa_args_init(reinterpret_cast<ktune_xqa_args*>(&old_caller), sizeof old_caller.fields) ==
            KTUNE_OK);
    CHECK(old_caller.canary == 0x0123456789abcdefull);
    ktune_xqa_args seen;
    std::memcpy(&seen, old_caller.fields, sizeof old_caller.fields);
    CHECK(seen.struct_size == offsetof(ktune_xqa_args, q_stride_token));
    CHECK(seen.family_id == ktune_family_id("xqa_decode"));
    ktune_xqa_args_default(&a);
    CHECK(seen.softmax_scale == a.softmax_scale);
    CHECK(seen.q_scale == a.q_scale);
    seen.batch = 2, seen.max_seq_len = 4096, seen.config = "t64.s3.w4", seen.num_splits = 3;
    std::memcpy(old_caller.fields, &seen, sizeof old_caller.fields);
    const char* plan = nullptr;
    REQUIRE(ktune_op_plan(op, old_caller.fields, &plan) == KTUNE_OK);
    CHECK_THAT(plan, Catch::Contains("\"num_splits\":3"));
    // A size that is no form of the struct, or none at all, is refused and nothing is written.
    CHECK(ktune_xqa_args_init(reinterpret_cast<ktune_xqa_args*>(&old_caller), 12) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("struct_size") && Catch::Contains("12"));
    CHECK(ktune_xqa_args_init(nullptr, sizeof(ktune_xqa_args)) == KTUNE_ERROR_INVALID_ARGUMENT);
  }
  {
    // A caller built against a newer header (a field appended): filled with its unknown tail zero, taken while
    // that field is zero ("as before"), refused, naming the byte, once it is set (never silently ignored).
    struct NewerXqaArgs {
      ktune_xqa_args known;
      int64_t future_field;
      uint64_t canary;
    } newer;
    std::memset(&newer, 0xAB, sizeof newer);
    newer.canary = 0x0123456789abcdefull;
    const size_t newer_size = offsetof(NewerXqaArgs, canary);
    REQUIRE(ktune_xqa_args_init(&newer.known, newer_size) == KTUNE_OK);
    CHECK(newer.known.struct_size == newer_size);
    CHECK(newer.future_field == 0);
    CHECK(newer.canary == 0x0123456789abcdefull);
    newer.known.batch = 2, newer.known.max_seq_len = 4096, newer.known.config = "t64.s3.w4";
    newer.known.num_splits = 2;
    const char* plan = nullptr;
    REQUIRE(ktune_op_plan(op, &newer, &plan) == KTUNE_OK);
    CHECK_THAT(plan, Catch::Contains("\"num_splits\":2"));
    newer.future_field = 7;
    CHECK(ktune_op_plan(op, &newer, &plan) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("byte " + std::to_string(sizeof(ktune_xqa_args))) &&
                                       Catch::Contains("does not know"));
    CHECK(ktune_xqa_decode(rt, "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", &newer.known, nullptr) ==
          KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("does not know"));
    newer.known.struct_size = 1u << 20;  // an uninitialized size: refused before the bytes past the header
    CHECK(ktune_op_plan(op, &newer, &plan) == KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("args.struct_size"));
  }
  {
    // The same for sparse_mla_decode's struct before its q strides: garbage past it would be a bad q stride.
    ktune_sparse_mla_args mla_old;
    std::memset(&mla_old, 0xAB, sizeof mla_old);
    ktune_sparse_mla_args mla_def;
    ktune_sparse_mla_args_default(&mla_def);
    std::memcpy(&mla_old, &mla_def, offsetof(ktune_sparse_mla_args, q_stride_token));
    mla_old.struct_size = offsetof(ktune_sparse_mla_args, q_stride_token);
    mla_old.q = reinterpret_cast<const void*>(uintptr_t{0x10000});
    mla_old.num_tokens = 1;
    CHECK(ktune_sparse_mla_decode(rt, "h128.r512.d64.k2048.p64.bf16-fp8ds.q1", &mla_old, nullptr) ==
          KTUNE_ERROR_INVALID_ARGUMENT);
    CHECK_THAT(ktune_last_error(), Catch::Contains("kv_cache:"));
  }
  ktune_xqa_args_default(&a);
  a.batch = 1, a.max_seq_len = 100;
  CHECK(ktune_op_run(op, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);  // no pointers: the first is named
  CHECK_THAT(ktune_last_error(), Catch::Contains("q: expected a device pointer"));
  // The one-shot call checks the header too.
  a.family_id = 7;
  CHECK(ktune_xqa_decode(rt, "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", &a, nullptr) ==
        KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("args.family_id"));

  ktune_xqa_args_default(&a);
  a.batch = 2, a.max_seq_len = 4096, a.config = "t64.s3.w4", a.num_splits = 2;
  const char* plan = nullptr;
  REQUIRE(ktune_op_plan(op, &a, &plan) == KTUNE_OK);
  CHECK_THAT(plan, Catch::Contains("\"source\":\"forced\"") && Catch::Contains("\"num_splits\":2"));
  CHECK(ktune_op_run_on_device(op, &a, nullptr, -5) != KTUNE_OK);  // no such device (or no driver): refused
  CHECK(ktune_op_run(nullptr, &a, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK(ktune_op_run(op, nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  ktune_op_free(op);
  ktune_runtime_destroy(rt);
}
