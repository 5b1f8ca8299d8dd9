#!/usr/bin/env bash
# `ktune replay` proves the engine's path on a cache with binaries but no tuning rows -- the image a machine
# without the target device builds (ctest: host_cli_replay_untuned). On the host backend: warm up a one-op
# preset, delete every tuning row, then replay with KTUNE_JIT=0: exit 0, 0 compiles, 0 tunings, and per op the
# config the runtime chose ("default", the family's default config). A tuning row naming a config the family
# cannot run is not forced either: the runtime falls back to its default and replay reports that, as it does for
# a row another ktune version tuned, or a damaged row (with a warning naming it). A tuned row is reported as
# "tuned" with its winner. Skips (exit 77, saying why) without the LLVM host backend; fails instead under
# KTUNE_TEST_REQUIRE=host.
# usage: cli_replay_untuned.sh BUILD_DIR
set -euo pipefail
build="${1:?usage: cli_replay_untuned.sh BUILD_DIR}"
ktune="$build/bin/ktune"
source "$(dirname "$0")/../support/skip.sh"
[[ -f "$build/lib/libktune_host.so" ]] || skip_or_fail host "$build/lib/libktune_host.so was not built (LLVM 19 absent)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KTUNE_CACHE="$tmp/host.db"
preset="$tmp/one-op.json"
cat >"$preset" <<'JSON'
{"name": "one-op", "description": "one small xqa_decode op, one bucket",
 "buckets": {"batch": {"min": 1, "max": 1}, "seq_len": {"min": 256, "max": 256}},
 "ops": [{"label": "attn", "family": "xqa_decode",
          "problem": {"head_dim": 64, "num_q_heads": 4, "num_kv_heads": 1, "page_size": 16}}]}
JSON
key='d64.h4.kv1.p16.hnd.bf16-bf16-bf16.q1.none|b1.l256'
sql() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()' \
  "$KTUNE_CACHE" "$1"; }
json() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }
want() {  # want JSON EXPR EXPECTED WHAT: EXPR over the JSON output must print EXPECTED
  local got
  got="$(json "$2" <<<"$1")"
  [[ "$got" == "$3" ]] || { echo "FAIL: $4: $2 is $got, want $3"; exit 1; }
}
replay() { KTUNE_JIT=0 "$ktune" replay --preset "$preset" --arch host "$@"; }

warm="$("$ktune" warmup --preset "$preset" --arch host --json)"
echo "warmup: $warm"
want "$warm" 'd["tuned"]' 1 "warmup"
winner="$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
  "SELECT winner_config FROM tuning").fetchone()[0])' "$KTUNE_CACHE")"

# 1. Tuned: the runtime picks the row's winner.
out="$(replay --json)"
echo "replay (tuned): $out"
want "$out" '(d["compiles"], d["tunings"], len(d["ops"]))' "(0, 0, 1)" "tuned replay"
want "$out" '(d["ops"][0]["key"], d["ops"][0]["source"], d["ops"][0]["config"])' "('$key', 'tuned', '$winner')" \
  "tuned replay"

default="$("$ktune" compile --family xqa_decode --arch host --problem "${key%%|*}" --json |
  json 'd["kernels"][0]["name"].split("/")[-1]')"

# 2. A row (with a valid row digest) whose winner the family cannot run: not forced; the engine's default runs
#    and is reported.
version="$("$ktune" --version | cut -d' ' -f2)"
python3 "$(dirname "$0")/../support/put_tuning_row.py" "$KTUNE_CACHE" xqa_decode "$key" - t4096.v3.u9 "$version"
out="$(replay --json)" || { echo "FAIL: replay with an unusable tuning row exited $?: $out"; exit 1; }
echo "replay (unusable row): $out"
want "$out" '(d["compiles"], d["ops"][0]["source"], d["ops"][0]["config"])' "(0, 'default', '$default')" \
  "replay with an unusable row"

# 2b. A runnable config other than the default (warmup compiled every candidate), in a row another ktune version
#     measured: not used (that version's kernels may differ), the default runs. The same row under this version
#     is used.
other="$("$ktune" compile --family xqa_decode --arch host --problem "${key%%|*}" --all-configs --json |
  json "[c for c in (k['name'].split('/')[-1] for k in d['kernels']) if c != '$default'][0]")"
python3 "$(dirname "$0")/../support/put_tuning_row.py" "$KTUNE_CACHE" xqa_decode "$key" - "$other" 0.0.1
out="$(replay --json 2>"$tmp/stale.err")" || { echo "FAIL: replay with another version's row exited $?: $out"; exit 1; }
echo "replay (another version's row): $out"
grep -qF "was measured by ktune 0.0.1, not this ktune $version; using the default" "$tmp/stale.err" ||
  { echo "FAIL: no warning names the other version's row"; cat "$tmp/stale.err"; exit 1; }
want "$out" '(d["compiles"], d["ops"][0]["source"], d["ops"][0]["config"])' "(0, 'default', '$default')" \
  "replay with another version's row"
# A warmup of this version tunes that key again instead of counting it done, and stores its own row.
again="$("$ktune" warmup --preset "$preset" --arch host --json)"
echo "warmup over another version's row: $again"
want "$again" '(d["tuned"], d["already_done"])' "(1, 0)" "warmup over another version's row"
[[ "$(python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(
  "SELECT ktune_version FROM tuning").fetchone()[0])' "$KTUNE_CACHE")" == "$version" ]] ||
  { echo "FAIL: warmup left another version's tuning row"; exit 1; }
# Its own row: the next warmup counts the key done; --retune measures it again.
want "$("$ktune" warmup --preset "$preset" --arch host --json)" '(d["tuned"], d["already_done"])' "(0, 1)" \
  "warmup over this version's row"
want "$("$ktune" warmup --preset "$preset" --arch host --retune --json)" '(d["tuned"], d["already_done"])' "(1, 0)" \
  "warmup --retune"
python3 "$(dirname "$0")/../support/put_tuning_row.py" "$KTUNE_CACHE" xqa_decode "$key" - "$other" "$version"
out="$(replay --json)"
want "$out" '(d["compiles"], d["ops"][0]["source"], d["ops"][0]["config"])' "(0, 'tuned', '$other')" \
  "replay with this version's row"

# 2c. That row damaged (its winner changed behind the row digest): passed over with a warning that names it, and
#     the default runs.
sql "UPDATE tuning SET winner_config = '$default'"
out="$(replay --json 2>"$tmp/damaged.err")" || { echo "FAIL: replay with a damaged row exited $?: $out"; exit 1; }
echo "replay (damaged row): $out"
grep -F "could not be read" "$tmp/damaged.err" | grep -qF "is damaged" ||
  { echo "FAIL: no warning names the damaged tuning row"; cat "$tmp/damaged.err"; exit 1; }
want "$out" '(d["compiles"], d["ops"][0]["source"], d["ops"][0]["config"])' "(0, 'default', '$default')" \
  "replay with a damaged row"

# 3. No tuning rows (binaries only): replay passes on the default config, which it names.
sql "DELETE FROM tuning"
out="$(replay --json)" || { echo "FAIL: replay of a cache without tuning rows exited $?: $out"; exit 1; }
echo "replay (no tuning rows): $out"
want "$out" '(d["compiles"], d["tunings"], len(d["ops"]), d["untuned_ops"])' "(0, 0, 1, 1)" "untuned replay"
want "$out" '(d["ops"][0]["source"], d["ops"][0]["config"])' "('default', '$default')" "untuned replay"
text="$(replay)"
echo "$text"
grep -qF "| attn | $key | $default | default |" <<<"$text" || { echo "FAIL: the table names no chosen config"; exit 1; }

# 4. A replay checks a cache and stores nothing: on an empty cache it compiles (exit 1) and a second replay fails
#    the same way, with no file created. A replay that runs no op (every key above its caps) fails too.
fresh="$tmp/fresh.db"
for round in 1 2; do
  if out="$("$ktune" replay --preset "$preset" --arch host --cache "$fresh" --json 2>/dev/null)"; then
    echo "FAIL: replay $round of an empty cache exited 0: $out"; exit 1
  fi
  want "$out" '(d["compiles"] > 0, len(d["ops"]))' "(True, 1)" "replay $round of an empty cache"
done
[[ ! -e "$fresh" ]] || { echo "FAIL: replay created or filled $fresh"; exit 1; }
big="$tmp/big.json"
sed 's/"max": 256/"max": 1048576/; s/"min": 256/"min": 1048576/' "$preset" >"$big"
if out="$(KTUNE_JIT=0 "$ktune" replay --preset "$big" --arch host 2>&1)"; then
  echo "FAIL: a replay that ran no op exited 0: $out"; exit 1
fi
grep -qF "no op was replayed (1 of the preset's keys skipped" <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "host replay: tuned, unusable-row and untuned caches replay with 0 compiles under KTUNE_JIT=0, chosen config named;"
echo "  a replay stores nothing, and one that runs no op fails"
