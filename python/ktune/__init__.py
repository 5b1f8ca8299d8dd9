"""ktune: JIT kernel runtime with an autotune cache (Python bindings over libktune's C API, ctypes only).

  import ktune
  ktune.warmup(preset="llama-3.1-8b")                      # compile + tune into the cache (GPU, or arch="host")
  key = ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32)
  out = ktune.xqa_decode(key, q, kv_cache, block_tables, seq_lens, max_seq_len=4096)

torch is optional and imported only when a torch tensor is passed (or ktune.torch_ops is imported); NumPy arrays
run on the host CPU backend. See docs/python.md."""

from .errors import (CacheError, CompileError, CudaError, InvalidArgumentError, JitDisabledError, KtuneError,
                     NoCompilerError, NoDriverError, NotFoundError, UnsupportedError)
from .runtime import (Runtime, WarmupReport, ensure_device, families, presets, problem_key, runtime, set_runtime,
                      version, warmup, xqa_problem)
from ._lib import library_path
from .engine import DecodePlan, MaskCache, q_cu_seq_lens, xqa_pack_mask
from . import ops  # prepared ops (ktune.ops.XqaDecodeOp); torch is imported only when one is made

__version__ = "0.2.0"

__all__ = ["Runtime", "WarmupReport", "warmup", "xqa_problem", "problem_key", "xqa_decode", "xqa_decode_plan",
           "runtime", "set_runtime", "families", "presets", "version", "library_path", "ensure_device",
           "KtuneError", "InvalidArgumentError", "NotFoundError", "CompileError", "CudaError", "CacheError",
           "JitDisabledError", "NoDriverError", "NoCompilerError", "UnsupportedError", "torch_ops_available",
           "sparse_mla_decode", "sparse_mla_decode_plan", "mxfp4_gemm", "mla_problem", "mxfp4_problem",
           "xqa_pack_mask", "q_cu_seq_lens", "MaskCache", "DecodePlan"]


def xqa_decode(problem, q, kv_cache, block_tables, seq_lens, **kwargs):
    """Paged decode attention (docs/xqa_decode.md). NumPy arrays run on the host CPU (ktune.host.xqa_decode,
    synchronous); torch tensors go through the torch.ops.ktune.xqa_decode custom op (GPU: the current stream,
    graph-capturable; CPU tensors: the host backend). kv_cache is the combined cache or a (k_cache, v_cache) pair;
    q and out may be strided; scales numbers or one-element float32 arrays (docs/xqa_decode.md, "Argument forms").
    Returns out, or (out, lse) for problems that write LSE."""
    if type(q).__name__ == "ndarray":
        from .host import xqa_decode as host_xqa
        return host_xqa(problem, q, kv_cache, block_tables, seq_lens, **kwargs)
    fn = _torch_xqa or _load_torch_xqa()  # no import statement on the traced path once loaded (torch.compile)
    return fn(problem, q, kv_cache, block_tables, seq_lens, **kwargs)


_torch_xqa = None


def _load_torch_xqa():
    global _torch_xqa
    from .torch_ops import xqa_decode as fn
    _torch_xqa = fn
    return fn


def sparse_mla_decode(problem, q, kv_cache, indices, **kwargs):
    """DeepSeek sparse MLA decode (docs/sparse_mla_decode.md). NumPy arrays run on the host CPU
    (ktune.host_mla.sparse_mla_decode, synchronous); torch CUDA tensors go through the custom op
    (ktune.torch_families.sparse_mla_decode)."""
    if type(q).__name__ == "ndarray":
        from .host_mla import sparse_mla_decode as host_mla
        return host_mla(problem, q, kv_cache, indices, **kwargs)
    fn = _torch_fns.get("sparse_mla_decode") or _load_torch_fn("sparse_mla_decode")
    return fn(problem, q, kv_cache, indices, **kwargs)


def mxfp4_gemm(problem, a, weight, **kwargs):
    """W4A16 MXFP4 GEMM. NumPy arrays run on the host CPU (ktune.mxfp4_host.mxfp4_gemm, synchronous; weight from
    ktune.mxfp4_host.host_weight); torch CUDA tensors go through ktune.torch_families.mxfp4_gemm (weight from
    ktune.torch_ops.mxfp4_weight; host prepack with ktune.mxfp4.prepack)."""
    if type(a).__name__ == "ndarray":
        from .mxfp4_host import mxfp4_gemm as host_mxfp4
        return host_mxfp4(problem, a, weight, **kwargs)
    fn = _torch_fns.get("mxfp4_gemm") or _load_torch_fn("mxfp4_gemm")
    return fn(problem, a, weight, **kwargs)


_torch_fns = {}


def _load_torch_fn(name):
    from . import torch_ops
    fn = _torch_fns[name] = getattr(torch_ops, name)
    return fn


def mla_problem(num_heads: int, kv_lora_rank: int, rope_dim: int, topk: int, **fields) -> str:
    """Canonical sparse_mla_decode key from its fields (page_size, q_dtype, kv_dtype "fp8_ds_mla"/"bf16",
    max_q_len, checked)."""
    return problem_key("sparse_mla_decode", dict(num_heads=num_heads, kv_lora_rank=kv_lora_rank, rope_dim=rope_dim,
                                                 topk=topk, **fields))


def mxfp4_problem(n: int, k: int, **fields) -> str:
    """Canonical mxfp4_gemm key from its fields (num_experts, top_k, a_dtype, out_dtype; docs/presets.md)."""
    return problem_key("mxfp4_gemm", dict(n=n, k=k, **fields))


def xqa_decode_plan(problem, batch, max_seq_len, **kwargs):
    """What a host xqa_decode call would run (ktune.host.xqa_decode_plan)."""
    from .host import xqa_decode_plan as plan
    return plan(problem, batch, max_seq_len, **kwargs)


def sparse_mla_decode_plan(problem, num_tokens, **kwargs):
    """What a host sparse_mla_decode call would run (ktune.host_mla.sparse_mla_decode_plan)."""
    from .host_mla import sparse_mla_decode_plan as plan
    return plan(problem, num_tokens, **kwargs)


def torch_ops_available() -> bool:
    """True when torch (>= 2.4) imports and the ktune custom ops are registered."""
    try:
        from . import torch_ops  # noqa: F401
        return True
    except ImportError:
        return False


# Families: xqa_decode (xqa.py + host.py + torch_ops.py), sparse_mla_decode (mla.py + host_mla.py +
# torch_families.py),
# mxfp4_gemm (mxfp4.py: host prepack/unpack with NumPy; torch_ops.py: the GEMM ops). A new family follows the
# same pattern: key parsing + checks in its module, a C call per path, a torch.library custom op + fake.
