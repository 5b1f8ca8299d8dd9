// A register-fed sparse MLA decode kernel for 16 heads per CTA (tensor-parallel shards of 128 heads), fp8_ds_mla,
// kv_lora_rank 512 + rope 64: a dev prototype beside the library's t64.s2.g16.ws (bench/dev/mla_ws16.cu times both).
//
// Why: at 16 heads a cache row serves few heads, so the gather and the FP8 conversion are the work. The library's
// kernel converts every row once into a bf16 K/V tile in shared memory (72 KB per 64 rows) that the tensor cores
// then read; its two producer warpgroups take turns over two such buffers. Here no bf16 tile exists:
// - Each of 8 warps owns a quarter of the 512 latent dims (and of the 64 rope dims) and half of the CTA's 32-slot
//   chunks (even or odd). Its threads copy their own bytes of each row (cp.async, 44 B per row and thread) into a
//   private 4-stage ring in shared memory (no thread reads another's bytes: no barrier guards the ring).
// - Q·Kᵀ on mma.sync m16n8k16 with the 16 heads as M and 8 slots as N: Q (the warp's 144 dims of 16 heads) stays in
//   registers; K is the B operand straight from the converted row bytes. The dims of a k16 step are permuted so
//   each thread's B elements are two 16-byte pieces of its row, and the 4 threads of a row read 64 contiguous
//   bytes per copy (Q is loaded with the same permutation).
// - The four quarters' partial scores meet in shared memory (one named barrier per chunk and slot half), every
//   warp of a slot half runs the same online softmax, and P·V takes P from the score registers (A operand) and V
//   from the same row bytes in the ring, converted again and transposed in registers by movmatrix (B operand).
// - The two slot halves merge at the end through shared memory; splits write the library's fp32 partials, so
//   its combine_kernel merges them.
// With kConv 0 the conversion is the library's (bf16 of e4m3 * block scale), so the numerics are its own up to
// summation order; kConv 1 (below) changes them.
//
// kWs (a second layout of the roles): a fourth warpgroup (warps 8-11) issues every copy, for all 256 math threads'
// slots of the ring, and signals each filled stage on a "full" mbarrier (cp.async.mbarrier.arrive.noinc); the math
// warps wait on it and release the stage on an "empty" mbarrier after their last read. The math warps never wait
// on their own copies. setmaxnreg gives them 224 registers and the copy warpgroup 56 (3 x 168 at launch).
#pragma once
#include "common/tma.cuh"
#include "sparse_mla_decode/kernel.cuh"
#include "sparse_mla_decode/kernel_ws.cuh"  // ws:: barrier and register helpers

namespace mla16 {
namespace kc = ::ktune_common;
using ktune_mla::Params;
namespace ws = ::ktune_mla::ws;

constexpr int kHeads = 16, kLat = 512, kRope = 64, kRowBytes = 656, kThreads = 256;
constexpr int kChunk = 32;  // slots per chunk: 4 n8 blocks of the score mma
constexpr int kStages = 4;  // the default ring depth (chunks); 3 also fits

// Shared memory: the cp.async ring (per stage: latent [nb][half][thread] 16 B, rope [nb][thread] 8 B, scale
// [nb][thread] 4 B) and the score exchange ([slot half][buffer][quarter][float4 k][lane] 16 B).
constexpr int kLatBytes = 4 * 2 * kThreads * 16, kRopeBytes = 4 * kThreads * 8, kScaleBytes = 4 * kThreads * 4;
constexpr int kStageBytes = kLatBytes + kRopeBytes + kScaleBytes;
constexpr int kExchangeBytes = 2 * 2 * 4 * 4 * 32 * 16;
constexpr int smem_bytes(int stages) { return stages * kStageBytes + kExchangeBytes; }
constexpr int kSmemBytes = smem_bytes(kStages);
// kWs: 384 threads, and a full and an empty mbarrier per stage after the exchange area.
constexpr int kCopyThreads = 128, kThreadsWs = kThreads + kCopyThreads;
constexpr int smem_bytes_ws(int stages) { return smem_bytes(stages) + 16 * stages; }
static_assert(smem_bytes_ws(4) <= 227 * 1024, "one CTA per SM");
static_assert(kSmemBytes <= 227 * 1024, "one CTA per SM");
// The end-of-loop merge of the two slot halves reuses the ring: O (64 floats) + max and sum (4 floats) per thread.
static_assert(4 * 32 * 68 * 4 <= 3 * kStageBytes, "merge area");

__device__ __forceinline__ void cp_async(unsigned dst, const void* src, bool ok, int bytes) {
  const int n = ok ? bytes : 0;  // zero-fill a skipped row
  if (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
  else if (bytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ unsigned movmatrix_t(unsigned a) {
  unsigned d;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}
// Thread vt's copies (vt: a math thread's index, which fixes the ring slots it reads) of the 4 rows of its 32-slot
// chunk starting at entry `base` into the stage at shared address st.
__device__ __forceinline__ void copy_chunk(unsigned st, int vt, int base, int s_end, const int* idx,
                                           const unsigned char* kv) {
  const int lane = vt & 31, warp = vt >> 5, g = lane >> 2, q = lane & 3, dq = warp & 3;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int pos = base + 8 * j + g;
    const int e = pos < s_end ? __ldg(idx + pos) : -1;
    const bool ok = e >= 0;
    const unsigned char* row = kv + (long long)(ok ? e : 0) * kRowBytes;
    cp_async(st + ((j * 2 + 0) * kThreads + vt) * 16, row + 128 * dq + 16 * q, ok, 16);
    cp_async(st + ((j * 2 + 1) * kThreads + vt) * 16, row + 128 * dq + 64 + 16 * q, ok, 16);
    cp_async(st + kLatBytes + (j * kThreads + vt) * 8, row + kLat + 16 + 32 * dq + 8 * q, ok, 8);
    cp_async(st + kLatBytes + kRopeBytes + (j * kThreads + vt) * 4, row + kLat + 4 * dq, ok, 4);
  }
}
// Word w of the thread's 32 latent bytes, converted: b0 = dims (4w, 4w + 1), b1 = (4w + 2, 4w + 3), bf16 of e4m3 * sc.
__device__ __forceinline__ void convert_word(unsigned w, float sc, unsigned& b0, unsigned& b1) {
  unsigned lo, hi;
  kc::e4m3x4_to_f16x2x2<false>(w, lo, hi);
  b0 = ktune_mla::f16x2_to_bf16x2_scaled(lo, sc * kc::kE4m3Fold);
  b1 = ktune_mla::f16x2_to_bf16x2_scaled(hi, sc * kc::kE4m3Fold);
}

// grid (1, splits, tokens) as the library's kernels, 256 threads and smem_bytes(kSt) of dynamic shared memory (kWs:
// 384 and smem_bytes_ws(kSt)). kTopk: entries per token; kSt: ring depth; kMode (phase timing only, wrong
// results): 1 = the copies alone (no math), 2 = the math alone (no copies: every chunk reads whatever the ring
// holds). kConv 0: K and V as the library converts them (bf16 of e4m3 * block scale, 12 instructions per 4
// values); 1: the latent products in f16 (K and V the exact f16 of e4m3, 2 instructions per 4 values; Q's latent
// part converted to f16 once, exact while |q| is in f16's range; the block scale applied to the scores and to P
// per slot; rope products in bf16). kWs: the copies on a warpgroup of their own (the header).
template <int kTopk, int kSt = kStages, int kMode = 0, int kConv = 0, bool kWs = false>
__global__ void __launch_bounds__(kWs ? kThreadsWs : kThreads, 1) decode_reg16(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
  const int dq = warp & 3, sh = warp >> 2;  // the warp's dim quarter and slot half
  const int split = blockIdx.y, token = blockIdx.z, ns = p.num_splits;
  const int per_split = (kTopk + ns - 1) / ns;
  const int s_begin = split * per_split, s_end = min(kTopk, s_begin + per_split);
  const int nchunks = (s_end - s_begin + kChunk - 1) / kChunk;
  const int my_chunks = nchunks > sh ? (nchunks - sh + 1) / 2 : 0;  // chunks sh, sh + 2, ...
  const int* idx = p.indices + (long long)token * kTopk;
  const unsigned char* kv = static_cast<const unsigned char*>(p.kv_cache);
  const unsigned sbase = kc::smem_u32(smem);
  const unsigned bars = sbase + kSt * kStageBytes + kExchangeBytes;  // kWs: full[kSt], then empty[kSt]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kSt + s); };
  if constexpr (kWs) {
    if (tid == 0)
      for (int s = 0; s < kSt; ++s) {
        kc::mbar_init(full(s), kCopyThreads);
        kc::mbar_init(empty(s), kThreads);
      }
    __syncthreads();
    if (tid >= kThreads) {  // the copy warpgroup: stage i holds local chunk i of both slot halves
      ws::regs_dec<56>();
      if (kMode == 2) return;  // the math alone: nothing is copied or waited on
      const int c = tid - kThreads, chunks0 = (nchunks + 1) / 2;
      for (int i = 0; i < chunks0; ++i) {
        const int stg = i % kSt;
        if (i >= kSt) kc::mbar_wait(empty(stg), ((i / kSt) - 1) & 1);
#pragma unroll
        for (int v = 0; v < 2; ++v) {  // half v's warps are math threads 128 v ..
          const int chunk = v + 2 * i;
          if (chunk < nchunks)
            copy_chunk(sbase + stg * kStageBytes, c + 128 * v, s_begin + chunk * kChunk, s_end, idx, kv);
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(full(stg)) : "memory");
      }
      asm volatile("cp.async.wait_all;" ::: "memory");
      return;
    }
    ws::regs_inc<224>();
  }

  // The thread's "strip" of the quarter's latent dims: 16 q .. 16 q + 15, then 64 + 16 q .. 64 + 16 q + 15. Word k
  // of a strip holds strip dims 2k, 2k + 1; k16 step ks pairs strip words 2 ks, 2 ks + 1 (Q) with the K bytes
  // 4 ks .. 4 ks + 3 of the same strip. Q fragments of heads g and g + 8: the strip (16 words), rope 16 dq + 4 q .. + 4.
  unsigned qa[2][16], qr[2][2];
  {
    const long long ts = p.q_stride_token ? p.q_stride_token : (long long)kHeads * (kLat + kRope);
    const long long hs = p.q_stride_head ? p.q_stride_head : (kLat + kRope);
    const unsigned short* qb = static_cast<const unsigned short*>(p.q) + token * ts;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const unsigned short* row = qb + (g + 8 * r) * hs;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint4 v = *reinterpret_cast<const uint4*>(row + 128 * dq + 64 * (k >> 1) + 16 * q + 8 * (k & 1));
        qa[r][4 * k] = v.x, qa[r][4 * k + 1] = v.y, qa[r][4 * k + 2] = v.z, qa[r][4 * k + 3] = v.w;
      }
      const uint2 v = *reinterpret_cast<const uint2*>(row + kLat + 16 * dq + 4 * q);
      qr[r][0] = v.x, qr[r][1] = v.y;
    }
    if (kConv == 1) {
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int k = 0; k < 16; ++k)
          qa[r][k] = kc::pack_f16x2(__uint_as_float(qa[r][k] << 16), __uint_as_float(qa[r][k] & 0xFFFF0000u));
    }
  }

  // This thread's copies of local chunk i (the split's chunk sh + 2 i) into stage i % kSt.
  auto issue = [&](int i) {
    if (kWs) return;
    if (kMode != 2 && i < my_chunks)
      copy_chunk(sbase + (i % kSt) * kStageBytes, tid, s_begin + (sh + 2 * i) * kChunk, s_end, idx, kv);
    asm volatile("cp.async.commit_group;" ::: "memory");
  };

  float o[16][4];  // O of heads (g, g + 8) x strip dims 2 m, 2 m + 1 (logical 8-dim block m)
#pragma unroll
  for (int m = 0; m < 16; ++m) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.f;
  float m_run[2] = {kc::neg_inf(), kc::neg_inf()}, l_run[2] = {0.f, 0.f};
  const float lscale = p.softmax_scale * kc::kLog2e;
  float4* xch = reinterpret_cast<float4*>(smem + kSt * kStageBytes);

#pragma unroll
  for (int i = 0; i < kSt - 1; ++i) issue(i);
#pragma unroll 1
  for (int i = 0; i < my_chunks; ++i) {
    if constexpr (kWs) {
      if (kMode != 2) kc::mbar_wait(full(i % kSt), (i / kSt) & 1);
    } else {
      issue(i + kSt - 1);
      asm volatile("cp.async.wait_group %0;" ::"n"(kSt - 1) : "memory");
    }
    const unsigned char* st = smem + (i % kSt) * kStageBytes;
    if (kMode == 1) {
      if (kWs) ws::mbar_arrive(empty(i % kSt));
      continue;
    }
    const uint4* lat = reinterpret_cast<const uint4*>(st);
    const uint2* rope = reinterpret_cast<const uint2*>(st + kLatBytes);
    const float* scl = reinterpret_cast<const float*>(st + kLatBytes + kRopeBytes);

    // Partial scores of this quarter: s[j] = 16 heads x slots 8 j .. 8 j + 7.
    // The k16 step is the outer loop so the four n8 blocks' accumulators interleave in the PTX: the mma asm is
    // volatile, so NVVM keeps the written order, and block-by-block would write 9 dependent mma per block in a row.
    float s[4][4], colsc[4][2];  // kConv 1: the block scale of score columns 8 j + 2 q, + 1
    unsigned w[4][8];
    float sc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      const uint4 w0 = lat[(j * 2 + 0) * kThreads + tid], w1 = lat[(j * 2 + 1) * kThreads + tid];
      w[j][0] = w0.x, w[j][1] = w0.y, w[j][2] = w0.z, w[j][3] = w0.w;
      w[j][4] = w1.x, w[j][5] = w1.y, w[j][6] = w1.z, w[j][7] = w1.w;
      sc[j] = scl[j * kThreads + tid];
    }
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const unsigned a[4] = {qa[0][2 * ks], qa[1][2 * ks], qa[0][2 * ks + 1], qa[1][2 * ks + 1]};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        unsigned b0, b1;
        if (kConv == 0) {
          convert_word(w[j][ks], sc[j], b0, b1);
          kc::mma_16816<true>(s[j], a, b0, b1);
        } else {
          kc::e4m3x4_to_f16x2x2<false>(w[j][ks], b0, b1);
          kc::mma_16816<false>(s[j], a, b0, b1);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (kConv == 1) {  // the row of column 8 j + c is held by lanes 4 c ..
        colsc[j][0] = __shfl_sync(0xffffffffu, sc[j], 8 * q) * kc::kE4m3Fold;
        colsc[j][1] = __shfl_sync(0xffffffffu, sc[j], 8 * q + 4) * kc::kE4m3Fold;
        s[j][0] *= colsc[j][0], s[j][1] *= colsc[j][1], s[j][2] *= colsc[j][0], s[j][3] *= colsc[j][1];
      }
      const uint2 r = rope[j * kThreads + tid];
      const unsigned a[4] = {qr[0][0], qr[1][0], qr[0][1], qr[1][1]};
      kc::mma_16816<true>(s[j], a, r.x, r.y);
    }
    // The four quarters' sums, in quarter order (every warp of the half gets the same bits).
    float4* xb = xch + ((sh * 2 + (i & 1)) * 4) * 4 * 32;
#pragma unroll
    for (int j = 0; j < 4; ++j) xb[(dq * 4 + j) * 32 + lane] = make_float4(s[j][0], s[j][1], s[j][2], s[j][3]);
    ws::bar_sync(1 + sh, 128);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float4 t = xb[(0 * 4 + j) * 32 + lane];
#pragma unroll
      for (int d = 1; d < 4; ++d) {
        const float4 u = xb[(d * 4 + j) * 32 + lane];
        t.x += u.x, t.y += u.y, t.z += u.z, t.w += u.w;
      }
      s[j][0] = t.x, s[j][1] = t.y, s[j][2] = t.z, s[j][3] = t.w;
    }
    // Mask skipped slots (columns 8 j + 2 q, + 1: rows other lanes copied, so their entries are read again, from L1),
    // scale to log2 units, online softmax per head row.
    const int base = s_begin + (sh + 2 * i) * kChunk;
    float mx[2] = {kc::neg_inf(), kc::neg_inf()};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int pos = base + 8 * j + 2 * q + c;
        const bool ok = pos < s_end && __ldg(idx + pos) >= 0;
        s[j][c] = ok ? s[j][c] * lscale : kc::neg_inf();
        s[j][2 + c] = ok ? s[j][2 + c] * lscale : kc::neg_inf();
        mx[0] = fmaxf(mx[0], s[j][c]);
        mx[1] = fmaxf(mx[1], s[j][2 + c]);
      }
    }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = kc::quad_max(mx[r]);
      const float m_new = fmaxf(m_run[r], mx[r]);
      const float m_use = m_new == kc::neg_inf() ? 0.f : m_new;
      alpha[r] = kc::fast_exp2(m_run[r] - m_use);
      m_run[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[j][2 * r] = kc::fast_exp2(s[j][2 * r] - m_use);
        s[j][2 * r + 1] = kc::fast_exp2(s[j][2 * r + 1] - m_use);
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l_run[r] = l_run[r] * alpha[r] + sum;
    }
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {  // most chunks keep every row's max
#pragma unroll
      for (int m = 0; m < 16; ++m) {
        o[m][0] *= alpha[0], o[m][1] *= alpha[0];
        o[m][2] *= alpha[1], o[m][3] *= alpha[1];
      }
    }
    // P V: k16 step kk covers n8 blocks 2 kk and 2 kk + 1; V's fragment of dim block m is the transposed K
    // fragment of the same rows and dims. The raw words are read from the ring again rather than held in
    // registers across the score exchange (32 more registers over the ~205 this kernel already takes).
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      unsigned pa[4];
      if (kConv == 0) {
        const float pc[8] = {s[2 * kk][0], s[2 * kk][1], s[2 * kk][2], s[2 * kk][3],
                             s[2 * kk + 1][0], s[2 * kk + 1][1], s[2 * kk + 1][2], s[2 * kk + 1][3]};
        kc::acc_to_a_frag<true>(pa, pc);
      } else {  // P times the rows' block scales, in f16
        const int j0 = 2 * kk, j1 = 2 * kk + 1;
        const float pc[8] = {s[j0][0] * colsc[j0][0], s[j0][1] * colsc[j0][1], s[j0][2] * colsc[j0][0],
                             s[j0][3] * colsc[j0][1], s[j1][0] * colsc[j1][0], s[j1][1] * colsc[j1][1],
                             s[j1][2] * colsc[j1][0], s[j1][3] * colsc[j1][1]};
        kc::acc_to_a_frag<false>(pa, pc);
      }
      const uint4 x0 = lat[(4 * kk + 0) * kThreads + tid], x1 = lat[(4 * kk + 1) * kThreads + tid];
      const uint4 y0 = lat[(4 * kk + 2) * kThreads + tid], y1 = lat[(4 * kk + 3) * kThreads + tid];
      const unsigned wx[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      const unsigned wy[8] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
      const float scx = sc[2 * kk], scy = sc[2 * kk + 1];
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        unsigned kx0, kx1, ky0, ky1;
        if (kConv == 0) {
          convert_word(wx[w], scx, kx0, kx1);
          convert_word(wy[w], scy, ky0, ky1);
        } else {
          kc::e4m3x4_to_f16x2x2<false>(wx[w], kx0, kx1);
          kc::e4m3x4_to_f16x2x2<false>(wy[w], ky0, ky1);
        }
        kc::mma_16816<kConv == 0>(o[2 * w], pa, movmatrix_t(kx0), movmatrix_t(ky0));
        kc::mma_16816<kConv == 0>(o[2 * w + 1], pa, movmatrix_t(kx1), movmatrix_t(ky1));
      }
    }
    if (kWs && kMode != 2) ws::mbar_arrive(empty(i % kSt));  // this thread's last read of the stage is done
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#pragma unroll
  for (int r = 0; r < 2; ++r) l_run[r] = kc::quad_sum(l_run[r]);

  // The odd half hands its O, max and sum to the even half's warp of the same quarter.
  // Every math warp is done with the ring (with kWs the copy warpgroup has left: the math warps sync alone).
  if (kWs) ws::bar_sync(3, kThreads); else __syncthreads();
  float* mrg = reinterpret_cast<float*>(smem) + (dq * 32 + lane) * 68;
  if (sh == 1) {
#pragma unroll
    for (int m = 0; m < 16; ++m)
      *reinterpret_cast<float4*>(mrg + 4 * m) = make_float4(o[m][0], o[m][1], o[m][2], o[m][3]);
    *reinterpret_cast<float4*>(mrg + 64) = make_float4(m_run[0], m_run[1], l_run[0], l_run[1]);
  }
  if (kWs) ws::bar_sync(3, kThreads); else __syncthreads();
  if (sh == 1) return;
  {
    const float4 t = *reinterpret_cast<const float4*>(mrg + 64);
    const float m1[2] = {t.x, t.y}, l1[2] = {t.z, t.w};
    float w0[2], w1[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float M = fmaxf(m_run[r], m1[r]);
      w0[r] = kc::merge_weight(m_run[r], M);
      w1[r] = kc::merge_weight(m1[r], M);
      l_run[r] = l_run[r] * w0[r] + l1[r] * w1[r];
      m_run[r] = M;
    }
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const float4 u = *reinterpret_cast<const float4*>(mrg + 4 * m);
      o[m][0] = o[m][0] * w0[0] + u.x * w1[0], o[m][1] = o[m][1] * w0[0] + u.y * w1[0];
      o[m][2] = o[m][2] * w0[1] + u.z * w1[1], o[m][3] = o[m][3] * w0[1] + u.w * w1[1];
    }
  }
  // Thread (g, q) holds its strip of heads g and g + 8: blocks 0-7 are dims 16 q .., blocks 8-15 dims 64 + 16 q ..
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = g + 8 * r;
    const long long row = (long long)token * kHeads + h;
    const int d0 = 128 * dq + 16 * q;  // and d0 + 64
    if (ns == 1) {
      const kc::RowFinal f = kc::finalize_row(m_run[r], l_run[r], p.sinks != nullptr,
                                              p.sinks != nullptr ? p.sinks[h] : 0.f, 1.f);
      unsigned pk[16];
#pragma unroll
      for (int m = 0; m < 16; ++m) pk[m] = kc::pack_bf16x2(o[m][2 * r] * f.scale, o[m][2 * r + 1] * f.scale);
      uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned short*>(p.out) + row * kLat + d0);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        dst[(k >> 1) * 8 + (k & 1)] = make_uint4(pk[4 * k], pk[4 * k + 1], pk[4 * k + 2], pk[4 * k + 3]);
      if (dq == 0 && q == 0 && p.lse != nullptr) p.lse[row] = f.lse;
    } else {
      float4* dst = reinterpret_cast<float4*>(p.workspace + (row * ns + split) * kLat + d0);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        dst[(k >> 2) * 16 + (k & 3)] = make_float4(o[2 * k][2 * r], o[2 * k][2 * r + 1], o[2 * k + 1][2 * r], o[2 * k + 1][2 * r + 1]);
      if (dq == 0 && q == 0) {
        float* ml = p.workspace + (long long)p.num_tokens * kHeads * ns * kLat + (row * ns + split) * 2;
        ml[0] = m_run[r];
        ml[1] = l_run[r];
      }
    }
  }
}

}  // namespace mla16
