#!/usr/bin/env python3
"""Static SASS instruction mix of CUBIN kernels, per loop, on a machine without nvdisasm.

What it reads: every instruction of sm_80+ SASS is 16 bytes, its opcode in the low 12 bits of the first word (the
low 9 bits name the operation, the next 3 its operand form: registers, an immediate, a constant). The names below
were found by compiling one PTX operation per kernel (nvcc -cubin, sm_90a) and reading which opcode appeared
beside a load and a store; `--calibrate` repeats that check where nvcc is installed. A branch's target is a
signed count of 4-byte words from the next instruction, its low 8 bits at bits 16..23 and the rest at bits
34..81 (checked on loops of known length, and on the out-of-line mbarrier waits of the paired sparse MLA kernel,
each of which returns to the instruction after the one that left for it). Loops are the natural loops of the
control-flow graph (a back edge into a block that dominates its source), so a wait loop whose retry ptxas placed
out of line is a small loop of its own; the innermost loops are reported, or every loop with --all-loops (a
loop's count takes each inner loop once).

What it is for: predicting what a kernel change does to the issue-bound part of a loop before a GPU run (an
instruction count per loop iteration, split by the pipe Nsight Compute names for it: alu = logic, shifts,
compares, selects, integer adds and the fast fp32->fp16 conversions; fma = fp32 and IMAD; fp16 = the packed
half / bf16 math, HFMA2 and the HFMA2.MMA form ptxas gives part of them to spread them over two pipes;
tensor; lsu = loads, stores, shuffles). Static counts are not a profile: a branch inside a loop counts both of
its sides, which --blocks tells apart.
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
    0x045: ("I2F", "xu"), 0x105: ("F2I", "xu"), 0x01A: ("SGXT", "alu"), 0x100: ("FLO", "xu"),
    0x101: ("BREV", "xu"),
    0x03C: ("HMMA", "tensor"),
    0x181: ("LDG", "lsu"), 0x186: ("STG", "lsu"), 0x184: ("LDS", "lsu"), 0x188: ("STS", "lsu"),
    0x189: ("SHFL", "lsu"), 0x03B: ("LDSM", "lsu"), 0x182: ("LDC", "lsu"),
    0x109: ("POPC", "xu"), 0x108: ("MUFU", "xu"),
    0x006: ("VOTE", "alu"), 0x005: ("CS2R", "other"), 0x0B9: ("ULDC", "uniform"), 0x1C3: ("S2UR", "other"),
    0x119: ("S2R", "other"), 0x147: ("BRA", "branch"), 0x14D: ("EXIT", "branch"), 0x11D: ("BAR", "branch"),
    0x118: ("NOP", "nop"),
    0x1A7: ("SYNCS", "sync"), 0x1B2: ("SYNCS.EXCH", "sync"), 0x1AE: ("LDGSTS", "lsu"),
    0x1AF: ("LDGDEPBAR", "sync"),
    0x1BA: ("UBLKCP", "lsu"), 0x044: ("STSM", "lsu"), 0x1F0: ("HGMMA", "tensor"), 0x1C5: ("WARPGROUP", "sync"),
}
UNIFORM_OFFSET = 0x080


def decode(blob):
    """[(offset, opcode12, lo, hi)] for every 16-byte instruction."""
    out = []
    for off in range(0, len(blob) - 15, 16):
        lo, hi = struct.unpack_from("<QQ", blob, off)
        out.append((off, lo & 0xFFF, lo, hi))
    return out


def name_of(op12):
    op = op12 & 0x1FF
    if op in OPS:
        return OPS[op]
    if op - UNIFORM_OFFSET in OPS and OPS[op - UNIFORM_OFFSET][1] in ("alu", "fma"):
        return ("U" + OPS[op - UNIFORM_OFFSET][0], "uniform")
    return (f"op{op12:03x}", "unknown")


def branch_target(off, lo, hi):
    # The offset in words of 4 bytes: its low 8 bits at bits 16..23, the rest (signed) at bits 34..81.
    upper = (lo >> 34) | ((hi & 0x3FFFF) << 30)
    if upper & (1 << 47):
        upper -= 1 << 48
    return off + 16 + 4 * (((lo >> 16) & 0xFF) | (upper << 8))


def is_branch(op12):
    return op12 & 0x1FF == 0x147


def ends_block(op12):  # a branch or EXIT
    return is_branch(op12) or op12 & 0x1FF == 0x14D


def unconditional(lo, hi):
    # The guard predicate (bits 12..15: PT = 7, bit 15 negates) and the uniform one (bits 87..90: UPT = 7).
    return (lo >> 12) & 0xF == 0x7 and (hi >> 23) & 0xF == 0x7


def cfg(insts):
    """Basic blocks of the whole kernel and their successors: {first offset: (last offset, [successor firsts])}.
    A block ends after a branch or EXIT and before a branch target; a predicated branch or EXIT also falls
    through."""
    end = insts[-1][0] + 16 if insts else 0
    leaders = {0}
    for off, op12, lo, hi in insts:
        if ends_block(op12):
            leaders.add(off + 16)
        if is_branch(op12):
            t = branch_target(off, lo, hi)
            if 0 <= t < end:
                leaders.add(t)
    firsts = sorted(x for x in leaders if x < end)
    by_off = {i[0]: i for i in insts}
    out = {}
    for k, first in enumerate(firsts):
        last = (firsts[k + 1] if k + 1 < len(firsts) else end) - 16
        _, op12, lo, hi = by_off[last]
        succ = []
        if is_branch(op12):
            t = branch_target(last, lo, hi)
            if 0 <= t < end:
                succ.append(t)
        falls = not (ends_block(op12) and unconditional(lo, hi))
        if falls and last + 16 < end:
            succ.append(last + 16)
        out[first] = (last, succ)
    return out


def loops(insts):
    """Natural loops: [(header, sorted block firsts)], one per header (the back edges into a header merged),
    a back edge being an edge u -> h where h dominates u. Iterative dominators over the blocks reachable from 0."""
    g = cfg(insts)
    order, seen, stack = [], set(), [0]
    while stack:  # reachable blocks
        b = stack.pop()
        if b in seen or b not in g:
            continue
        seen.add(b)
        order.append(b)
        stack.extend(g[b][1])
    preds = {b: [] for b in order}
    for b in order:
        for t in g[b][1]:
            if t in preds:
                preds[t].append(b)
    dom = {b: set(order) for b in order}
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in order:
            if b == 0:
                continue
            new = set.intersection(*(dom[p] for p in preds[b])) if preds[b] else set()
            new = new | {b}
            if new != dom[b]:
                dom[b], changed = new, True
    bodies = {}
    for u in order:
        for h in g[u][1]:
            if h in dom[u]:  # back edge u -> h
                body, work = {h}, [u]
                while work:
                    x = work.pop()
                    if x not in body:
                        body.add(x)
                        work.extend(preds[x])
                bodies.setdefault(h, set()).update(body)
    return [(h, sorted(bodies[h])) for h in sorted(bodies)], g


def mix(insts, ranges):
    """Counts by name and by pipe over the instructions in [(first, last), ...]."""
    by_name, by_pipe = {}, {}
    for off, op12, _, _ in insts:
        if any(a <= off <= b for a, b in ranges):
            name, pipe = name_of(op12)
            if pipe == "nop":
                continue
            by_name[name] = by_name.get(name, 0) + 1
            by_pipe[pipe] = by_pipe.get(pipe, 0) + 1
    return by_name, by_pipe


def fmt_counts(d):
    return " ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0])))


def report(path, kernel_filter, all_loops, dump, show_blocks):
    for sec, blob in sorted(sections(path).items()):
        if not sec.startswith(".text.") or (kernel_filter and kernel_filter not in sec):
            continue
        insts = decode(blob)
        n, pipes = mix(insts, [(0, len(blob))])
        print(f"{os.path.basename(path)}  {sec[6:]}")
        print(f"  whole kernel: {sum(n.values())} instructions; {fmt_counts(pipes)}")
        found, g = loops(insts)
        headers = {h for h, _ in found}
        for h, body in found:
            inner = sorted(x for x in headers & set(body) if x != h)
            if inner and not all_loops:
                continue
            ranges = [(x, g[x][0]) for x in body]
            n, pipes = mix(insts, ranges)
            nest = ""
            if inner:
                nest = f", holding the loops at {', '.join(f'0x{x:x}' for x in inner)} (each counted once)"
            print(f"  loop at 0x{h:x} ({len(body)} blocks{nest}): {sum(n.values())} instructions; "
                  f"{fmt_counts(pipes)}")
            print(f"    {fmt_counts(n)}")
            if show_blocks:
                for x in body:
                    bn, _ = mix(insts, [(x, g[x][0])])
                    to = " -> " + ", ".join(f"0x{t:x}" for t in g[x][1]) if g[x][1] else ""
                    print(f"      block 0x{x:x}..0x{g[x][0]:x}{to}: {sum(bn.values())}: {fmt_counts(bn)}")
        if dump:
            for off, op12, lo, hi in insts:
                extra = f" -> 0x{branch_target(off, lo, hi):x}" if is_branch(op12) else ""
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
        subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-O3", "-diag-suppress", "177",
                        os.path.join(here, "sass_ops.cu"), "-o", cubin], check=True)
        kernels = {sec[6:]: decode(blob) for sec, blob in sections(cubin).items() if sec.startswith(".text.")}
    base = {i[1] for i in kernels.pop("k_base")}
    bad = 0
    for k, insts in sorted(kernels.items()):
        added = sorted({name_of(i[1])[0] for i in insts if i[1] not in base})
        if k == "k_loop":
            found, g = loops(insts)
            counts = [mix(insts, [(x, g[x][0]) for x in body])[0] for _, body in found]
            ok = any(c.get("POPC") and c.get("LDG") for c in counts)
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
