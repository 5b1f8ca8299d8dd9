#!/usr/bin/env bash
# A kernel change to sparse_mla_decode against a base revision, timed through the library in one device call:
# bench_sparse_mla built twice, once with templates/ of REF ("base") and once with the working tree's ("tree"),
# both statically linked, their kernels precompiled for sm_90a into one cache (the binary key covers the source,
# so the two builds' kernels sit side by side).
#   bash bench/dev/mla_tree_ab.sh build REF [BUILD_DIR]   CPU: two stripped binaries + ab.db.gz in .devbuild/mla_tree
#                                                         (templates/ is checked out at REF and restored)
#   ROWS="h128 k2048 T8;h16 k2048 T64" ROUNDS=3 bash bench/dev/mla_tree_ab.sh run
#                                                         GPU (carry .devbuild/mla_tree): ROUNDS interleaved rounds
#                                                         of `run --rows R --own-only` per row; table under $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
A=.devbuild/mla_tree
if [[ ${1:-} == build ]]; then
  REF=${2:?usage: mla_tree_ab.sh build REF [BUILD_DIR]}
  B=${3:-build}
  rm -rf $A && mkdir -p $A
  git diff --quiet "$REF" -- templates && { echo "templates/ of the tree equals $REF's: nothing to compare" >&2; exit 2; }
  one() { cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null && strip --strip-unneeded -o $A/$1 "$B/bin/bench_sparse_mla"; }
  one tree
  stash=$(mktemp -d)
  cp -r templates "$stash/"
  trap 'rm -rf templates && cp -r "$stash/templates" . && rm -rf "$stash"' EXIT
  rm -rf templates && git archive "$REF" templates | tar -x -m  # -m: new mtimes, so the build sees the change
  one base
  rm -rf templates && cp -r "$stash/templates" . && rm -rf "$stash" && trap - EXIT
  cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null
  for v in base tree; do KTUNE_LOG=error $A/$v prepare --cache $A/ab.db --arch sm_90a | tail -1; done
  git rev-parse --short "$REF" > $A/base.txt
  (git rev-parse --short HEAD; git diff --quiet -- templates || echo "+ uncommitted templates/") > $A/tree.txt
  rm -f $A/*.compile-lock $A/*.tune-lock && gzip -f $A/ab.db && du -sh $A
  exit 0
fi
: "${OUT:?set OUT to a folder for the results}"
gunzip -kf $A/ab.db.gz
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64 KTUNE_CACHE=$PWD/$A/ab.db KTUNE_JIT=0 KTUNE_LOG=error
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); base $(cat $A/base.txt), tree $(tr '\n' ' ' < $A/tree.txt)"
IFS=';' read -r -a rows <<< "${ROWS:-h128 k2048 T8;h128 k2048 T64 fp8;h16 k2048 T64;h16 k2048 T128}"
for ((r = 1; r <= ${ROUNDS:-3}; ++r)); do
  for row in "${rows[@]}"; do for v in base tree; do
    timeout 60 $A/$v run --rows "$row" --own-only --reps 40 --json "$OUT/$v-$r-${row// /_}.json" >/dev/null 2>&1 ||
      echo "$v $row round $r failed" >&2
  done; done
done
python3 - "$OUT" "${ROUNDS:-3}" "${rows[@]}" <<'PY'
import json, sys
out, rounds, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| row | base us (rounds) | tree us (rounds) | tree / base |")
print("| --- | --- | --- | --- |")
for row in rows:
    t = {}
    for v in ("base", "tree"):
        t[v] = []
        for r in range(1, rounds + 1):
            try:
                j = json.load(open(f"{out}/{v}-{r}-{row.replace(' ', '_')}.json"))
                t[v].append(j["rows"][0]["candidates"][0]["median_us"])
            except Exception as e:
                t[v].append(float("nan"))
    b, n = sorted(t["base"])[len(t["base"]) // 2], sorted(t["tree"])[len(t["tree"]) // 2]
    print(f"| {row} | {' / '.join(f'{x:.1f}' for x in t['base'])} | {' / '.join(f'{x:.1f}' for x in t['tree'])} | {n / b:.3f} |")
PY
