// The host half of the host-backend oracle (tests/support/xqa_oracle.hpp): the GPU outputs recorded on the
// H200 (tests/data/xqa_h200_oracle.bin) against the LLVM-compiled host kernel on the same regenerated inputs,
// and both against the fp64 reference. Two independent implementations of the kernel contract (CUDA mma.sync
// with fp16/bf16 P, and fp32 portable C++), compiled by two compilers, must agree.
//
// Tolerances: GPU vs host, relative L2 < 1e-2 for 16-bit outputs (the GPU's own bound against fp64; the host
// is ~5x closer), 8e-2 for e4m3 outputs; every row < 5x that; LSE within 2e-2.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/numerics.cuh"
#include "host/host_support.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "support/cache_file.hpp"
#include "support/family_oracle.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_oracle.hpp"
#include "support/xqa_reference.hpp"

using namespace ktune;
using namespace ktune::xqa;
namespace kc = ::ktune_common;

TEST_CASE("host backend and H200 agree on the recorded xqa_decode oracle cases", "[host][xqa][oracle]") {
  const std::string path = std::string(KTUNE_TEST_DATA_DIR) + "/xqa_h200_oracle.bin";
  const test::OracleFile file = test::read_oracle_file(path);  // committed: a missing file is a failure
  REQUIRE(file.records.size() == test::oracle_cases().size());
  std::printf("oracle fixture: %s\n", file.header.c_str());
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("oracle.db")));

  for (const test::OracleCase& oc : test::oracle_cases()) {
    const test::OracleRecord* rec = nullptr;
    for (const auto& r : file.records)
      if (r.name == oc.name) rec = &r;
    INFO(oc.name);
    REQUIRE(rec != nullptr);
    const Problem& p = oc.problem;
    REQUIRE(rec->problem_key == p.key());
    const test::XqaRandomCase c = test::make_oracle_case(oc, rec->seed);
    // A different digest means the input generator changed since the fixture was recorded: re-record it
    // (bench/run_h200.sh sanitize) rather than compare outputs of different inputs.
    REQUIRE(test::oracle_input_digest(c) == rec->input_digest);

    const size_t rows = size_t(c.num_tokens) * p.num_q_heads;
    const size_t out_bytes = rows * p.head_dim * kc::dtype_size(int(p.out_dtype));
    REQUIRE(rec->out.size() == out_bytes);
    std::vector<unsigned char> host_out(std::max<size_t>(out_bytes, 1), 0xFF);
    std::vector<float> host_lse(std::max<size_t>(rows, 1));
    std::memset(host_lse.data(), 0xFF, host_lse.size() * sizeof(float));
    xqa_decode_host(rt, p, test::host_args(c, host_out.data(), host_lse.data()));

    // Both against fp64 first (each within its own documented bound).
    const test::XqaRefResult ref = test::xqa_reference(p, c.host_params());
    const bool e4 = p.out_dtype == kc::kE4M3;
    const test::XqaCompare gpu_vs_ref =
        test::xqa_compare(p, ref, rec->out.data(), p.write_lse ? rec->lse.data() : nullptr, 0xFF);
    const test::XqaCompare host_vs_ref =
        test::xqa_compare(p, ref, host_out.data(), p.write_lse ? host_lse.data() : nullptr, 0xFF);
    CHECK(gpu_vs_ref.rel_l2 < (e4 ? 8e-2 : 1e-2));
    CHECK(host_vs_ref.rel_l2 < (e4 ? 8e-2 : 5e-3));

    // Then the host output as the oracle for the GPU output.
    test::XqaRefResult host_ref;
    host_ref.written = ref.written;
    host_ref.out.resize(rows * p.head_dim);
    for (size_t k = 0; k < host_ref.out.size(); ++k)
      host_ref.out[k] = kc::to_float(int(p.out_dtype), host_out.data(), (long long)k);
    host_ref.lse.assign(host_lse.begin(), host_lse.begin() + rows);
    const test::XqaCompare gpu_vs_host =
        test::xqa_compare(p, host_ref, rec->out.data(), p.write_lse ? rec->lse.data() : nullptr, 0xFF);
    const double tol = e4 ? 8e-2 : 1e-2;
    CHECK(gpu_vs_host.nonfinite == 0);
    CHECK(gpu_vs_host.clobbered == 0);
    CHECK(gpu_vs_host.rel_l2 < tol);
    CHECK(gpu_vs_host.max_row_rel < 5 * tol);
    if (p.write_lse) CHECK(gpu_vs_host.lse_max_abs < 2e-2);
    std::printf("  %-28s gpu-vs-host %.2e  gpu-vs-fp64 %.2e  host-vs-fp64 %.2e\n", oc.name.c_str(),
                gpu_vs_host.rel_l2, gpu_vs_ref.rel_l2, host_vs_ref.rel_l2);
  }
}

namespace {

// The record of `name` in a fixture, or nullptr.
const test::OracleRecord* find_record(const test::OracleFile& f, const std::string& name) {
  for (const auto& r : f.records)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

// sparse_mla_decode: the H200 outputs (tests/data/mla_h200_oracle.bin, tensor cores with bf16 K/V/P) against
// the host kernel (fp32 throughout) on the same regenerated inputs, and both against fp64.
// Tolerances: each against fp64 within its own test's bound (GPU 1e-2, host 5e-3); GPU vs host rel L2 < 1e-2,
// every row < 3e-2, LSE within 2e-2, a token with no valid index exactly 0 / -inf on both.
TEST_CASE("host backend and H200 agree on the recorded sparse_mla_decode oracle cases", "[host][mla][oracle]") {
  const std::string path = std::string(KTUNE_TEST_DATA_DIR) + "/mla_h200_oracle.bin";
  const test::OracleFile file = test::read_oracle_file(path);  // committed: a missing file is a failure
  REQUIRE(file.records.size() == test::mla_oracle_cases().size());
  std::printf("oracle fixture: %s\n", file.header.c_str());
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("oracle.db")));
  for (const test::MlaOracleCase& oc : test::mla_oracle_cases()) {
    INFO(oc.name);
    const test::OracleRecord* rec = find_record(file, oc.name);
    REQUIRE(rec != nullptr);
    REQUIRE(rec->problem_key == oc.problem.key());
    const test::MlaCase c = test::make_mla_oracle_case(oc, rec->seed);
    REQUIRE(test::mla_input_digest(c) == rec->input_digest);  // else: re-record the fixture
    const size_t rows = size_t(c.opt.num_tokens) * oc.problem.num_heads, lat = size_t(oc.problem.kv_lora_rank);
    REQUIRE(rec->out.size() == rows * lat * 2);
    REQUIRE(rec->lse.size() == rows);

    std::vector<uint16_t> host_out(rows * lat, 0xFFFF);
    std::vector<float> host_lse(rows);
    std::memset(host_lse.data(), 0xFF, rows * sizeof(float));
    SparseMlaDecodeArgs a;
    a.q = c.q.data();
    a.kv_cache = c.kv.data();
    a.indices = c.indices.data();
    a.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
    a.out = host_out.data();
    a.lse = host_lse.data();
    a.num_tokens = c.opt.num_tokens;
    a.num_pages = c.num_pages;
    a.softmax_scale = c.softmax_scale;
    sparse_mla_decode_host(rt, oc.problem, a);

    const test::MlaRef ref = test::mla_reference(c);
    std::vector<uint16_t> gpu_out(rows * lat);
    std::memcpy(gpu_out.data(), rec->out.data(), rec->out.size());
    const test::MlaCompare gpu_vs_ref = test::mla_compare(c, ref, gpu_out.data(), rec->lse.data());
    const test::MlaCompare host_vs_ref = test::mla_compare(c, ref, host_out.data(), host_lse.data());
    CHECK(gpu_vs_ref.rel_l2 < 1e-2);
    CHECK(host_vs_ref.rel_l2 < 5e-3);
    // the recorded H200 LSE within the GPU matrix's bound around the LSE of q . bf16(k) (mla_reference.hpp)
    CHECK(gpu_vs_ref.lse_bad == 0);
    CHECK(gpu_vs_ref.lse_max_ratio < 1);

    test::MlaRef host_ref;
    host_ref.out.resize(rows * lat);
    for (size_t k = 0; k < host_ref.out.size(); ++k) host_ref.out[k] = kc::bf16_to_float(host_out[k]);
    host_ref.lse = host_lse;
    const test::MlaCompare g = test::mla_compare(c, host_ref, gpu_out.data(), rec->lse.data());
    CHECK(g.nonfinite == 0);
    CHECK(g.lse_bad == 0);
    CHECK(g.rel_l2 < 1e-2);
    CHECK(g.max_row_rel < 3e-2);
    CHECK(g.lse_max_abs < 2e-2);
    std::printf("  %-28s gpu-vs-host %.2e  gpu-vs-fp64 %.2e  host-vs-fp64 %.2e  lse |d| %.1e  gpu lse %.2f of bound\n",
                oc.name.c_str(), g.rel_l2, gpu_vs_ref.rel_l2, host_vs_ref.rel_l2, g.lse_max_abs,
                gpu_vs_ref.lse_max_ratio);
  }
}

// mxfp4_gemm: the H200 outputs (tests/data/mxfp4_h200_oracle.bin, bf16/fp16 tensor cores with fp32
// accumulation) against the host kernel (fp32) on the same regenerated inputs, and both against the exact
// fp64 reference. Both kernels decode MXFP4 exactly and accumulate in fp32, so they differ only in summation
// order and the final 16-bit rounding. Bounds: each vs fp64 and GPU vs host rel L2 < 5e-3; every element GPU vs
// host within 2^-7 |ref| + 2^-15 sum|a w| (two 16-bit output roundings plus two fp32 summations, the GPU
// suite's per-element bound doubled); a NaN scale makes the same
// column NaN on both, and nothing else is NaN.
TEST_CASE("host backend and H200 agree on the recorded mxfp4_gemm oracle cases", "[host][mxfp4][oracle]") {
  const std::string path = std::string(KTUNE_TEST_DATA_DIR) + "/mxfp4_h200_oracle.bin";
  const test::OracleFile file = test::read_oracle_file(path);  // committed: a missing file is a failure
  REQUIRE(file.records.size() == test::mxfp4_oracle_cases().size());
  std::printf("oracle fixture: %s\n", file.header.c_str());
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("oracle.db")));
  for (const test::Mxfp4OracleCase& oc : test::mxfp4_oracle_cases()) {
    INFO(oc.name);
    const test::OracleRecord* rec = find_record(file, oc.name);
    REQUIRE(rec != nullptr);
    const mxfp4::Problem& p = oc.problem;
    REQUIRE(rec->problem_key == p.key());
    const test::Mxfp4OracleInputs in = test::make_mxfp4_oracle_inputs(oc, rec->seed);
    REQUIRE(test::mxfp4_input_digest(in) == rec->input_digest);  // else: re-record the fixture
    const size_t elems = size_t(oc.m) * p.n;
    REQUIRE(rec->out.size() == elems * 2);

    std::vector<uint8_t> pw(mxfp4::packed_weight_bytes(p.n, p.k, p.num_experts)),
        ps(mxfp4::packed_scale_bytes(p.n, p.k, p.num_experts));
    mxfp4::prepack_host(in.w.data(), in.s.data(), p.n, p.k, p.num_experts, pw.data(), ps.data());
    std::vector<uint16_t> host_c(std::max<size_t>(elems, 1), 0xFFFF);
    Mxfp4GemmArgs a;
    a.a = in.a.data();
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p.n, p.k, p.num_experts, pw.data(), ps.data()};
    a.bias = oc.bias ? in.bias.data() : nullptr;
    a.c = host_c.data();
    a.m = oc.m;
    a.expert_offsets = oc.offsets.empty() ? nullptr : oc.offsets.data();
    mxfp4_gemm_host(rt, p, a);

    std::vector<double> sabs;
    const std::vector<double> ref = test::mxfp4_oracle_reference(oc, in, &sabs);
    auto f16 = [&](const uint16_t* v, size_t j) {
      return double(p.out_dtype == kc::kBF16 ? kc::bf16_to_float(v[j]) : kc::fp16_to_float(v[j]));
    };
    const uint16_t* gpu = reinterpret_cast<const uint16_t*>(rec->out.data());
    double gh2 = 0, gr2 = 0, hr2 = 0, r2 = 0;
    int64_t nan_mismatch = 0, out_of_bound = 0;
    for (size_t j = 0; j < elems; ++j) {
      const double g = f16(gpu, j), h = f16(host_c.data(), j), r = ref[j];
      if (std::isnan(r) || std::isnan(g) || std::isnan(h)) {
        nan_mismatch += !(std::isnan(r) && std::isnan(g) && std::isnan(h));
        continue;
      }
      gh2 += (g - h) * (g - h);
      gr2 += (g - r) * (g - r);
      hr2 += (h - r) * (h - r);
      r2 += r * r;
      out_of_bound += std::fabs(g - h) > std::ldexp(std::fabs(r), -7) + std::ldexp(sabs[j], -15);
    }
    const double gh = std::sqrt(gh2 / r2), gr = std::sqrt(gr2 / r2), hr = std::sqrt(hr2 / r2);
    CHECK(nan_mismatch == 0);
    CHECK(gr < 5e-3);
    CHECK(hr < 5e-3);
    CHECK(gh < 5e-3);
    CHECK(out_of_bound == 0);
    std::printf("  %-28s gpu-vs-host %.2e  gpu-vs-fp64 %.2e  host-vs-fp64 %.2e  (%s on the GPU)\n", oc.name.c_str(),
                gh, gr, hr, rec->config.c_str());
  }
}

TEST_CASE("the oracle fixture reader refuses damaged files", "[oracle]") {
  test::TempDir dir;
  const std::string path = dir.file("o.bin");
  test::OracleFile f;
  f.header = "unit";
  test::OracleRecord r;
  r.name = "x";
  r.problem_key = "k";
  r.seed = 7;
  r.out = {1, 2, 3};
  r.lse = {1.5f};
  f.records.push_back(r);
  test::write_oracle_file(path, f);
  const test::OracleFile back = test::read_oracle_file(path);
  REQUIRE(back.records.size() == 1);
  CHECK(back.records[0].out == r.out);
  CHECK(back.records[0].lse == r.lse);
  CHECK(back.records[0].seed == 7u);
  // Truncated anywhere: an error, never a short record.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t cut = 0; cut < bytes.size(); cut += 3) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(cut));
    CHECK_THROWS(test::read_oracle_file(path));
  }
}
