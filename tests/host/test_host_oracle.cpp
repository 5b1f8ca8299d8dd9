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
#include "ktune/xqa_decode_host.hpp"
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
  RuntimeOptions o = RuntimeOptions::from_env();
  if (!std::getenv("KTUNE_CACHE")) o.cache_path = dir.file("oracle.db");
  Runtime rt(o);

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
    // (bench/run_h200_oracle.sh) rather than compare outputs of different inputs.
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
