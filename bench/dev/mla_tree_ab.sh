#!/usr/bin/env bash
# A kernel change to sparse_mla_decode against a base revision, timed through the library in one device call:
# bench_sparse_mla built with templates/ of REF ("base"), with the working tree's ("tree", where they differ) and
# with patches of REF's templates/ (PATCHES="name=file.diff ..."), all statically linked, their kernels
# precompiled for sm_90a into one cache (the binary key covers the source, so the builds' kernels sit side by side).
#   bash bench/dev/mla_tree_ab.sh build REF [BUILD_DIR]   CPU: stripped binaries + ab.db.gz in .devbuild/mla_tree
#                                                         (templates/ is checked out at REF and restored)
#   ROWS="h128 k2048 T8;h16 k2048 T64" ROUNDS=3 bash bench/dev/mla_tree_ab.sh run
#                                                         GPU (carry .devbuild/mla_tree): ROUNDS interleaved rounds
#                                                         of `run --rows R --own-only` per row; the table on
#                                                         stdout, the runs' JSON in $OUT/ab-json.tgz
set -euo pipefail
cd "$(dirname "$0")/../.."
A=.devbuild/mla_tree
if [[ ${1:-} == build ]]; then
  REF=${2:?usage: mla_tree_ab.sh build REF [BUILD_DIR]}
  B=${3:-build}
  rm -rf $A && mkdir -p $A
  one() { cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null && strip --strip-unneeded -o $A/$1 "$B/bin/bench_sparse_mla"; }
  if ! git diff --quiet "$REF" -- templates; then
    one tree
    (git rev-parse --short HEAD; echo "+ uncommitted templates/") > $A/tree.txt
  elif [[ -z ${PATCHES:-} ]]; then
    echo "templates/ of the tree equals $REF's and no PATCHES: nothing to compare" >&2; exit 2
  fi
  stash=$(mktemp -d)
  cp -r templates "$stash/"
  trap 'rm -rf templates && cp -r "$stash/templates" . && rm -rf "$stash"' EXIT
  rm -rf templates && git archive "$REF" templates | tar -x -m  # -m: new mtimes, so the build sees the change
  one base
  for pv in ${PATCHES:-}; do  # name=file: REF's templates/ with a patch applied
    rm -rf templates && git archive "$REF" templates | tar -x -m && git apply "${pv#*=}" && one "${pv%%=*}"
    echo "${pv#*=} on $(git rev-parse --short "$REF")" > "$A/${pv%%=*}.txt"
  done
  rm -rf templates && cp -r "$stash/templates" . && rm -rf "$stash" && trap - EXIT
  cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null
  for v in $(cd $A && ls | grep -v '\.'); do KTUNE_LOG=error $A/$v prepare --cache $A/ab.db --arch sm_90a | tail -1; done
  git rev-parse --short "$REF" > $A/base.txt
  rm -f $A/*.compile-lock $A/*.tune-lock && gzip -f $A/ab.db && du -sh $A
  exit 0
fi
: "${OUT:?set OUT to a folder for the results}"
gunzip -kf $A/ab.db.gz
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64 KTUNE_CACHE=$PWD/$A/ab.db KTUNE_JIT=0 KTUNE_LOG=error
vs=(base $(cd $A && ls | grep -v '\.' | grep -vx base))  # base first: every ratio is against it
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
for v in "${vs[@]}"; do echo "$v: $(tr '\n' ' ' < $A/$v.txt)"; done
IFS=';' read -r -a rows <<< "${ROWS:-h128 k2048 T8;h128 k2048 T64 fp8;h16 k2048 T64;h16 k2048 T128}"
for ((r = 1; r <= ${ROUNDS:-3}; ++r)); do
  for row in "${rows[@]}"; do for v in "${vs[@]}"; do
    timeout 60 $A/$v run --rows "$row" --own-only --reps 40 --json "$OUT/$v-$r-${row// /_}.json" >/dev/null 2>&1 ||
      echo "$v $row round $r failed" >&2
  done; done
done
python3 - "$OUT" "${ROUNDS:-3}" "${vs[*]}" "${rows[@]}" <<'PY'
import json, sys
out, rounds, vs, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
print("| row | " + " | ".join(f"{v} us (rounds)" for v in vs) + " | " + " | ".join(f"{v} / base" for v in vs[1:]) + " |")
print("|" + " --- |" * (2 * len(vs)))
for row in rows:
    t = {}
    for v in vs:
        t[v] = []
        for r in range(1, rounds + 1):
            try:
                j = json.load(open(f"{out}/{v}-{r}-{row.replace(' ', '_')}.json"))
                t[v].append(j["rows"][0]["candidates"][0]["median_us"])
            except Exception as e:
                t[v].append(float("nan"))
    med = {v: sorted(t[v])[len(t[v]) // 2] for v in vs}
    print(f"| {row} | " + " | ".join(" / ".join(f"{x:.1f}" for x in t[v]) for v in vs) + " | " +
          " | ".join(f"{med[v] / med['base']:.3f}" for v in vs[1:]) + " |")
PY
# The device tool brings back only a few files: the runs' JSON go back as one archive.
# (None when every run failed: then nothing to pack, and the table above already says so.)
(cd "$OUT" && shopt -s nullglob && js=(*-[0-9]*-*.json) &&
  if ((${#js[@]})); then tar czf ab-json.tgz -- "${js[@]}" && rm -f -- "${js[@]}"; fi)
