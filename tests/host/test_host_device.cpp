// The host CPU as a device (ktune::use_device(ktune::kHostDevice), runtime.hpp): on that thread the family
// launches -- the same xqa_decode / sparse_mla_decode / mxfp4_gemm an engine calls for a GPU -- run the host
// variants on host pointers. Each is checked against the family's *_host call on the same inputs (bit for bit:
// same kernel, config and work split), and the direct host calls are checked against fp64 references by the
// other [host] tests. Runs on its own std::thread because the setting is per thread.
#include <catch2/catch.hpp>

#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "host/host_support.hpp"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "support/cache_file.hpp"
#include "support/family_oracle.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_oracle.hpp"

using namespace ktune;

namespace {

// Runs f on a fresh thread and rethrows what it threw (Catch2 assertions stay on the test's thread).
template <class F>
void on_thread(F&& f) {
  std::exception_ptr err;
  std::thread t([&] {
    try {
      f();
    } catch (...) {
      err = std::current_exception();
    }
  });
  t.join();
  if (err) std::rethrow_exception(err);
}

}  // namespace

TEST_CASE("use_device(kHostDevice) is per thread and needs no driver", "[host][host_device]") {
  bool here = true, there = false;
  on_thread([&] {
    use_device(kHostDevice);
    there = host_device_current();
  });
  here = host_device_current();
  CHECK(there);
  CHECK_FALSE(here);
  // Any other negative ordinal is still a bad argument, naming it (or no_driver on a machine without one).
  try {
    use_device(-2);
    FAIL("use_device(-2) returned");
  } catch (const Error& e) {
    CHECK((e.status() == Status::invalid_argument || e.status() == Status::no_driver));
  }
}

TEST_CASE("family launches on the host device run the host variants", "[host][host_device]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host_device.db")));
  const uint64_t seed = test::run_seed("[host][host_device]");
  INFO("seed " << seed << " (KTUNE_TEST_SEED replays it)");

  SECTION("xqa_decode") {
    const test::OracleCase oc = test::oracle_cases()[2];  // e4m3 KV, sinks, LSE
    const test::XqaRandomCase c = test::make_oracle_case(oc, seed);
    const size_t rows = size_t(c.num_tokens) * oc.problem.num_q_heads;
    const size_t bytes = rows * oc.problem.head_dim * ::ktune_common::dtype_size(int(oc.problem.out_dtype));
    std::vector<unsigned char> direct(bytes, 0xFF), via(bytes, 0xEE);
    std::vector<float> lse_direct(rows, -1.f), lse_via(rows, -2.f);
    xqa_decode_host(rt, oc.problem, test::host_args(c, direct.data(), lse_direct.data()));
    on_thread([&] {
      use_device(kHostDevice);
      xqa_decode(rt, oc.problem, test::host_args(c, via.data(), lse_via.data()), nullptr);
    });
    CHECK(via == direct);
    CHECK(lse_via == lse_direct);
  }
  SECTION("sparse_mla_decode") {
    const test::MlaOracleCase oc = test::mla_oracle_cases()[0];  // fp8_ds_mla, sinks
    const test::MlaCase c = test::make_mla_oracle_case(oc, seed);
    const size_t rows = size_t(c.opt.num_tokens) * oc.problem.num_heads;
    std::vector<uint16_t> direct(rows * oc.problem.kv_lora_rank, 0xFFFF), via(direct.size(), 0xEEEE);
    std::vector<float> lse_direct(rows, -1.f), lse_via(rows, -2.f);
    auto args = [&](std::vector<uint16_t>& out, std::vector<float>& lse) {
      SparseMlaDecodeArgs a;
      a.q = c.q.data();
      a.kv_cache = c.kv.data();
      a.indices = c.indices.data();
      a.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
      a.out = out.data();
      a.lse = lse.data();
      a.num_tokens = c.opt.num_tokens;
      a.num_pages = c.num_pages;
      a.softmax_scale = c.softmax_scale;
      return a;
    };
    sparse_mla_decode_host(rt, oc.problem, args(direct, lse_direct));
    on_thread([&] {
      use_device(kHostDevice);
      sparse_mla_decode(rt, oc.problem, args(via, lse_via), nullptr);
    });
    CHECK(via == direct);
    CHECK(lse_via == lse_direct);
  }
  SECTION("mxfp4_gemm (grouped)") {
    const test::Mxfp4OracleCase oc = test::mxfp4_oracle_cases().back();  // grouped, uneven and empty experts
    const mxfp4::Problem& p = oc.problem;
    REQUIRE(p.grouped());
    const test::Mxfp4OracleInputs in = test::make_mxfp4_oracle_inputs(oc, seed);
    std::vector<uint8_t> pw(mxfp4::packed_weight_bytes(p.n, p.k, p.num_experts)),
        ps(mxfp4::packed_scale_bytes(p.n, p.k, p.num_experts));
    mxfp4::prepack_host(in.w.data(), in.s.data(), p.n, p.k, p.num_experts, pw.data(), ps.data());
    std::vector<uint16_t> direct(size_t(oc.m) * p.n, 0xFFFF), via(direct.size(), 0xEEEE);
    auto args = [&](std::vector<uint16_t>& c) {
      Mxfp4GemmArgs a;
      a.a = in.a.data();
      a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p.n, p.k, p.num_experts, pw.data(), ps.data()};
      a.bias = in.bias.data();
      a.c = c.data();
      a.m = oc.m;
      a.expert_offsets = oc.offsets.data();
      return a;
    };
    mxfp4_gemm_host(rt, p, args(direct));
    on_thread([&] {
      use_device(kHostDevice);
      mxfp4_gemm(rt, p, args(via), nullptr);
    });
    CHECK(via == direct);
  }
}
