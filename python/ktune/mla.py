"""sparse_mla_decode (DeepSeek V3.2 sparse MLA decode, docs/sparse_mla_decode.md): problem keys and the argument
checks of the torch op (ktune.torch_ops). The NumPy host path is ktune.host_mla."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import invalid

_KEY_RE = re.compile(r"^h(\d+)\.r(\d+)\.d(\d+)\.k(\d+)\.p(\d+)\.(\w+)-(\w+)\.q(\d+)((?:\.\w+)*)$")


@dataclass(frozen=True)
class MlaInfo:
    key: str
    num_heads: int
    kv_lora_rank: int
    rope_dim: int
    topk: int
    page_size: int
    q_dtype: str
    kv_dtype: str  # "fp8ds" or "bf16"
    max_q_len: int

    @property
    def row_bytes(self):
        """Bytes of one cache row: fp8_ds_mla = rank e4m3 + one fp32 scale per 128 + rope bf16; bf16 = 2 x dims."""
        if self.kv_dtype == "fp8ds":
            return self.kv_lora_rank + 4 * (self.kv_lora_rank // 128) + 2 * self.rope_dim
        return 2 * (self.kv_lora_rank + self.rope_dim)


_info = {}


def parse_key(key: str) -> MlaInfo:
    hit = _info.get(key)
    if hit is not None:
        return hit
    m = _KEY_RE.match(key) if isinstance(key, str) else None
    if not m:
        raise invalid(f"sparse_mla_decode: problem: expected a canonical key such as "
                      f"'h128.r512.d64.k2048.p64.bf16-fp8ds.q1' (see ktune.mla_problem), got {key!r}")
    info = MlaInfo(key, int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                   m.group(6), m.group(7), int(m.group(8)))
    _info[key] = info
    return info


def canonical(problem) -> MlaInfo:
    from .runtime import problem_key
    if isinstance(problem, str) and problem in _info:
        return _info[problem]
    info = parse_key(problem_key("sparse_mla_decode", problem))
    if isinstance(problem, str):
        _info[problem] = info
    return info
