#!/usr/bin/env python3
"""Compares the CUBINs of two KTUNE_DUMP folders (same file names) section by section.

NVRTC names internal-linkage symbols with a per-process id, so two compiles of the same source never give
byte-identical files; what must match is the code. Reported per file: the .text (SASS) sections byte for byte,
the .nv.info attributes (registers, frame and stack sizes, parameter banks) with symbol indices resolved to
names, and the symbols only one side has.
    python3 bench/dev/compare_cubins.py BEFORE_DIR AFTER_DIR      exit 1 if any .text or .nv.info differs
    python3 bench/dev/compare_cubins.py --by-function BEFORE_DIR AFTER_DIR
        for kernels that moved into a problem's shared module: each kernel's .text in each module before against
        the same kernel after, in the module of the same (problem, config) or else in the problem's `shared`
        module; exit 1 if any differs or is unmatched
"""
import os
import re
import struct
import sys


def sections(path):
    d = open(path, "rb").read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        raise SystemExit(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    names_off = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = d[names_off + h[0]:d.index(b"\0", names_off + h[0])].decode()
        out[name] = d[h[4]:h[4] + h[5]] if h[1] != 8 else b""  # 8: NOBITS
    return out


def symbol_names(s):
    tab, strs = s.get(".symtab", b""), s.get(".strtab", b"")
    names = []
    for k in range(len(tab) // 24):
        off, = struct.unpack_from("<I", tab, k * 24)
        names.append(strs[off:strs.index(b"\0", off)].decode())
    return names


def info_attrs(blob, names):
    """EIATTR entries; the (symbol index, value) ones with the index replaced by the symbol's name."""
    out, i = [], 0
    while i + 2 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        if fmt == 0x04:  # EIFMT_SVAL: u16 size, then the value
            size, = struct.unpack_from("<H", blob, i + 2)
            val, i = blob[i + 4:i + 4 + size], i + 4 + size
        else:
            val, i = blob[i + 2:i + 4], i + 4
        if attr in (0x0A, 0x11, 0x12, 0x23, 0x2F) and len(val) >= 8:  # PARAM_CBANK, FRAME/MIN/MAX_STACK, REGCOUNT
            idx, = struct.unpack_from("<I", val, 0)
            out.append((attr, names[idx] if idx < len(names) else idx, val[4:]))
        else:
            out.append((attr, val))
    return out


def stable(name):  # internal names carry NVRTC's per-process id: _INTERNAL_<n>_<len>_<file>_cu_<hash>_<id>
    return re.sub(r"_cu_[0-9a-f]{8}_[0-9]+", "_cu_", name)


def main(before, after):
    bad = 0
    files = sorted(f for f in os.listdir(before) if f.endswith(".cubin"))
    for f in files:
        a, b = sections(os.path.join(before, f)), sections(os.path.join(after, f))
        na, nb = symbol_names(a), symbol_names(b)
        text = [n for n in sorted(set(a) | set(b)) if n.startswith(".text") and a.get(n) != b.get(n)]
        info = [n for n in sorted(set(a) | set(b)) if n.startswith(".nv.info")
                and info_attrs(a.get(n, b""), na) != info_attrs(b.get(n, b""), nb)]
        gone = sorted({stable(x) for x in na} - {stable(x) for x in nb})
        new = sorted({stable(x) for x in nb} - {stable(x) for x in na})
        status = "SAME CODE" if not text and not info else "DIFFERENT"
        bad += status != "SAME CODE"
        print(f"{status}  {f}" + (f"  text: {text}" if text else "") + (f"  info: {info}" if info else "") +
              (f"  symbols only before: {gone}" if gone else "") + (f"  only after: {new}" if new else ""))
    print(f"{len(files) - bad} of {len(files)} cubins: identical .text and .nv.info")
    return 1 if bad else 0


def by_module(folder):
    """{(problem key, config key): {kernel .text section name: code}} from KTUNE_DUMP's file names
    (<family>_<arch>_<problem>_<config>.cubin; keys have no underscores)."""
    out = {}
    for f in sorted(x for x in os.listdir(folder) if x.endswith(".cubin")):
        problem, config = f[:-len(".cubin")].rsplit("_", 2)[1:]
        out[(problem, config)] = {stable(n): code for n, code in sections(os.path.join(folder, f)).items()
                                  if n.startswith(".text.")}
    return out


def main_by_function(before, after):
    """Each kernel of each module before against the same kernel after, found in the module of the same
    (problem, config) or else in the problem's shared module."""
    a, b = by_module(before), by_module(after)
    same, bad, seen = 0, 0, set()
    for (problem, config), fns in a.items():
        for n, code in fns.items():
            for where in ((problem, config), (problem, "shared")):
                if n in b.get(where, {}):
                    seen.add((where, n))
                    if b[where][n] == code:
                        same += 1
                    else:
                        bad += 1
                        print(f"DIFFERENT  {n[6:]}  {problem}/{config} before, {where[1]} after")
                    break
            else:
                bad += 1
                print(f"ONLY BEFORE  {n[6:]}  {problem}/{config}")
    for where, fns in b.items():
        for n in fns:
            if (where, n) not in seen:
                bad += 1
                print(f"ONLY AFTER  {n[6:]}  {where[0]}/{where[1]}")
    print(f"{same} kernel instances of {len(a)} modules before: the same .text after; {bad} differ or are unmatched")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--by-function":
        sys.exit(main_by_function(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
