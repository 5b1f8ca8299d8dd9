// The 16-head warp-specialized sparse_mla_decode kernel (t64.s2.g16.ws, decode_body_ws16) against the library's
// mma.sync kernel t32.s1.g16 on the same inputs: 16 heads (a tensor-parallel shard of 128), top-k 2048,
// fp8_ds_mla, page 64, about 3% of the entries -1 and one token with every entry -1. Prints rel L2 of the outputs
// and LSE against t32.s1.g16, an FNV-1a hash of the ws kernel's output and LSE bits (equal hashes across two
// builds: bit-identical results), the time per call (median of 30, split-KV combine included) and the KV bytes
// read per second. Beside them the register-fed prototype of mla16_reg.cuh: the same check and time, then its
// f16 form, ring depths and its roles alone (copies, math); then the same forms with the copies on a warpgroup of
// their own (kWs), each checked, and that layout's roles alone. With --sanitize: a small case (top-k 512, 6 tokens
// over 512 slots, splits 1, 3 and 5) for compute-sanitizer, no timing; exit status 1 when an output differs beyond
// bf16 rounding.
//   nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Itemplates -Ibench/dev \
//        bench/dev/mla_ws16.cu -o .devbuild/mla_ws16
//   .devbuild/mla_ws16 [pages]     (default 32768 pages of 64 rows: 1.4 GB, rows from HBM as in serving)
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sparse_mla_decode/kernel_ws.cuh"
#include "mla16_reg.cuh"

namespace ktune_mla {
template <int kTopkValue>
struct H16Spec : DevBaseSpec<kTopkValue> {
  static constexpr int kNumHeads = 16, kHeadsPerCta = 16, kTile = 32, kStages = 1, kWarps = 8;
  static constexpr bool kWgmma = false;
};
template <int kTopkValue>
struct H16WsSpec : H16Spec<kTopkValue> {
  static constexpr int kTile = 64, kStages = 2, kWarps = 12;
};
}  // namespace ktune_mla
using namespace ktune_mla;

struct Out {
  std::vector<unsigned short> out;
  std::vector<float> lse;
};

// One call: the decode kernel over (1 head group, splits, tokens), then the combine when splits > 1.
template <class Spec, class Kern>
void call(Kern kern, int threads, int smem, const Params& p, int tokens, int splits) {
  kern<<<dim3(1, splits, tokens), threads, smem>>>(p);
  if (splits > 1) combine_kernel<Spec><<<dim3(16, tokens), 128>>>(p);
}

template <class Spec, class Kern>
Out run_once(Kern kern, int threads, int smem, const Params& p, int tokens, int splits) {
  allow_smem(kern, smem);
  Out r;
  r.out.resize(size_t(tokens) * 16 * 512);
  r.lse.resize(size_t(tokens) * 16);
  CK(cudaMemset(p.out, 0xFF, r.out.size() * 2));
  CK(cudaMemset(p.lse, 0xFF, r.lse.size() * 4));
  call<Spec>(kern, threads, smem, p, tokens, splits);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(r.out.data(), p.out, r.out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.lse.data(), p.lse, r.lse.size() * 4, cudaMemcpyDeviceToHost));
  return r;
}

unsigned long long fnv1a(const Out& o) {
  unsigned long long h = 1469598103934665603ull;
  auto eat = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  eat(o.out.data(), o.out.size() * 2);
  eat(o.lse.data(), o.lse.size() * 4);
  return h;
}

template <int TOPK>
int check_and_time(int pages, int tokens_max, bool sanitize) {
  using Ref = H16Spec<TOPK>;
  using Ws = H16WsSpec<TOPK>;
  const MlaDevInputs host =
      sanitize ? make_mla_dev_inputs(tokens_max, TOPK, pages, 64, true, 5, 4) : make_mla_dev_inputs(tokens_max, TOPK, pages, 64, true, 3, 5);
  Params p = upload_mla_dev_inputs(host, 8);
  constexpr Shape rs = Traits<Ref>::sh;
  constexpr Shape ws = WsTraits<Ws>::sh;
  const cudaFuncAttributes fa = allow_smem(decode_kernel_ws<Ws>, ws.smem_total);
  std::printf("ws16: %d threads, %d registers, %zu B local, %d B shared\n", ws.threads, fa.numRegs,
              size_t(fa.localSizeBytes), ws.smem_total);
  const cudaFuncAttributes fr = allow_smem(mla16::decode_reg16<TOPK>, mla16::kSmemBytes);
  std::printf("reg16 (bench/dev/mla16_reg.cuh): %d threads, %d registers, %zu B local, %d B shared\n", mla16::kThreads,
              fr.numRegs, size_t(fr.localSizeBytes), mla16::kSmemBytes);
  std::printf("%-7s %-6s %12s %12s %10s %12s %12s %6s %18s %10s %10s %12s %12s %6s\n", "tokens", "splits", "t32.s1.g16",
              "ws16 us", "KV TB/s", "rel L2 out", "max |dlse|", "bad", "ws16 hash", "reg16 us", "KV TB/s", "rel L2 out",
              "max |dlse|", "bad");
  const int shapes[][2] = {{64, 2}, {128, 1}, {64, 1}, {128, 2}};
  const int small[][2] = {{6, 1}, {6, 3}, {6, 5}};
  int failures = 0;
  std::vector<Out> refs;  // t32.s1.g16's results per case, for the f16 form's check below
  for (int i = 0; i < (sanitize ? 3 : 4); ++i) {
    const int tokens = sanitize ? small[i][0] : shapes[i][0], splits = sanitize ? small[i][1] : shapes[i][1];
    p.num_tokens = tokens;
    p.num_splits = splits;
    const Out& ref = refs.emplace_back(run_once<Ref>(decode_kernel<Ref>, rs.threads, rs.smem_total, p, tokens, splits));
    const Out got = run_once<Ref>(decode_kernel_ws<Ws>, ws.threads, ws.smem_total, p, tokens, splits);
    const Out reg = run_once<Ref>(mla16::decode_reg16<TOPK>, mla16::kThreads, mla16::kSmemBytes, p, tokens, splits);
    const MlaDiff d = compare_mla_outputs(ref.out, ref.lse, got.out, got.lse);
    const MlaDiff dr = compare_mla_outputs(ref.out, ref.lse, reg.out, reg.lse);
    const bool ok = d.within_bf16();
    const bool ok_reg = dr.within_bf16();
    failures += !ok + !ok_reg;
    double ref_us = 0, ws_us = 0, reg_us = 0;
    if (!sanitize) {
      ref_us = median_us([&] { call<Ref>(decode_kernel<Ref>, rs.threads, rs.smem_total, p, tokens, splits); }, 30);
      ws_us = median_us([&] { call<Ref>(decode_kernel_ws<Ws>, ws.threads, ws.smem_total, p, tokens, splits); }, 30);
      reg_us = median_us(
          [&] { call<Ref>(mla16::decode_reg16<TOPK>, mla16::kThreads, mla16::kSmemBytes, p, tokens, splits); }, 30);
    }
    const double kv_bytes = double(tokens) * TOPK * 656;
    std::printf("%-7d %-6d %12.1f %12.1f %10.2f %12.2e %12.2e %6zu %18llx %10.1f %10.2f %12.2e %12.2e %6zu%s\n",
                tokens, splits, ref_us, ws_us, ws_us > 0 ? kv_bytes / ws_us / 1e6 : 0.0, d.rel_out, d.lse_worst, d.bad,
                fnv1a(got), reg_us, reg_us > 0 ? kv_bytes / reg_us / 1e6 : 0.0, dr.rel_out, dr.lse_worst, dr.bad,
                ok && ok_reg ? "" : "  FAILED");
  }
  {  // the prototype's f16 form (checked here too), its ring of 3, and its phases alone (those compute wrong results);
     // the bf16 form with a ring of 4 is the table above's reg16
    auto reg = [&](auto kern, int smem, int tokens, int splits) {
      allow_smem(kern, smem);
      return sanitize ? 0.0 : median_us([&] { call<Ref>(kern, mla16::kThreads, smem, p, tokens, splits); }, 30);
    };
    std::printf("%-7s %-6s %10s %10s %10s %10s %10s %12s %12s %12s %6s\n", "tokens", "splits", "bf16 s3", "f16 s3",
                "f16 s4", "copies", "math bf16", "math f16", "f16 rel L2", "f16 |dlse|", "bad");
    for (int i = 0; i < (sanitize ? 3 : 4); ++i) {
      const int tokens = sanitize ? small[i][0] : shapes[i][0], splits = sanitize ? small[i][1] : shapes[i][1];
      p.num_tokens = tokens;
      p.num_splits = splits;
      const Out& ref = refs[i];
      const Out f16 =
          run_once<Ref>(mla16::decode_reg16<TOPK, 4, 0, 1>, mla16::kThreads, mla16::smem_bytes(4), p, tokens, splits);
      const MlaDiff d = compare_mla_outputs(ref.out, ref.lse, f16.out, f16.lse);
      const bool ok = d.within_bf16();
      failures += !ok;
      std::printf("%-7d %-6d %10.1f %10.1f %10.1f %10.1f %10.1f %12.1f %12.2e %12.2e %6zu%s\n", tokens, splits,
                  reg(mla16::decode_reg16<TOPK, 3>, mla16::smem_bytes(3), tokens, splits),
                  reg(mla16::decode_reg16<TOPK, 3, 0, 1>, mla16::smem_bytes(3), tokens, splits),
                  reg(mla16::decode_reg16<TOPK, 4, 0, 1>, mla16::smem_bytes(4), tokens, splits),
                  reg(mla16::decode_reg16<TOPK, 4, 1>, mla16::smem_bytes(4), tokens, splits),
                  reg(mla16::decode_reg16<TOPK, 4, 2>, mla16::smem_bytes(4), tokens, splits),
                  reg(mla16::decode_reg16<TOPK, 4, 2, 1>, mla16::smem_bytes(4), tokens, splits), d.rel_out, d.lse_worst,
                  d.bad, ok ? "" : "  FAILED");
    }
  }
  {  // kWs: the copies on a warpgroup of their own, every form checked against t32.s1.g16, then timed; the phase
     // variants (copies alone, math alone) compute wrong results
    auto time_ws = [&](auto kern, int smem, int tokens, int splits) {
      allow_smem(kern, smem);
      return sanitize ? 0.0 : median_us([&] { call<Ref>(kern, mla16::kThreadsWs, smem, p, tokens, splits); }, 30);
    };
    auto check_ws = [&](auto kern, int smem, int tokens, int splits, const Out& ref) {
      const Out got = run_once<Ref>(kern, mla16::kThreadsWs, smem, p, tokens, splits);  // sets its smem limit
      const MlaDiff d = compare_mla_outputs(ref.out, ref.lse, got.out, got.lse);
      const bool ok = d.within_bf16();
      failures += !ok;
      return ok ? d.rel_out : -1.0;  // -1: failed
    };
    const cudaFuncAttributes fw = allow_smem(mla16::decode_reg16<TOPK, 3, 0, 0, true>, mla16::smem_bytes_ws(3));
    std::printf("register-fed with a copy warpgroup (kWs): %d threads, %d registers at launch, %zu B local\n",
                mla16::kThreadsWs, fw.numRegs, size_t(fw.localSizeBytes));
    std::printf("%-7s %-6s %10s %10s %10s %10s %10s %10s %10s %12s %12s\n", "tokens", "splits", "ws bf16 s3",
                "ws bf16 s4", "ws f16 s3", "ws f16 s4", "ws copies", "ws math b", "ws math f", "rel L2 bf16",
                "rel L2 f16");
    constexpr int s3 = mla16::smem_bytes_ws(3), s4 = mla16::smem_bytes_ws(4);
    for (int i = 0; i < (sanitize ? 3 : 4); ++i) {
      const int tokens = sanitize ? small[i][0] : shapes[i][0], splits = sanitize ? small[i][1] : shapes[i][1];
      p.num_tokens = tokens;
      p.num_splits = splits;
      const Out& ref = refs[i];
      const double rb = check_ws(mla16::decode_reg16<TOPK, 3, 0, 0, true>, s3, tokens, splits, ref);
      const double rf = check_ws(mla16::decode_reg16<TOPK, 3, 0, 1, true>, s3, tokens, splits, ref);
      const double rb4 = check_ws(mla16::decode_reg16<TOPK, 4, 0, 0, true>, s4, tokens, splits, ref);
      const double rf4 = check_ws(mla16::decode_reg16<TOPK, 4, 0, 1, true>, s4, tokens, splits, ref);
      const bool ok = rb >= 0 && rf >= 0 && rb4 >= 0 && rf4 >= 0;
      std::printf("%-7d %-6d %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %12.2e %12.2e%s\n", tokens, splits,
                  time_ws(mla16::decode_reg16<TOPK, 3, 0, 0, true>, s3, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 4, 0, 0, true>, s4, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 3, 0, 1, true>, s3, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 4, 0, 1, true>, s4, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 3, 1, 1, true>, s3, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 3, 2, 0, true>, s3, tokens, splits),
                  time_ws(mla16::decode_reg16<TOPK, 3, 2, 1, true>, s3, tokens, splits), rb, rf,
                  ok ? "" : "  FAILED");
    }
  }
  return failures;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--sanitize") return check_and_time<512>(8, 6, true) ? 1 : 0;
  const int pages = argc > 1 ? std::atoi(argv[1]) : 32768;
  std::printf("cache %d pages of 64 rows (%.0f MB)\n", pages, pages * 64.0 * 656 / 1e6);
  return check_and_time<2048>(pages, 128, false) ? 1 : 0;
}
