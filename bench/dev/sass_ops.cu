// Calibration kernels for bench/dev/sass_mix.py: each kernel k_<NAME> does one operation between a load and a
// store, so the opcode it adds to k_base's is the one named NAME (k_<NAME>__<NAME2>: an operation that takes
// several instructions; an underscore inside a name stands for a dot). `python3 bench/dev/sass_mix.py
// --calibrate` compiles this file with nvcc (sm_90a) and checks the script's table against it.
#define IN                                                                       \
  unsigned a = p[threadIdx.x], b = p[threadIdx.x + 32], c = p[threadIdx.x + 64]; \
  unsigned d;
#define OUT p[threadIdx.x] = d;
// One kernel per operation: k_NAME(p) runs the statement (the rest of the arguments) between the loads of a, b, c
// and the store of d.
#define OP(NAME, ...) \
  __global__ void k_##NAME(unsigned* p) { IN __VA_ARGS__ OUT }
#define F(x) __uint_as_float(x)
#define U(x) __float_as_uint(x)
extern "C" {
OP(base, d = a;)
OP(LOP3, asm volatile("lop3.b32 %0,%1,%2,%3,0x96;" : "=r"(d) : "r"(a), "r"(b), "r"(c));)
OP(SHF, asm volatile("shf.l.wrap.b32 %0,%1,%2,%3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));)
OP(LEA, d = a + (b << 4);)
OP(SEL, d = (int(a) < int(b)) ? c : 7u;)
OP(IADD3, d = a + b + c;)
OP(IMAD, d = a * b + c;)
OP(PRMT, asm volatile("prmt.b32 %0,%1,%2,%3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));)
OP(ISETP, d = (int(a) < int(b)) ? c : 7u;)
OP(VIMNMX, d = min(a, b);)
OP(FFMA, d = U(fmaf(F(a), F(b), F(c)));)
OP(FMUL, d = U(__fmul_rn(F(a), F(b)));)
OP(FADD, d = U(__fadd_rn(F(a), F(b)));)
OP(FMNMX, d = U(fmaxf(F(a), F(b)));)
OP(HFMA2, asm volatile("fma.rn.bf16x2 %0,%1,%2,%3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));)
OP(F2FP, asm volatile("cvt.rn.bf16x2.f32 %0,%1,%2;" : "=r"(d) : "f"(F(a)), "f"(F(b)));)
OP(I2F, d = U(float(int(a)));)
OP(POPC, d = __popc(a);)
OP(F2I, d = unsigned(int(F(a)));)
OP(FSETP, d = F(a) > 0.f ? b : c;)
OP(MUFU, d = U(exp2f(F(a)));)
OP(FLO, d = __clz(a);)
OP(BREV, d = __brev(a);)
OP(SHFL, d = __shfl_xor_sync(0xffffffffu, a, 1);)
OP(VOTE, d = __ballot_sync(0xffffffffu, a > b);)
__global__ void k_HMMA(unsigned* p) {
  IN float f0, f1, f2, f3;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3},{%4,%5,%6,%7},{%8,%9},{%10,%10,%10,%10};"
      : "=f"(f0), "=f"(f1), "=f"(f2), "=f"(f3)
      : "r"(a), "r"(b), "r"(c), "r"(a), "r"(b), "r"(c), "f"(0.f));
  d = U(f0 + f1 + f2 + f3);
  OUT
}
__global__ void k_LDS(unsigned* p) {
  __shared__ unsigned s[256];
  IN s[threadIdx.x] = a;
  __syncthreads();
  d = s[(threadIdx.x * 7) & 255];
  OUT
}
__global__ void k_LDSM(unsigned* p) {
  __shared__ unsigned s[1024];
  IN s[threadIdx.x] = a;
  __syncthreads();
  unsigned x0, x1, x2, x3;
  const unsigned addr = unsigned(__cvta_generic_to_shared(&s[threadIdx.x * 4]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3},[%4];"
               : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
               : "r"(addr));
  d = x0 ^ x1 ^ x2 ^ x3;
  OUT
}
// Hopper's asynchronous machinery: mbarriers, cp.async, bulk copies, stmatrix, wgmma.
__global__ void k_SYNCS__SYNCS_EXCH(unsigned* p) {
  __shared__ __align__(8) unsigned long long bar;
  IN const unsigned ba = unsigned(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ba), "r"(32));
  __syncthreads();
  asm volatile("{.reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0];}" ::"r"(ba));
  asm volatile("{.reg .pred P; W: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @!P bra W;}" ::"r"(ba), "r"(0));
  d = a;
  OUT
}
__global__ void k_LDGSTS__LDGDEPBAR(unsigned* p) {
  __shared__ __align__(16) unsigned s[256];
  IN const unsigned sa = unsigned(__cvta_generic_to_shared(&s[threadIdx.x * 4]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(p + threadIdx.x * 4));
  asm volatile("cp.async.wait_all;");
  __syncthreads();
  d = s[(threadIdx.x * 5) & 255];
  OUT
}
__global__ void k_UBLKCP(unsigned* p) {
  __shared__ __align__(128) unsigned s[256];
  __shared__ __align__(8) unsigned long long bar;
  IN const unsigned sa = unsigned(__cvta_generic_to_shared(s)), ba = unsigned(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ba), "r"(1));
    asm volatile("{.reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;}" ::"r"(ba), "r"(1024));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sa),
                 "l"(p), "r"(1024), "r"(ba));
  }
  __syncthreads();
  asm volatile("{.reg .pred P; W: mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1; @!P bra W;}" ::"r"(ba), "r"(0));
  d = s[threadIdx.x];
  OUT
}
__global__ void k_STSM(unsigned* p) {
  __shared__ __align__(16) unsigned s[1024];
  IN const unsigned sa = unsigned(__cvta_generic_to_shared(&s[threadIdx.x * 4]));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(sa), "r"(a), "r"(b), "r"(c),
               "r"(a));
  __syncthreads();
  d = s[(threadIdx.x * 5) & 1023];
  OUT
}
__global__ void k_HGMMA__WARPGROUP(unsigned* p) {
  __shared__ __align__(128) unsigned s[2048];
  IN const unsigned long long desc =
      (unsigned long long)(unsigned(__cvta_generic_to_shared(s)) >> 4) | (1ull << 16) | (64ull << 32);
  float f0 = 0, f1 = 0, f2 = 0, f3 = 0;
  asm volatile("wgmma.fence.sync.aligned;");
  asm volatile(
      "{.reg .pred q; setp.ne.b32 q, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, q, 1, 1, 0, 0;}"
      : "+f"(f0), "+f"(f1), "+f"(f2), "+f"(f3)
      : "l"(desc), "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;");
  asm volatile("wgmma.wait_group.sync.aligned 0;");
  d = __float_as_uint(f0 + f1 + f2 + f3) ^ a;
  OUT
}
// A loop: sass_mix must find a backward branch whose span holds the POPC and the load.
__global__ void k_loop(unsigned* p, int n) {
  unsigned a = p[threadIdx.x];
  for (int i = 0; i < n; ++i) a = __popc(a ^ p[i]) + a;
  p[threadIdx.x] = a;
}
// Sixteen independent 16-bit fmas: ptxas issues half of them as HFMA2.MMA.
__global__ void k_HFMA2_MMA(unsigned* p) {
  unsigned f = p[100], acc[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) acc[i] = p[threadIdx.x + 32 * i];
#pragma unroll
  for (int i = 0; i < 16; ++i) asm("fma.rn.bf16x2 %0,%1,%2,%3;" : "=r"(acc[i]) : "r"(acc[i]), "r"(f), "r"(0x80008000u));
  unsigned d = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) d ^= acc[i];
  p[threadIdx.x] = d;
}
}
