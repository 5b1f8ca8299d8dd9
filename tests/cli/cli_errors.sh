#!/usr/bin/env bash
# The CLI refuses bad arguments up front and says why (ctest: cli_errors; no GPU, no compile): unknown arches
# (sm_91) like malformed ones (90a), a warning for sm_90 (a Hopper runtime looks up sm_90a), stray positional
# arguments, out-of-range integers (-j -1, --max-seq-len 1073741825), bad durations (--budget -5m), bad --devices
# lists (0,0, -1, x, 99) and --workers without --arch host, empty values (--problem ""), ktune tune bucket
# options the family does not tune (or lacks), preset files that are too large or not regular files (/dev/zero),
# a preset op the family rejects (named once, with the family's reason), `checked` in a preset problem (documented, accepted),
# `ktune --version`, options a subcommand would ignore (cache export --family, --problem with --config), and no
# --help text naming a doc that does not exist.
# usage: cli_errors.sh KTUNE_BINARY SOURCE_DIR
set -uo pipefail
K="${1:?usage: cli_errors.sh KTUNE_BINARY SOURCE_DIR}"
SRC="${2:?usage: cli_errors.sh KTUNE_BINARY SOURCE_DIR}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export KTUNE_CACHE="$tmp/c.db"
fails=0

# expect STATUS PATTERN -- ARGS...: runs ktune ARGS, wants exit STATUS and PATTERN (grep -E) in stdout+stderr.
expect() {
  local want="$1" pattern="$2"
  shift 3
  local out rc
  out="$(timeout 60 "$K" "$@" 2>&1)"
  rc=$?
  if [[ "$rc" != "$want" ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: ktune $* -> exit $rc (want $want), output:"
    sed 's/^/    /' <<<"$out" | head -n 20
    echo "    (wanted /$pattern/)"
    fails=$((fails + 1))
  fi
}

small="$tmp/small.json"
cat >"$small" <<'JSON'
{"name": "small", "description": "one xqa op",
 "buckets": {"batch": {"min": 1, "max": 2}, "seq_len": {"min": 1024, "max": 1024}},
 "ops": [{"label": "attn", "family": "xqa_decode",
          "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32}}]}
JSON

# ktune --version
expect 0 "^ktune [0-9]+\.[0-9]+" -- --version
expect 2 "unexpected argument 'x'" -- --version x

# Arches: unknown compute capabilities and malformed names are usage errors before any work.
expect 2 "'sm_91' is not a GPU's compute capability" -- compile --family xqa_decode --arch sm_91
expect 2 "'90a' is not an arch" -- compile --family xqa_decode --arch 90a
expect 2 "'sm_91' is not a GPU's compute capability" -- warmup --preset "$small" --arch sm_90a,sm_91
expect 2 "'sm_80a': the 'a' variant exists only from sm_90 on" -- compile --family xqa_decode --arch sm_80a
# sm_90 ships binaries no Hopper runtime loads: a warning (cache check compiles nothing: exit 1, all missing).
expect 1 "warning: --arch sm_90: .*looks up sm_90a" -- cache check --preset "$small" --arch sm_90
# A warmup with nothing to do on the arches asked (the preset's only op is limited to another GPU) fails.
other="$tmp/other-gpu.json"
sed 's/"family": "xqa_decode",/"family": "xqa_decode", "arches": ["sm_120a"],/' "$small" >"$other"
expect 1 "no op of preset small runs on the arches asked; nothing was compiled or tuned" -- \
  warmup --preset "$other" --arch sm_90a
# An arch the family runs no config on is a rejected key with the family's reason, beside the other arches' keys.
expect 1 "REJECTED sm_70 xqa_decode attn: ktune xqa_decode: no default config fits .* on sm_70" -- \
  cache check --preset "$small" --arch sm_70,sm_90a

# Stray positional arguments.
expect 2 "unexpected argument 'extra'" -- compile --family xqa_decode --arch sm_90a extra
expect 2 "unexpected argument 'extra'" -- info extra
expect 2 "unexpected argument 'llama-3.1-8b'" -- warmup llama-3.1-8b
expect 2 "unexpected argument 'extra'" -- cache stats extra
expect 2 "unexpected argument 'b'" -- cache show a b
# Options a command would ignore are refused, not dropped: a filter one subcommand does not apply, a second
# problem source.
expect 2 "unknown option --family" -- cache export --family mxfp4_gemm --out "$tmp/x.db"
# A layer that is not there is checked by nobody: neither an export nor a verify of the path passes.
expect 1 "no cache file at $tmp/typo.db" -- cache export --cache "$tmp/typo.db" --out "$tmp/typo-out.db"
[[ ! -e "$tmp/typo-out.db" ]] || { echo "FAIL: an export of a missing layer wrote $tmp/typo-out.db"; fails=$((fails + 1)); }
expect 1 "no cache file at $tmp/typo.db: nothing there" -- cache verify --cache "$tmp/typo.db"
# Nor does a prune or a merge into it, and neither leaves a file behind; a merge from a missing file neither.
expect 1 "prune: no cache file at $tmp/typo.db; nothing pruned" -- cache prune --cache "$tmp/typo.db"
expect 1 "$tmp/typo.db: the file does not exist" -- cache merge --cache "$tmp/new.db" --from "$tmp/typo.db"
for f in typo.db new.db; do
  [[ ! -e "$tmp/$f" ]] || { echo "FAIL: a refused cache command created $tmp/$f"; fails=$((fails + 1)); }
done
expect 2 "unknown option --family" -- cache merge --family xqa_decode --from "$tmp/x.db"
expect 2 "unknown option --out" -- cache ls --out "$tmp/x.db"
expect 2 "unknown option --stale-ktune" -- cache ls --stale-ktune
expect 2 "give --problem KEY or --config JSON, not both" -- compile --family xqa_decode --arch sm_90a \
  --problem d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none --config '{"head_dim": 64}'
expect 2 "give --problem KEY or --config JSON, not both" -- tune --family xqa_decode --arch host \
  --problem d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none --config '{"head_dim": 64}'

# Integers in range, durations positive, values non-empty.
expect 2 "--jobs: expected an integer in 1..1024, got -1" -- compile --family xqa_decode --arch sm_90a -j -1
expect 2 "--jobs: expected an integer in 1..1024, got 0" -- warmup --preset "$small" -j 0
expect 2 "--budget: expected a positive duration.*got '-5m'" -- warmup --preset "$small" --budget -5m
expect 2 "--budget: expected a positive duration.*got 'nanm'" -- warmup --preset "$small" --budget nanm
expect 2 "--budget: expected a positive duration.*got '0x10'" -- warmup --preset "$small" --budget 0x10
expect 2 "--budget: expected a positive duration.*got '1e-300s'" -- warmup --preset "$small" --budget 1e-300s
expect 2 "--spec-tokens: expected an integer in 0..255, got 300" -- warmup --preset "$small" --spec-tokens 300
expect 2 "--kv-dtype: expected one of bf16, fp16, fp8, got 'fp9'" -- warmup --preset "$small" --kv-dtype fp9
# --devices / --workers (multi-device warmup): the flag, the entry and what was expected; nothing is compiled.
expect 2 "--devices: '0' is given twice: expected each GPU once" -- warmup --preset "$small" --devices 0,0
expect 2 "--devices: '-1': expected a GPU ordinal >= 0" -- warmup --preset "$small" --devices -1
expect 2 "--devices: expected \"all\" or comma-separated GPU ordinals like 0,1, got 'x'" -- \
  warmup --preset "$small" --devices x
expect 2 "--devices: expected \"all\" or comma-separated GPU ordinals.*got an empty entry" -- \
  warmup --preset "$small" --devices 0,
expect 2 "--devices: '99': expected a GPU ordinal below [0-9]+ \(this machine has" -- \
  warmup --preset "$small" --devices 99
expect 2 "--devices needs a non-empty value" -- warmup --preset "$small" --devices ""
expect 2 "--workers: expected an integer in 1..256, got 0" -- warmup --preset "$small" --arch host --workers 0
expect 2 "--workers: host workers tune the keys of arch host: expected --arch host" -- \
  warmup --preset "$small" --workers 2
expect 2 "--key-timeout: applies to worker processes" -- warmup --preset "$small" --key-timeout 10m
expect 2 "--key-timeout: expected a positive duration like 90s, 10m or 1h, got '0s'" -- \
  warmup --preset "$small" --arch host --workers 2 --key-timeout 0s
expect 2 "--problem needs a non-empty value" -- compile --family xqa_decode --arch sm_90a --problem ""
expect 2 "--problem: expected one or more problem keys" -- compile --family xqa_decode --arch sm_90a --problem ";"
expect 2 "--max-seq-len: expected an integer in 1..1073741824, got 1073741825" -- \
  warmup --preset "$small" --max-seq-len 1073741825
expect 2 "--max-seq-len: expected an integer in 1..1073741824, got 1073741825" -- \
  replay --preset "$small" --arch host --max-seq-len 1073741825
expect 2 "--max-batch: expected an integer in 1..1073741824, got 99999999999" -- \
  cache check --preset "$small" --max-batch 99999999999
expect 2 "--batch: expected an integer in 1..1073741824" -- \
  tune --family xqa_decode --problem d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none --batch 2147483647
# ktune tune takes exactly the family's tuning dims.
expect 2 "--max-seq-len is required: xqa_decode tunes --batch and --max-seq-len" -- \
  tune --family xqa_decode --problem d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none --batch 2
expect 2 "--max-seq-len: sparse_mla_decode has no seq_len bucket \(sparse_mla_decode tunes --batch\)" -- \
  tune --family sparse_mla_decode --problem h16.r512.d64.k256.p64.bf16-fp8ds.q1 --batch 2 --max-seq-len 4096
expect 2 "--tokens is required: mxfp4_gemm tunes --tokens" -- \
  tune --family mxfp4_gemm --problem n256.k128.bf16-bf16 --arch host
# The same bound inside a preset file (a library error: exit 1).
sed 's/"max": 1024}/"max": 1073741825}/' "$small" >"$tmp/huge-seq.json"
expect 1 "buckets.seq_len.max: expected an integer in 1024..1073741824, got 1073741825" -- \
  cache check --preset "$tmp/huge-seq.json" --arch sm_90a

# Preset files: a cap on size, regular files only (checked before reading).
truncate -s 17M "$tmp/big.json"
expect 1 "larger than 16777216 bytes" -- warmup --preset "$tmp/big.json"
expect 1 "/dev/zero: cannot read the preset file \(not a regular file\)" -- warmup --preset /dev/zero
expect 1 "not a regular file" -- cache check --preset "$tmp"

# A preset op the family rejects: named once (not once per bucket), with the family's reason.
sed 's/"page_size": 32/"page_size": 48/' "$small" >"$tmp/bad-page.json"
out="$("$K" warmup --preset "$tmp/bad-page.json" --arch sm_90a 2>&1)"
rc=$?
n=$(grep -c "op attn: the family rejected the problem: .*page_size: expected 16, 32, 64 or 128, got 48" <<<"$out")
if [[ "$rc" != 1 || "$n" != 1 ]]; then
  echo "FAIL: warmup of a rejected op: exit $rc, $n naming lines (want exit 1, 1 line):"
  sed 's/^/    /' <<<"$out"
  fails=$((fails + 1))
fi
expect 1 "REJECTED sm_90a xqa_decode attn: .*page_size: expected 16, 32, 64 or 128, got 48" -- \
  cache check --preset "$tmp/bad-page.json" --arch sm_90a

# `checked` is a documented preset problem field (docs/presets.md): accepted, and it selects the .chk problem.
sed 's/"page_size": 32/"page_size": 32, "checked": true/' "$small" >"$tmp/checked.json"
expect 1 "MISSING sm_90a attn d128\.h32\.kv8\.p32\.hnd\.bf16-bf16-bf16\.q1\.none\.chk\|b1\.l1024" -- \
  cache check --preset "$tmp/checked.json" --arch sm_90a
grep -q '`checked`' "$SRC/docs/presets.md" ||
  { echo "FAIL: docs/presets.md no longer documents checked"; fails=$((fails + 1)); }

# prepack: a weight of the wrong size names the flag; --json gives one object, for a written file and --check.
head -c 2048 /dev/urandom >"$tmp/w.bin"
head -c 128 /dev/urandom >"$tmp/s.bin"
head -c 2047 "$tmp/w.bin" > "$tmp/w2047.bin"
expect 2 "--weight: expected 2048 bytes.*got 2047" -- prepack --weight "$tmp/w2047.bin" \
  --scales "$tmp/s.bin" --n 64 --k 64 --out "$tmp/p.bin"
# A device or a pipe is refused before it is read (/dev/zero would be read until memory runs out).
expect 2 "--weight: expected a regular file, got '/dev/zero'" -- prepack --weight /dev/zero \
  --scales "$tmp/s.bin" --n 64 --k 64 --out "$tmp/p.bin"
for run in "prepack --weight $tmp/w.bin --scales $tmp/s.bin --n 64 --k 64 --out $tmp/p.bin --json" \
           "prepack --check $tmp/p.bin --json"; do
  # shellcheck disable=SC2086
  if ! "$K" $run | python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(0 if (d["n"], d["k"], d["experts"]) == (64, 64, 1) else 1)'; then
    echo "FAIL: ktune $run: no JSON object with n 64, k 64, experts 1"
    fails=$((fails + 1))
  fi
done

# No --help text names a doc that does not exist.
# warmup --json carries the failure lines of the text form: a preset op the family rejects.
printf '%s' '{"name": "p48", "buckets": {"batch": {"min": 1, "max": 1}, "seq_len": {"min": 512, "max": 512}}, "ops": [{"label": "attn", "family": "xqa_decode", "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 48}}]}' >"$tmp/p48.json"
out="$("$K" warmup --preset "$tmp/p48.json" --arch sm_90a --json 2>/dev/null)"
python3 -c 'import json, sys; f = json.loads(sys.argv[1])["failures"]; assert len(f) == 1 and "page_size" in f[0]["status"] and f[0]["arch"] == "sm_90a", f' "$out" ||
  { echo "FAIL: warmup --json gave no failure line for the rejected op: $out"; fails=$((fails + 1)); }
# An unknown family is a bad option value: a usage error naming --family and the known ones.
expect 2 "--family: unknown family 'nope': expected one of xqa_decode" -- compile --family nope --arch host
expect 2 "--family: unknown family 'nope'" -- report --family nope -o "$tmp/r.html"
[[ ! -e "$tmp/r.html" ]] || { echo "FAIL: report --family nope wrote $tmp/r.html"; fails=$((fails + 1)); }
# A repeated option would silently replace the first value; --help anywhere after the command is its help.
expect 2 "--arch given twice \('host', then 'sm_90a'\)" -- compile --family xqa_decode --arch host --arch sm_90a
for cmd in info compile warmup tune replay presets cache prepack report; do
  out="$("$K" "$cmd" --json --help 2>&1)" && grep -q "^usage: ktune $cmd" <<<"$out" ||
    { echo "FAIL: ktune $cmd --json --help did not print its usage: $out"; fails=$((fails + 1)); }
  for doc in $("$K" "$cmd" --help 2>&1 | grep -oE 'docs/[A-Za-z0-9_./-]+\.md' | sort -u); do
    [[ -f "$SRC/$doc" ]] || { echo "FAIL: ktune $cmd --help names $doc, which does not exist"; fails=$((fails + 1)); }
  done
done

# `presets --json` describes each preset (what the text form prints), not only its name.
"$K" presets --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [p["name"] for p in d["details"]] == d["presets"], "details and names differ"
ds = {p["name"]: p for p in d["details"]}["deepseek-v3.2"]
assert "sparse_mla_decode" in {op["family"] for op in ds["ops"]}, ds["ops"]
assert ds["batch"][0] <= ds["batch"][1] and ds["seq_len"][0] <= ds["seq_len"][1] and ds["description"], ds
' || { echo "FAIL: presets --json does not describe the presets"; fails=$((fails + 1)); }

if [[ "$fails" != 0 ]]; then
  echo "cli errors: $fails failed"
  exit 1
fi
echo "cli errors OK"
