#!/usr/bin/env python3
"""Static SASS instruction mix of CUBIN kernels, per loop, on a machine without nvdisasm.

What it reads: every instruction of sm_80+ SASS is 16 bytes, its opcode in the low 12 bits of the first word (the
low 9 bits name the operation, the next 3 its operand form: registers, an immediate, a constant). The names below
were found by compiling one PTX operation per kernel (nvcc -cubin, sm_90a) and reading which opcode appeared
beside a load and a store; `--calibrate` repeats that check where nvcc is installed. A branch's target is the
signed field of bits 32..81 times 256 plus bits 16..23 times 4, relative to the next instruction (checked on
loops of known length). Loops are the spans [target, branch] of backward branches; the innermost are reported.
Where ptxas puts a wait loop's retry out of line (the mbarrier waits of warp-specialized kernels), its backward
branch makes a span over much of the role's body: read such kernels with --blocks or --dump.

What it is for: predicting what a kernel change does to the issue-bound part of a loop before a GPU run (an
instruction count per loop iteration, split by the pipe Nsight Compute names for it: alu = logic, shifts,
compares, selects, integer adds and the fast fp32->fp16 conversions; fma = fp32 and IMAD; fp16 = the packed
half / bf16 math, HFMA2 and the HFMA2.MMA form ptxas gives part of them to spread them over two pipes; tensor; lsu =
loads, stores, shuffles). Static counts are not a profile: a branch inside a loop counts both of its sides, which
--blocks tells apart.
    python3 bench/dev/sass_mix.py CUBIN|DIR [--kernel SUBSTR] [--all-loops] [--blocks] [--dump]
    python3 bench/dev/sass_mix.py --calibrate        (needs nvcc) checks the table against bench/dev/sass_ops.cu
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_cubins import sections  # noqa: E402

# Low 9 bits of the opcode -> (name, pipe). Uniform-datapath forms are +0x80 of the vector op. Every name with a
# k_<NAME> kernel in sass_ops.cu is checked by --calibrate; MOV, VIADD, PLOP3, SGXT, CS2R, S2R, S2UR and ULDC are
# named from where ptxas places them (an add of an immediate, predicate logic, a register pair zeroed, special
# registers read), not calibrated.
OPS = {
    0x002: ("MOV", "alu"), 0x007: ("SEL", "alu"), 0x009: ("FMNMX", "alu"), 0x00C: ("ISETP", "alu"),
    0x00B: ("FSETP", "alu"), 0x010: ("IADD3", "alu"), 0x011: ("LEA", "alu"), 0x012: ("LOP3", "alu"),
    0x016: ("PRMT", "alu"), 0x019: ("SHF", "alu"), 0x01C: ("PLOP3", "alu"), 0x036: ("VIADD", "unsure"),
    0x048: ("VIMNMX", "alu"), 0x03E: ("F2FP", "alu"),
    0x020: ("FMUL", "fma"), 0x021: ("FADD", "fma"), 0x023: ("FFMA", "fma"), 0x024: ("IMAD", "fma"),
    0x025: ("IMAD.WIDE", "fma"), 0x035: ("HFMA2", "fp16"), 0x032: ("HFMA2.MMA", "fp16"),
    0x045: ("I2F", "xu"), 0x105: ("F2I", "xu"), 0x01A: ("SGXT", "alu"), 0x100: ("FLO", "xu"), 0x101: ("BREV", "xu"),
    0x03C: ("HMMA", "tensor"),
    0x181: ("LDG", "lsu"), 0x186: ("STG", "lsu"), 0x184: ("LDS", "lsu"), 0x188: ("STS", "lsu"),
    0x189: ("SHFL", "lsu"), 0x03B: ("LDSM", "lsu"), 0x182: ("LDC", "lsu"),
    0x109: ("POPC", "xu"), 0x108: ("MUFU", "xu"),
    0x006: ("VOTE", "alu"), 0x005: ("CS2R", "other"), 0x0B9: ("ULDC", "uniform"), 0x1C3: ("S2UR", "other"),
    0x119: ("S2R", "other"), 0x147: ("BRA", "branch"), 0x14D: ("EXIT", "branch"), 0x11D: ("BAR", "branch"),
    0x118: ("NOP", "nop"),
    0x1A7: ("SYNCS", "sync"), 0x1B2: ("SYNCS.EXCH", "sync"), 0x1AE: ("LDGSTS", "lsu"), 0x1AF: ("LDGDEPBAR", "sync"),
    0x1BA: ("UBLKCP", "lsu"), 0x044: ("STSM", "lsu"), 0x1F0: ("HGMMA", "tensor"), 0x1C5: ("WARPGROUP", "sync"),
}
UNIFORM_OFFSET = 0x080


def decode(blob):
    """[(offset, opcode12, lo, hi)] for every 16-byte instruction."""
    return [(off,) + ((struct.unpack_from("<Q", blob, off)[0]) & 0xFFF,) + struct.unpack_from("<QQ", blob, off)
            for off in range(0, len(blob) - 15, 16)]


def name_of(op12):
    op = op12 & 0x1FF
    if op in OPS:
        return OPS[op]
    if op - UNIFORM_OFFSET in OPS and OPS[op - UNIFORM_OFFSET][1] in ("alu", "fma"):
        return ("U" + OPS[op - UNIFORM_OFFSET][0], "uniform")
    return (f"op{op12:03x}", "unknown")


def branch_target(off, lo, hi):
    upper = (lo >> 32) | ((hi & 0x3FFFF) << 32)  # bits 32..81, signed
    if upper & (1 << 49):
        upper -= 1 << 50
    return off + 16 + 256 * upper + 4 * ((lo >> 16) & 0xFF)


def loops(insts):
    """(start, end) byte offsets of every backward branch's span, end = the branch itself."""
    out = []
    for off, op12, lo, hi in insts:
        if op12 & 0x1FF == 0x147:
            t = branch_target(off, lo, hi)
            if t <= off and t % 16 == 0 and t >= 0:
                out.append((t, off))
    return out


def mix(insts, start, end):
    by_name, by_pipe = {}, {}
    for off, op12, _, _ in insts:
        if start <= off <= end:
            name, pipe = name_of(op12)
            if pipe == "nop":
                continue
            by_name[name] = by_name.get(name, 0) + 1
            by_pipe[pipe] = by_pipe.get(pipe, 0) + 1
    return by_name, by_pipe


def blocks(insts, start, end):
    """Basic blocks of [start, end]: split after every branch and at every branch target inside the span.
    [(first, last, branch target or None)]."""
    cuts = {start}
    for off, op12, lo, hi in insts:
        if start <= off <= end and op12 & 0x1FF == 0x147:
            cuts.add(off + 16)
            t = branch_target(off, lo, hi)
            if start <= t <= end:
                cuts.add(t)
    edges = sorted(c for c in cuts if c <= end) + [end + 16]
    out = []
    for a, b in zip(edges, edges[1:]):
        last = b - 16
        tail = [i for i in insts if i[0] == last]
        target = branch_target(*tail[0][:1], *tail[0][2:]) if tail and tail[0][1] & 0x1FF == 0x147 else None
        out.append((a, last, target))
    return out


def fmt_counts(d):
    return " ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def report(path, kernel_filter, all_loops, dump, show_blocks):
    for sec, blob in sorted(sections(path).items()):
        if not sec.startswith(".text.") or (kernel_filter and kernel_filter not in sec):
            continue
        insts = decode(blob)
        n, pipes = mix(insts, 0, len(blob))
        print(f"{os.path.basename(path)}  {sec[6:]}")
        print(f"  whole kernel: {sum(n.values())} instructions; {fmt_counts(pipes)}")
        spans = loops(insts)
        inner = [s for s in spans if all(not (o != s and s[0] <= o[0] and o[1] <= s[1]) for o in spans)]
        for start, end in sorted(spans if all_loops else inner):
            n, pipes = mix(insts, start, end)
            print(f"  loop 0x{start:x}..0x{end:x}: {sum(n.values())} instructions; {fmt_counts(pipes)}")
            print(f"    {fmt_counts(n)}")
            if show_blocks:
                for a, b, t in blocks(insts, start, end):
                    bn, _ = mix(insts, a, b)
                    to = f" -> 0x{t:x}" if t is not None else ""
                    print(f"      block 0x{a:x}..0x{b:x}{to}: {sum(bn.values())}: {fmt_counts(bn)}")
        if dump:
            for off, op12, lo, hi in insts:
                extra = f" -> 0x{branch_target(off, lo, hi):x}" if op12 & 0x1FF == 0x147 else ""
                print(f"    {off:05x} {name_of(op12)[0]:<10} {lo:016x} {hi:016x}{extra}")


def calibrate():
    """Compiles sass_ops.cu with nvcc and checks every k_<NAME>[__<NAME>...] kernel adds opcodes the table names
    NAME (an underscore in a name stands for a dot), and that the loop kernel's loop is found. Exit 1 on any
    mismatch."""
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "ops.cubin")
        subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-O3", "-diag-suppress", "177", os.path.join(here, "sass_ops.cu"), "-o", cubin],
                       check=True)
        kernels = {sec[6:]: decode(blob) for sec, blob in sections(cubin).items() if sec.startswith(".text.")}
    base = {i[1] for i in kernels.pop("k_base")}
    bad = 0
    for k, insts in sorted(kernels.items()):
        added = sorted({name_of(i[1])[0] for i in insts if i[1] not in base})
        if k == "k_loop":
            ok = any(mix(insts, s, e)[0].get("POPC") and mix(insts, s, e)[0].get("LDG") for s, e in loops(insts))
        else:
            ok = all(n.replace("_", ".") in added for n in k[2:].split("__"))
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {k}: {' '.join(added)}")
    sys.exit(1 if bad else 0)


def main():
    if sys.argv[1:] == ["--calibrate"]:
        calibrate()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="a .cubin, or a folder of them (KTUNE_DUMP)")
    ap.add_argument("--kernel", help="only .text sections whose name contains this")
    ap.add_argument("--all-loops", action="store_true", help="every loop, not only the innermost")
    ap.add_argument("--blocks", action="store_true", help="each loop's basic blocks with their counts")
    ap.add_argument("--dump", action="store_true", help="every instruction's name and words")
    a = ap.parse_args()
    paths = [os.path.join(a.path, f) for f in sorted(os.listdir(a.path)) if f.endswith(".cubin")] \
        if os.path.isdir(a.path) else [a.path]
    for p in paths:
        report(p, a.kernel, a.all_loops, a.dump, a.blocks)


if __name__ == "__main__":
    main()
