// The tuning workloads' inputs, which the GPU and host workloads of a family share (workload_inputs.hpp,
// autotune/workload_support.hpp): checked on the CPU, so what the GPU tuner times is what these tests saw.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "support/error_of.hpp"
#include "autotune/workload_support.hpp"
#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "mxfp4_gemm/workload_inputs.hpp"
#include "sparse_mla_decode/workload_inputs.hpp"
#include "xqa_decode/workload_inputs.hpp"

using namespace ktune;
using namespace ktune::autotune;
namespace kc = ::ktune_common;
namespace ws = ktune::autotune::workload_support;

namespace {

using test::error_of;

}  // namespace

TEST_CASE("workload_support: buckets by name, an unknown name is refused, naming what the family tunes",
          "[autotune]") {
  const auto b = ws::read_buckets({{"l", 4096}, {"b", 8}}, "fam workload", {"b", "l"}, "fam tunes b and l");
  CHECK(b.at("b") == 8);
  CHECK(b.at("l") == 4096);
  CHECK(error_of([] { ws::read_buckets({{"m", 1}}, "fam workload", {"b"}, "fam tunes b"); }) ==
        "ktune fam workload: unknown bucket 'm' (fam tunes b)");
}

TEST_CASE("workload_support: random values are reproducible per seed and never zero in their dtype", "[autotune]") {
  for (int dtype : {int(kc::kBF16), int(kc::kFP16), int(kc::kE4M3), int(kc::kF32)}) {
    CAPTURE(dtype);
    const size_t n = 200000;  // enough that e4m3 rounds hundreds of N(0, 1) draws to zero before the fix-up
    const auto a = ws::random_values(dtype, n, 7);
    REQUIRE(a.size() == n * size_t(kc::dtype_size(dtype)));
    CHECK(a == ws::random_values(dtype, n, 7));
    CHECK(a != ws::random_values(dtype, n, 8));
    double sum = 0, sq = 0;
    size_t zeros = 0;
    for (size_t i = 0; i < n; ++i) {
      const float v = kc::to_float(dtype, a.data(), static_cast<long long>(i));
      zeros += v == 0.f;
      sum += v;
      sq += double(v) * v;
    }
    CHECK(zeros == 0);
    CHECK(std::fabs(sum / n) < 0.02);          // about unit scale, centred
    CHECK(std::fabs(sq / n - 1.0) < 0.05);
  }
}

TEST_CASE("workload_support: a pool tiled over a buffer covers it exactly with whole granules", "[autotune]") {
  std::vector<unsigned char> pool(10 * 12);
  std::iota(pool.begin(), pool.end(), 0);
  const size_t bytes = 12 * 37;
  std::vector<int> written(bytes, 0);
  std::vector<unsigned char> out(bytes);
  ws::tile_pool(bytes, pool, 12, 3, [&](size_t off, const unsigned char* src, size_t n) {
    CHECK((src - pool.data()) % 12 == 0);  // a piece starts on a granule of the pool
    CHECK(n <= 5 * 12);                    // and is at most half of it
    CHECK(size_t(src - pool.data()) + n <= pool.size());
    for (size_t i = 0; i < n; ++i) ++written[off + i];
    std::memcpy(out.data() + off, src, n);
  });
  CHECK(std::all_of(written.begin(), written.end(), [](int w) { return w == 1; }));
  for (size_t g = 0; g < bytes / 12; ++g) CHECK(out[g * 12] % 12 == 0);  // every granule whole
  std::vector<unsigned char> direct(bytes);
  ws::tile_pool(direct.data(), bytes, pool, 12, 3);
  CHECK(direct == out);
  CHECK(error_of([&] { ws::tile_pool(bytes, std::vector<unsigned char>(20), 12, 0, [](size_t, const unsigned char*, size_t) {}); })
            .find("fewer than 2 granules") != std::string::npos);
}

TEST_CASE("workload_support: host copies exceed 64 MiB in total, within the cap", "[autotune]") {
  CHECK(ws::host_copies(size_t{1} << 30, 0, 4, "w", "b1") == 1);
  CHECK(ws::host_copies(size_t{40} << 20, 0, 4, "w", "b1") == 2);
  CHECK(ws::host_copies(size_t{1} << 20, 0, 4, "w", "b1") == 4);
  CHECK(ws::host_copies(0, 0, 4, "w", "b1") == 4);
}

TEST_CASE("workload_support: host inputs larger than the host's memory are refused before any allocation",
          "[autotune]") {
  // A petabyte of inputs (an explicit `ktune tune --arch host` of a huge bucket) is an error naming the bucket and
  // the sizes, not std::bad_alloc or a machine driven into swap.
  const size_t huge = size_t{1} << 50;
  const std::string e = test::error_of([&] { ws::host_copies(huge, 0, 4, "xqa_decode host workload", "b4096 l131072"); });
  CHECK_THAT(e, Catch::Matches("ktune xqa_decode host workload: b4096 l131072 needs 1125899\\.91 GB of host memory for "
                               "its inputs and outputs, [0-9.]+ GB available"));
  CHECK_FALSE(test::error_of([&] { ws::host_copies(1024, huge, 4, "w", "m8"); }).empty());  // outputs count too
}

TEST_CASE("xqa_decode tuning inputs: a shuffled table of every page, full requests, the problem's extras",
          "[autotune]") {
  xqa::Problem p = xqa::Problem::from_key("d128.h32.kv8.p16.hnd.bf16-bf16-bf16.q4.mask.sink.win.lse");
  const XqaInputs in = xqa_inputs(p, {{"b", 3}, {"l", 100}}, "xqa_decode workload", 11);
  const int pages_per_req = (100 + 15) / 16;
  CHECK(in.batch == 3);
  CHECK(in.seq_len == 100);
  REQUIRE(in.block_tables.size() == size_t(3 * pages_per_req));
  std::vector<int32_t> sorted = in.block_tables;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(sorted.size());
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);
  CHECK(in.seq_lens == std::vector<int32_t>(3, 100));
  CHECK(in.kv_bytes == size_t(3 * pages_per_req) * 2 * 8 * 16 * 128 * 2);
  CHECK(in.q_bytes == size_t(3 * 4) * 32 * 128 * 2);
  CHECK(in.out_bytes == in.q_bytes);
  // A 1024-token window reads all of a 100-token request.
  CHECK(in.bytes_per_call == Approx(3.0 * 100 * 2 * 8 * 128 * 2 + in.q_bytes + in.out_bytes));
  CHECK(in.flops_per_call == Approx(4.0 * 4 * 4 * 100 * 128 * 8 * 3));
  CHECK(in.args.batch == 3);
  CHECK(in.args.num_tokens == 12);
  CHECK(in.args.q_len_per_req == 4);
  CHECK(in.args.max_pages_per_req == pages_per_req);
  CHECK(in.args.num_pages == 3 * pages_per_req);
  CHECK(in.args.max_seq_len == 100);
  CHECK(in.args.window_left == 1024);
  CHECK(in.args.q == nullptr);
  REQUIRE(in.sinks.size() == 32);
  for (float s : in.sinks) CHECK((s >= -1.f && s <= 3.f));
  const int words = kc::draft_mask_words(4);
  REQUIRE(in.mask.size() == size_t(12) * words * 2);
  for (int row = 0; row < 12; ++row)
    for (int j = 0; j < 4; ++j) {
      const bool visible = kc::draft_mask_visible(in.mask.data(), row, words, j);
      if (j == row % 4) CHECK(visible);  // each draft token sees itself
      if (j > row % 4) CHECK_FALSE(visible);  // and none after it
    }
  // The same seed gives the same inputs; bad buckets are refused.
  CHECK(xqa_inputs(p, {{"b", 3}, {"l", 100}}, "w", 11).block_tables == in.block_tables);
  CHECK(error_of([&] { xqa_inputs(p, {{"b", 70000}, {"l", 100}}, "xqa_decode workload", 1); }) ==
        "ktune xqa_decode workload: bucket b: expected 1..65535, got 70000");
  CHECK(error_of([&] { xqa_inputs(p, {{"b", 1}}, "xqa_decode workload", 1); }) ==
        "ktune xqa_decode workload: bucket l: expected 1..2147483647, got 0");
  CHECK(error_of([&] { xqa_inputs(p, {{"b", 1}, {"l", 8}, {"m", 2}}, "xqa_decode workload", 1); }) ==
        "ktune xqa_decode workload: unknown bucket 'm' (xqa_decode tunes b = batch and l = seq_len)");
}

TEST_CASE("sparse_mla_decode tuning inputs: topk distinct slots of each token's request region", "[autotune]") {
  for (const char* key : {"h16.r512.d64.k256.p64.bf16-fp8ds.q2", "h16.r512.d64.k128.p16.bf16-bf16.q1"}) {
    CAPTURE(key);
    const mla::Problem p = mla::Problem::from_key(key);
    const MlaInputs in = mla_inputs(p, {{"b", 3}}, "sparse_mla_decode workload", 5);
    CHECK(in.num_tokens == 3 * p.max_q_len);
    const int64_t region = 4 * int64_t{p.topk};
    const int64_t pages_per_req = (region + p.page_size - 1) / p.page_size;
    CHECK(in.args.num_pages == 3 * pages_per_req);
    CHECK(in.kv_bytes == size_t(in.args.num_pages) * p.page_size * p.row_bytes());
    REQUIRE(in.indices.size() == size_t(in.num_tokens) * p.topk);
    for (int t = 0; t < in.num_tokens; ++t) {
      const int64_t lo = int64_t{t / p.max_q_len} * pages_per_req * p.page_size;
      const auto first = in.indices.begin() + int64_t{t} * p.topk;
      const std::set<int32_t> slots(first, first + p.topk);
      CHECK(slots.size() == size_t(p.topk));
      CHECK(*slots.begin() >= lo);
      CHECK(*slots.rbegin() < lo + region);
    }
    CHECK(in.flops_per_call == Approx(2.0 * in.num_tokens * p.num_heads * p.topk * (p.dim() + p.kv_lora_rank)));
    CHECK(in.args.softmax_scale == Approx(1.0 / std::sqrt(double(p.dim()))));
  }
  const mla::Problem p = mla::Problem::from_key("h16.r512.d64.k256.p64.bf16-fp8ds.q4");
  CHECK(error_of([&] { mla_inputs(p, {{"b", 20000}}, "sparse_mla_decode workload", 1); }) ==
        "ktune sparse_mla_decode workload: bucket b: 20000 requests x max_q_len 4 exceed 65535 tokens");
  CHECK(error_of([&] { mla_inputs(p, {}, "sparse_mla_decode workload", 1); }) ==
        "ktune sparse_mla_decode workload: bucket b: expected >= 1, got 0");
}

TEST_CASE("sparse_mla_decode tuning rows: fp8_ds_mla tiles scaled to the e4m3 range, real scales and rope",
          "[autotune]") {
  const mla::Problem p = mla::Problem::from_key("h16.r512.d64.k256.p64.bf16-fp8ds.q1");
  const int rb = p.row_bytes(), lat = p.kv_lora_rank;
  const std::vector<unsigned char> rows = mla_row_pool(p, 16, 3);
  REQUIRE(rows.size() == size_t(16) * rb);
  for (int r = 0; r < 16; ++r) {
    const unsigned char* row = rows.data() + size_t(r) * rb;
    for (int t = 0; t < lat / 128; ++t) {
      float scale;
      std::memcpy(&scale, row + lat + 4 * t, 4);
      CHECK((std::isfinite(scale) && scale > 0.f));
      float amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(kc::e4m3_to_float(row[t * 128 + i])));
      CHECK(amax == 448.f);  // the tile's largest value maps to the top of e4m3
    }
    for (int i = 0; i < p.rope_dim; ++i) {
      uint16_t h;
      std::memcpy(&h, row + lat + 4 * (lat / 128) + 2 * i, 2);
      CHECK(kc::bf16_to_float(h) != 0.f);
    }
  }
}

TEST_CASE("mxfp4_gemm tuning inputs: rows routed over the experts, or split evenly when a bench asks", "[autotune]") {
  const mxfp4::Problem p = mxfp4::Problem::from_key("n256.k128.e8.top2.bf16-bf16");
  const Mxfp4Inputs in = mxfp4_inputs(p, {{"m", 13}}, "mxfp4_gemm workload", 1 << 22, true, 9);
  CHECK(in.rows == 26);
  REQUIRE(in.offsets.size() == 9);
  CHECK(in.offsets.front() == 0);
  CHECK(in.offsets.back() == 26);
  CHECK(std::is_sorted(in.offsets.begin(), in.offsets.end()));
  std::vector<int> used;
  for (int e = 0; e < 8; ++e)
    if (in.offsets[e + 1] > in.offsets[e]) used.push_back(e);
  CHECK(in.experts_used == used);
  CHECK(in.bytes_per_call ==
        Approx(double(used.size()) * (in.expert_weight_bytes + in.expert_scale_bytes) + 26.0 * 128 * 2 + 26.0 * 256 * 2));
  CHECK(in.flops_per_call == Approx(2.0 * 26 * 256 * 128));

  const Mxfp4Inputs even = mxfp4_inputs(p, {{"m", 16}, {"equal_rows", 1}}, "mxfp4_gemm workload", 1 << 22, true, 9);
  for (int e = 0; e < 8; ++e) CHECK(even.offsets[e + 1] - even.offsets[e] == 4);

  const mxfp4::Problem dense = mxfp4::Problem::from_key("n256.k128.bf16-bf16");
  const Mxfp4Inputs d = mxfp4_inputs(dense, {{"m", 5}}, "mxfp4_gemm workload", 1 << 22, true, 9);
  CHECK(d.rows == 5);
  CHECK(d.offsets.empty());
  CHECK(d.experts_used == std::vector<int>{0});

  CHECK(error_of([&] { mxfp4_inputs(p, {{"m", 4}, {"equal_rows", 1}}, "mxfp4_gemm host workload", 1 << 16, false, 1); }) ==
        "ktune mxfp4_gemm host workload: unknown bucket 'equal_rows' (mxfp4_gemm tunes m = tokens)");
  CHECK(error_of([&] { mxfp4_inputs(p, {{"m", 70000}}, "mxfp4_gemm host workload", 1 << 16, false, 1); }) ==
        "ktune mxfp4_gemm host workload: bucket m: expected 1..65536, got 70000");

  const Mxfp4WeightPools pools = mxfp4_weight_pools(4096, 2);
  REQUIRE(pools.scale.size() == 4096);
  CHECK(std::all_of(pools.scale.begin(), pools.scale.end(), [](unsigned char s) { return s >= 117 && s <= 127; }));
  CHECK(std::set<unsigned char>(pools.weight.begin(), pools.weight.end()).size() > 200);  // random codes
}
