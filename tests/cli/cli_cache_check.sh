#!/usr/bin/env bash
# `ktune cache check` without a GPU (ctest: cli_cache_check): an empty cache misses every binary (exit 1); after
# `ktune compile` of the preset's problem the default binary and the problem's shared module are found by the
# runtime's own lookup (exit 0; no tuning row); a tuning row for an H200 is matched by --device NAME and by
# --fingerprint FILE (a fingerprint line, or `ktune info --json` output, whose cc9.0 also picks --arch sm_90a),
# and its winner's binary must be there too (exit 1 while it is not); another device's name matches no row; a row tuned by another ktune version
# counts as no row (the runtime does not use it) and is named as such; a row measured on another NVRTC's binaries
# still counts and is named as one a warmup here tunes again; a host tuning row is no GPU's row. The check never compiles. Needs
# NVRTC for the one compile (as cli_compile_cache does).
# usage: cli_cache_check.sh KTUNE_BINARY
set -euo pipefail
K="${1:?usage: cli_cache_check.sh KTUNE_BINARY}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
db="$tmp/c.db"
preset="$tmp/small.json"
cat >"$preset" <<'JSON'
{"name": "small", "description": "one xqa op, two buckets",
 "buckets": {"batch": {"min": 1, "max": 2}, "seq_len": {"min": 1024, "max": 1024}},
 "ops": [{"label": "attn", "family": "xqa_decode",
          "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32}}]}
JSON
P='d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none'
H200='NVIDIA H200|cc9.0|sm132|memclk3201000|drv13000'
json() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }
check() {  # check WANT_STATUS ARGS... -> the JSON output; fails unless the exit status is WANT_STATUS
  local want="$1" out rc=0
  shift
  out="$("$K" cache check --preset "$preset" --cache "$db" --json "$@")" || rc=$?
  [[ "$rc" == "$want" ]] || { echo "FAIL: cache check $* exited $rc, want $want: $out" >&2; exit 1; }
  echo "$out"
}

# 1. Empty cache: the default binary and the problem's shared module (combine, helpers) are missing (two
#    binaries, two keys), nothing compiled.
out="$(check 1 --arch sm_90a)"
echo "empty: $out"
[[ "$(json '(d["keys_total"], d["missing_binaries"], d["complete"])' <<<"$out")" == "(2, 2, False)" ]]
[[ "$(json '[(k["default_binary"], k["shared_binary"]) for k in d["keys"]]' <<<"$out")" == \
   "[(False, False), (False, False)]" ]]
[[ ! -s "$db" ]] || [[ "$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(
  "SELECT COUNT(*) FROM binaries").fetchone()[0])' "$db")" == 0 ]] || { echo "FAIL: cache check compiled"; exit 1; }

# 2. The image recipe's compile step: default binaries present, no tuning rows (they run the default).
"$K" compile --family xqa_decode --arch sm_90a --problem "$P" --cache "$db" --json >/dev/null
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
echo "compiled: $out"
[[ "$(json '(d["missing_binaries"], d["tuned"], d["untuned"], d["complete"])' <<<"$out")" == "(0, 0, 2, True)" ]]
[[ "$(json '[k["shared_binary"] for k in d["keys"]]' <<<"$out")" == "[True, True]" ]]
default="$(json 'd["keys"][0]["default_config"]' <<<"$out")"
# A row this CPU tuned for the host backend (a GPU-less warmup writes them) is not the GPU's row.
python3 "$(dirname "$0")/../support/put_tuning_row.py" "$db" xqa_decode "$P|b1.l1024" \
  "x86_64 test cpu;cores=2;avx2" t64.v8.u1 "$("$K" --version | cut -d' ' -f2)"
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
[[ "$(json '(d["missing_binaries"], d["tuned"], d["untuned"], d["complete"])' <<<"$out")" == "(0, 0, 2, True)" ]]
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(
  "DELETE FROM tuning WHERE device_fingerprint LIKE ?", ("%;cores=%",)); c.commit()' "$db"

# 3. A tuning row for the H200 at b1 whose winner is not compiled: found by name and by fingerprint, and the
#    missing winner binary fails the check.
version="$("$K" --version | cut -d' ' -f2)"
tuning_row() {  # tuning_row WINNER [VERSION]: the H200 row of key b1, as ktune (this one by default) writes it
  python3 "$(dirname "$0")/../support/put_tuning_row.py" "$db" xqa_decode "$P|b1.l1024" "$H200" "$1" \
    "${2:-$version}"
}
tuning_row t64.s2.w4
out="$(check 1 --arch sm_90a --device "NVIDIA H200")"
echo "tuned row, winner missing: $out"
[[ "$(json '(d["tuned"], d["missing_binaries"])' <<<"$out")" == "(1, 1)" ]]
[[ "$(json '[(k["tuning_row"], k.get("tuned_config"), k.get("tuned_binary")) for k in d["keys"]]' <<<"$out")" == \
   "[(True, 't64.s2.w4', False), (False, None, None)]" ]]
echo "$H200" >"$tmp/fp.txt"
out="$(check 1 --fingerprint "$tmp/fp.txt")"  # the fingerprint's cc9.0: sm_90a without --arch
[[ "$(json '(d["keys"][0]["arch"], d["tuned"], d["missing_binaries"])' <<<"$out")" == "('sm_90a', 1, 1)" ]]
printf '{"devices": [{"ordinal": 0, "name": "NVIDIA H200", "fingerprint": "%s"}]}\n' "$H200" >"$tmp/info.json"
out="$(check 1 --fingerprint "$tmp/info.json")"
[[ "$(json 'd["tuned"]' <<<"$out")" == 1 ]]
# Another device: no row of its own, every binary it would run is present.
out="$(check 0 --arch sm_90a --device "NVIDIA B200")"
[[ "$(json '(d["tuned"], d["missing_binaries"])' <<<"$out")" == "(0, 0)" ]]
# The text form names each key, both binaries and the row.
text="$("$K" cache check --preset "$preset" --cache "$db" --arch sm_90a --device "NVIDIA H200" || true)"
echo "$text"
grep -qF "MISSING sm_90a attn $P|b1.l1024: default $default present, shared present; tuned t64.s2.w4 MISSING" <<<"$text"
grep -qF "ok sm_90a attn $P|b2.l1024: default $default present, shared present; no tuning row" <<<"$text"
grep -qF "1 binaries missing" <<<"$text"

# 4. The same row tuned by another ktune version: not counted as tuned (that key runs the default), named as stale.
tuning_row t64.s2.w4 0.0.1
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
echo "stale row: $out"
[[ "$(json '(d["tuned"], d["untuned"], d["stale_tuned"], d["missing_binaries"])' <<<"$out")" == "(0, 2, 1, 0)" ]]
[[ "$(json '[k.get("stale_tuning_version") for k in d["keys"]]' <<<"$out")" == "['0.0.1', None]" ]]
text="$("$K" cache check --preset "$preset" --cache "$db" --arch sm_90a --device "NVIDIA H200")"
grep -qF "ok sm_90a attn $P|b1.l1024: default $default present, shared present; tuning row of ktune 0.0.1 only (not used by" \
  <<<"$text"
# `ktune cache stats` counts the rows per ktune version and says which ones this version uses.
stats="$("$K" cache stats --cache "$db" --json)"
[[ "$(json '(d["ktune_version"], d["tuning_by_ktune_version"])' <<<"$stats")" == "('$version', {'0.0.1': 1})" ]] ||
  { echo "FAIL: cache stats by version: $stats"; exit 1; }
grep -qF "tuning rows of ktune 0.0.1: 1 (not used by this version, $version)" <<<"$("$K" cache stats --cache "$db")"

# 5. A row whose winner is a binary the cache holds (here the default's): the check passes.
tuning_row "$default"
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
[[ "$(json '(d["tuned"], d["missing_binaries"], d["keys"][0]["tuned_binary"])' <<<"$out")" == "(1, 0, True)" ]]
[[ "$(json '(d["other_compiler_tuned"], "tuned_compiler_version" in d["keys"][0])' <<<"$out")" == "(0, False)" ]]

# 6. The row marked as measured on another NVRTC's binaries: still tuned (the runtime uses its winner), and named
#    as one a warmup on this machine measures again; marked with this machine's NVRTC it is not.
mark_compiler() {
  python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import put_tuning_row
put_tuning_row.set_candidates_field(sys.argv[2], "compiler_version", sys.argv[3])' \
    "$(dirname "$0")/../support" "$db" "$1"
}
mark_compiler 0.0.0
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
echo "other compiler: $out"
[[ "$(json '(d["tuned"], d["other_compiler_tuned"], d["keys"][0]["tuned_compiler_version"])' <<<"$out")" == \
   "(1, 1, '0.0.0')" ]]
text="$("$K" cache check --preset "$preset" --cache "$db" --arch sm_90a --device "NVIDIA H200")"
grep -qF "tuned $default present (measured on NVRTC 0.0.0 binaries; a warmup here, NVRTC " <<<"$text"
grep -qF "; 1 tuned on another NVRTC's binaries than this machine's" <<<"$text"
here="$("$K" info --json | json 'd["nvrtc_version"]')"
mark_compiler "$here"
out="$(check 0 --arch sm_90a --device "NVIDIA H200")"
[[ "$(json '(d["other_compiler_tuned"], d["keys"][0]["tuned_compiler_version"])' <<<"$out")" == "(0, '$here')" ]]
echo "cli cache check OK"
