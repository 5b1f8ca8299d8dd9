#!/usr/bin/env python3
"""Compares the tuning rows of two or more warmed caches (the first is the reference).

usage: bench/compare_warmups.py REF.db OTHER.db [MORE.db ...] [--json OUT]

For every tuning row (family, key, device fingerprint) of the reference: whether each other cache has the row and
the same winner. Where winners differ, each row's own measurements say how far apart the two choices are: the
other winner's median over the fastest median of the same row, in both rows. The tuner's tie rule picks the
earliest candidate within 2% of the fastest, so two runs whose winners differ but sit within a few percent of each
other in both runs measured the same thing through noise; a gap beyond that in either row is a real difference.
Also counts the rows per `device_index` (the GPU that measured it, recorded by `ktune warmup --devices`).
Exit status: 0 when every cache holds exactly the reference's keys, 1 otherwise.
"""
import argparse
import json
import sqlite3
import sys
from collections import Counter


def load(path):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = {}
    for fam, key, fp, winner, cand in con.execute(
            "select family, problem_key, device_fingerprint, winner_config, candidates_json from tuning"):
        doc = json.loads(cand)
        medians = {c["config"]: c["median_ms"] for c in doc.get("candidates", []) if c.get("ok")}
        rows[(fam, key, fp)] = {"winner": winner, "medians": medians, "device_index": doc.get("device_index")}
    con.close()
    return rows


def gap(row, config):
    """config's median over the row's fastest median (1.0 = the fastest), or None if config was not measured."""
    med = row["medians"]
    if config not in med or not med:
        return None
    return med[config] / min(med.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("others", nargs="+")
    ap.add_argument("--json")
    ap.add_argument("--noise", type=float, default=0.05,
                    help="largest gap (fraction) between two runs' winners that still counts as noise (default 0.05)")
    a = ap.parse_args()
    ref = load(a.ref)
    report = {"reference": a.ref, "reference_rows": len(ref), "noise": a.noise, "others": []}
    ok = True
    print(f"reference {a.ref}: {len(ref)} tuning rows")
    print("| cache | rows | same keys | same winner | other winner within noise | other winner beyond noise | by device_index |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in a.others:
        other = load(path)
        same_keys = set(ref) == set(other)
        ok &= same_keys
        equal, noise, beyond = 0, [], []
        for k, r in ref.items():
            o = other.get(k)
            if o is None:
                continue
            if o["winner"] == r["winner"]:
                equal += 1
                continue
            g_ref, g_other = gap(r, o["winner"]), gap(o, r["winner"])
            d = {"family": k[0], "key": k[1], "ref_winner": r["winner"], "other_winner": o["winner"],
                 "other_winner_in_ref_row": g_ref, "ref_winner_in_other_row": g_other}
            within = g_ref is not None and g_other is not None and max(g_ref, g_other) <= 1 + a.noise
            (noise if within else beyond).append(d)
        by_dev = Counter(str(o["device_index"]) for o in other.values())
        print(f"| {path} | {len(other)} | {'yes' if same_keys else 'NO'} | {equal} | {len(noise)} | {len(beyond)} | "
              f"{dict(sorted(by_dev.items()))} |")
        for d in noise + beyond:
            fmt = lambda x: "not measured" if x is None else f"{x:.3f}"
            print(f"    {d['family']} {d['key']}: {d['ref_winner']} vs {d['other_winner']}"
                  f" (other's winner in the reference row {fmt(d['other_winner_in_ref_row'])} of the fastest,"
                  f" reference's winner in the other row {fmt(d['ref_winner_in_other_row'])})")
        missing = sorted(set(ref) - set(other))
        extra = sorted(set(other) - set(ref))
        for k in missing[:10]:
            print(f"    missing: {k[0]} {k[1]}")
        for k in extra[:10]:
            print(f"    extra:   {k[0]} {k[1]}")
        report["others"].append({"cache": path, "rows": len(other), "same_keys": same_keys, "same_winner": equal,
                                 "within_noise": noise, "beyond_noise": beyond, "missing": len(missing),
                                 "extra": len(extra), "by_device_index": dict(by_dev)})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
