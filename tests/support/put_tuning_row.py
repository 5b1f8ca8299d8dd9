#!/usr/bin/env python3
"""Writes one tuning row into a ktune cache file as ktune writes it (schema v2: with the row digest over its
columns, cache/src/integrity.cpp), replacing the row of the same (family, key, device). A test stand-in for a
tuning run on a device this machine does not have.

usage: put_tuning_row.py DB FAMILY PROBLEM_KEY FINGERPRINT WINNER KTUNE_VERSION
  FINGERPRINT "-": the device of the file's existing row for (FAMILY, PROBLEM_KEY).
  KTUNE_VERSION: the version that measured it (`ktune --version`); a runtime uses only its own version's rows."""
import hashlib
import sqlite3
import sys


def main(db, family, key, fingerprint, winner, version):
    con = sqlite3.connect(db)
    if fingerprint == "-":
        found = con.execute("SELECT device_fingerprint FROM tuning WHERE family = ? AND problem_key = ?",
                            (family, key)).fetchone()
        if not found:
            sys.exit(f"put_tuning_row: no row for {family} {key} in {db}")
        fingerprint = found[0]
    row = {"family": family, "problem_key": key, "device_fingerprint": fingerprint, "ktune_version": version,
           "winner_config": winner, "candidates_json": "[]", "tuned_at": 1}
    if "row_digest" in [r[1] for r in con.execute("PRAGMA table_info(tuning)")]:
        h = hashlib.sha256()
        for field in ["ktune-tuning-row-v2"] + [str(v) for v in row.values()]:
            b = field.encode()
            h.update(b"%d:" % len(b) + b)
        row["row_digest"] = h.hexdigest()
    con.execute(f"INSERT OR REPLACE INTO tuning({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                list(row.values()))
    con.commit()


if __name__ == "__main__":
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    main(*sys.argv[1:])
