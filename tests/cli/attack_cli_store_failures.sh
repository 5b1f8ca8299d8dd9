#!/usr/bin/env bash
# Offline commands never report success for results they did not store: with the cache layer unusable or
# unwritable (marked ?ro, a directory at the path, a foreign SQLite file, KTUNE_CACHE_READONLY=1) compile,
# warmup, tune, cache prune and cache merge exit non-zero naming the path and the reason; KTUNE_JIT=0 makes the
# compiling commands refuse (it applies to offline commands too); `tune --no-persist`, which stores nothing it
# needs, still runs on a read-only cache. Root-safe: no chmod tricks. No GPU needed.
# Usage: attack_cli_store_failures.sh BUILD_DIR (tools/stress/attack_table.sh runs it as a [cli] attack)
set -euo pipefail
K=$1/bin/ktune
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
P='d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none'
fails=0

# expect_failure NAME PATTERN CMD...: CMD must exit non-zero and print PATTERN (stdout or stderr).
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  if "$@" >"$tmp/out.txt" 2>&1; then
    echo "FAIL $name: exit 0 ($(tail -1 "$tmp/out.txt"))"
    fails=$((fails + 1))
  elif ! grep -qF -- "$pattern" "$tmp/out.txt"; then
    echo "FAIL $name: the error does not name '$pattern': $(cat "$tmp/out.txt")"
    fails=$((fails + 1))
  else
    echo "ok   $name: $(grep -F -- "$pattern" "$tmp/out.txt" | head -1 | cut -c1-160)"
  fi
}

compile() { "$K" compile --family xqa_decode --problem "$P" --arch sm_90a "$@"; }

# A usable cache first: the same command succeeds and its results are there (the default config's binary and
# the problem's shared module).
good=$tmp/good.db
compile --cache "$good" >"$tmp/out.txt"
grep -q "2 compiled" "$tmp/out.txt" || { echo "FAIL baseline compile: $(cat "$tmp/out.txt")"; exit 1; }
[[ $("$K" cache ls --cache "$good" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])') == 2 ]]

# Unusable or unwritable layers.
cp "$good" "$tmp/ro.db"
mkdir "$tmp/dir.db"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE t(x)'); c.commit()" \
  "$tmp/foreign.db"
expect_failure "compile ?ro (existing file)" "$tmp/ro.db" compile --cache "$tmp/ro.db?ro" --all-configs
expect_failure "compile ?ro (missing file)" "$tmp/none.db" compile --cache "$tmp/none.db?ro"
expect_failure "compile into a directory" "$tmp/dir.db" compile --cache "$tmp/dir.db"
expect_failure "compile into a foreign SQLite file" "$tmp/foreign.db" compile --cache "$tmp/foreign.db"
cp "$good" "$tmp/env_ro.db"
expect_failure "compile KTUNE_CACHE_READONLY=1" "read-only mode" env KTUNE_CACHE_READONLY=1 "$K" compile \
  --family xqa_decode --problem "$P" --arch sm_90a --all-configs --cache "$tmp/env_ro.db"
expect_failure "warmup ?ro" "$tmp/ro.db" "$K" warmup --preset gpt-oss-120b --arch sm_90a --default-only \
  --cache "$tmp/ro.db?ro"
expect_failure "warmup into a directory" "$tmp/dir.db" "$K" warmup --preset gpt-oss-120b --arch sm_90a \
  --default-only --cache "$tmp/dir.db"
expect_failure "tune ?ro" "$tmp/ro.db" "$K" tune --family xqa_decode --problem "$P" --batch 1 --max-seq-len 128 \
  --arch host --cache "$tmp/ro.db?ro"
# --no-persist stores nothing it needs, so it runs where nothing can be stored.
if [[ -f "$1/lib/libktune_host.so" ]]; then
  if "$K" tune --family xqa_decode --problem "$P" --batch 1 --max-seq-len 128 --arch host --no-persist --json \
      --cache "$tmp/ro.db?ro" >"$tmp/out.txt" 2>&1 &&
     python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d["winner"] else 1)' "$tmp/out.txt"; then
    echo "ok   tune --no-persist ?ro: winner $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["winner"])' "$tmp/out.txt")"
  else
    echo "FAIL tune --no-persist on a read-only cache: $(tail -3 "$tmp/out.txt")"
    fails=$((fails + 1))
  fi
fi
expect_failure "cache prune ?ro" "$tmp/ro.db" "$K" cache prune --cache "$tmp/ro.db?ro"
# A verify of a search path with one layer missing fails although the other is intact.
expect_failure "cache verify, one layer missing" "no cache file at $tmp/typo.db" "$K" cache verify \
  --cache "$good:$tmp/typo.db"
expect_failure "cache merge into ?ro" "$tmp/ro.db" "$K" cache merge --from "$good" --cache "$tmp/ro.db?ro"

# Locked by another writer: the first result that cannot be stored fails the command within seconds (the lock
# wait is capped), and no further compile is attempted.
cp "$good" "$tmp/locked.db"
python3 - "$tmp/locked.db" "$tmp/locked.ready" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep(120)
PY
holder=$!
for _ in $(seq 600); do [[ -e "$tmp/locked.ready" ]] && break; sleep 0.1; done
[[ -e "$tmp/locked.ready" ]] || { echo "FAIL the lock holder never took the lock"; kill "$holder"; exit 1; }
start=$SECONDS
expect_failure "compile into a file locked by another writer" "locked by another writer" compile -j 1 \
  --cache "$tmp/locked.db" --all-configs
((SECONDS - start < 60)) || { echo "FAIL a locked file took $((SECONDS - start)) s to report"; fails=$((fails + 1)); }
grep -q "not compiled, because an earlier result could not be stored" "$tmp/out.txt" ||
  { echo "FAIL compile went on compiling after a result could not be stored"; fails=$((fails + 1)); }
kill "$holder"
wait "$holder" 2>/dev/null || true

# KTUNE_JIT=0 applies to offline commands: the compiling ones refuse instead of compiling.
expect_failure "compile KTUNE_JIT=0" "KTUNE_JIT=0" env KTUNE_JIT=0 "$K" compile --family xqa_decode \
  --problem "$P" --arch sm_90a --cache "$tmp/jit.db"
expect_failure "warmup KTUNE_JIT=0" "KTUNE_JIT=0" env KTUNE_JIT=0 "$K" warmup --preset gpt-oss-120b \
  --arch sm_90a --default-only --cache "$tmp/jit.db"
[[ ! -e "$tmp/jit.db" ]] || { echo "FAIL KTUNE_JIT=0 compiled something into $tmp/jit.db"; fails=$((fails + 1)); }

# The refused files are as they were.
cmp -s "$good" "$tmp/ro.db" || { echo "FAIL the ?ro file changed"; fails=$((fails + 1)); }
cmp -s "$good" "$tmp/env_ro.db" || { echo "FAIL the KTUNE_CACHE_READONLY file changed"; fails=$((fails + 1)); }
if ((fails)); then
  echo "$fails failed"
  exit 1
fi
echo "cli store failures OK"
