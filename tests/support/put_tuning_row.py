#!/usr/bin/env python3
"""Writes one tuning row into a ktune cache file as ktune writes it (schema v2: with the row digest over its
columns, cache/src/integrity.cpp; candidates_json a "ktune.tuning.v1" document with the winner as the one
candidate), replacing the row of the same (family, key, device). A test stand-in for a tuning run on a device
this machine does not have.

usage: put_tuning_row.py DB FAMILY PROBLEM_KEY FINGERPRINT WINNER KTUNE_VERSION
  FINGERPRINT "-": the device of the file's existing row for (FAMILY, PROBLEM_KEY).
  KTUNE_VERSION: the version that measured it (`ktune --version`); a runtime uses only its own version's rows.
As a module: main(...) as above; set_candidates_field(DB, NAME, VALUE) sets one field of every row's
candidates_json (e.g. compiler_version) and recomputes the row digests."""
import hashlib
import json
import sqlite3
import sys

COLUMNS = ["family", "problem_key", "device_fingerprint", "ktune_version", "winner_config", "candidates_json",
           "tuned_at"]


def write_row(con, row):
    if "row_digest" in [r[1] for r in con.execute("PRAGMA table_info(tuning)")]:
        h = hashlib.sha256()
        for field in ["ktune-tuning-row-v2"] + [str(row[c]) for c in COLUMNS]:
            b = field.encode()
            h.update(b"%d:" % len(b) + b)
        row = dict(row, row_digest=h.hexdigest())
    con.execute(f"INSERT OR REPLACE INTO tuning({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()))


def main(db, family, key, fingerprint, winner, version):
    con = sqlite3.connect(db)
    if fingerprint == "-":
        found = con.execute("SELECT device_fingerprint FROM tuning WHERE family = ? AND problem_key = ?",
                            (family, key)).fetchone()
        if not found:
            sys.exit(f"put_tuning_row: no row for {family} {key} in {db}")
        fingerprint = found[0]
    doc = {"format": "ktune.tuning.v1", "family": family, "problem_key": key, "device_fingerprint": fingerprint,
           "ktune_version": version, "tuned_at": 1, "noise_fraction": 0.02, "winner": winner,
           "candidates": [{"config": winner, "ok": True, "median_ms": 1.0, "spread": 0.0, "rounds": 1,
                           "stable": True, "samples_ms": [1.0]}]}
    write_row(con, {"family": family, "problem_key": key, "device_fingerprint": fingerprint, "ktune_version": version,
                    "winner_config": winner, "candidates_json": json.dumps(doc), "tuned_at": 1})
    con.commit()


def set_candidates_field(db, name, value):
    """Every row's candidates_json with `name` set to `value`; returns the number of rows rewritten."""
    con = sqlite3.connect(db)
    rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM tuning").fetchall()
    for r in rows:
        row = dict(zip(COLUMNS, r))
        doc = json.loads(row["candidates_json"])
        doc[name] = value
        row["candidates_json"] = json.dumps(doc)
        write_row(con, row)
    con.commit()
    return len(rows)


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    main(*sys.argv[1:])
