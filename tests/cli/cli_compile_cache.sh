#!/usr/bin/env bash
# The compile cache through the CLI, no GPU: compile one xqa_decode problem for three arches (its default config
# and its shared module on each: 6 binaries), again (0 compiled, 6 hits), verify (intact), flip a byte of one
# blob (verify names it; the next compile rebuilds it instead of loading it); verify while a writer commits (no
# report, exit 1).
# Usage: cli_compile_cache.sh <ktune binary>
set -euo pipefail
K=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/c.db
P='d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none'
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

out=$("$K" compile --family xqa_decode --problem "$P" --arch sm_90a,sm_100a,sm_120a --cache "$db" --json)
[[ $(echo "$out" | json compiled) == 6 ]] || { echo "first compile: $out"; exit 1; }
[[ $(echo "$out" | python3 -c 'import json, sys; print(sum(k["name"].endswith("/shared") for k in json.load(sys.stdin)["kernels"]))') == 3 ]] ||
  { echo "first compile, shared modules: $out"; exit 1; }
[[ $(echo "$out" | json cache_hits) == 0 ]] || { echo "first compile: $out"; exit 1; }
out=$("$K" compile --family xqa_decode --problem "$P" --arch sm_90a,sm_100a,sm_120a --cache "$db" --json)
[[ $(echo "$out" | json compiled) == 0 ]] || { echo "second compile: $out"; exit 1; }
[[ $(echo "$out" | json cache_hits) == 6 ]] || { echo "second compile: $out"; exit 1; }
"$K" cache verify --cache "$db" | grep -q "6 binaries checked: all intact"
[[ $("$K" cache ls --cache "$db" --json | json count) == 6 ]]

# Flip one byte inside the sm_100a config blob.
python3 - "$db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
digest, blob = con.execute("SELECT digest, blob FROM binaries WHERE arch = 'sm_100a' AND name NOT LIKE '%/shared'").fetchone()
b = bytearray(blob); b[len(b) // 2] ^= 0x40
con.execute("UPDATE binaries SET blob = ? WHERE digest = ?", (bytes(b), digest)); con.commit()
PY
if "$K" cache verify --cache "$db" >"$tmp/verify.txt"; then echo "verify missed the damage"; exit 1; fi
grep -q "DAMAGED xqa_decode/sm_100a/$P" "$tmp/verify.txt"
# The damaged entry is skipped and rebuilt (KTUNE_JIT=0 refusing it instead is tests/runtime/test_runtime_cache.cpp).
out=$("$K" compile --family xqa_decode --problem "$P" --arch sm_90a,sm_100a,sm_120a --cache "$db" --json)
[[ $(echo "$out" | json compiled) == 1 ]] || { echo "damaged entry not rebuilt: $out"; exit 1; }
[[ $(echo "$out" | json cache_hits) == 5 ]] || { echo "after repair: $out"; exit 1; }
"$K" cache verify --cache "$db" | grep -q "all intact"

# A layer committed to while verify reads it: the checks' passes may read different states, so verify gives no
# report and fails, naming the file. The writer commits without pause from before verify starts until it ends,
# but on a loaded machine it may get no time slice inside one verify's few milliseconds; a verify that saw no
# commit rightly reports, so verify runs until one sees the change (at most 50 times: a verify that never does
# fails the test).
python3 - "$db" "$tmp/writing" "$tmp/stop" <<'PY' &
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA wal_autocheckpoint=0")
con.execute("CREATE TABLE IF NOT EXISTS scratch(x)")
open(sys.argv[2], "w").close()
i = 0
while not os.path.exists(sys.argv[3]):
    con.execute("INSERT INTO scratch VALUES (?)", (i,))
    i += 1
PY
writer=$!
while [[ ! -e $tmp/writing ]]; do sleep 0.01; done
for attempt in $(seq 50); do
  status=0
  "$K" cache verify --cache "$db" --json >"$tmp/live.json" || status=$?
  [[ $status == 0 ]] || break
done
touch "$tmp/stop" && wait $writer
[[ $status == 1 && $(json stable <"$tmp/live.json") == False ]] ||
  { echo "verify of a layer being written (attempt $attempt): $(cat "$tmp/live.json")"; exit 1; }
grep -q "c.db-wal changed while it was verified" "$tmp/live.json"
"$K" cache verify --cache "$db" | grep -q "all intact"  # quiet again: the same file verifies
echo "cli compile/cache OK"
