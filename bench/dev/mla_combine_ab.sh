#!/usr/bin/env bash
# The 8-token sparse MLA call (128 heads, top-k 2048, fp8_ds_mla: 8 splits + combine) in four builds of
# bench_sparse_mla, timed in one device call:
#   v1  the combine loading one split at a time, launched on the plain stream (the library before both changes)
#   v2  the same combine, launched programmatically dependent on the decode kernel (pipeline::within_call)
#   v3  the library as it is: v2 with each thread's loads of 8 splits issued before it merges them
#   v4  v3's combine launched on the plain stream (batched loads without the dependent launch)
#   bash bench/dev/mla_combine_ab.sh build [BUILD_DIR]   CPU: four stripped binaries + ab.db.gz in .devbuild/mla_ab
#                                                        (the tree is edited for v1, v2 and v4 and restored)
#   bash bench/dev/mla_combine_ab.sh run                 GPU (carry .devbuild/mla_ab): two interleaved rounds of
#                                                        `run --rows "T8 fp8" --own-only`, then Nsight Compute's
#                                                        kernel durations of each; tables under $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
A=.devbuild/mla_ab
if [[ ${1:-} == build ]]; then
  B=${2:-build}
  rm -rf $A && mkdir -p $A
  files=(templates/sparse_mla_decode/kernel.cuh templates/sparse_mla_decode/launch.cpp)
  trap 'git checkout -- "${files[@]}"' EXIT
  git diff --quiet -- "${files[@]}" || { echo "commit or stash ${files[*]} first" >&2; exit 2; }
  one() { cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null && strip --strip-unneeded -o $A/$1 "$B/bin/bench_sparse_mla"; }
  one v3
  sed -i 's/= within_call(stream, \*r.dev);/= stream;/' templates/sparse_mla_decode/launch.cpp
  grep -q "within_call" templates/sparse_mla_decode/launch.cpp && { echo "v4: launch.cpp edit did not apply" >&2; exit 2; }
  one v4
  git checkout -- templates/sparse_mla_decode/launch.cpp
  # v2: the combine of the library before the batched loads (the commit before they landed).
  git show 53b0a7a:templates/sparse_mla_decode/kernel.cuh > templates/sparse_mla_decode/kernel.cuh
  one v2
  sed -i 's/= within_call(stream, \*r.dev);/= stream;/' templates/sparse_mla_decode/launch.cpp
  grep -q "within_call" templates/sparse_mla_decode/launch.cpp && { echo "v1: launch.cpp edit did not apply" >&2; exit 2; }
  one v1
  git checkout -- "${files[@]}"
  cmake --build "$B" -j 2 --target bench_sparse_mla >/dev/null
  for v in v2 v3; do KTUNE_LOG=error $A/$v prepare --cache $A/ab.db --arch sm_90a | tail -1; done
  rm -f $A/*.compile-lock $A/*.tune-lock && gzip -f $A/ab.db && du -sh $A
  exit 0
fi
: "${OUT:?set OUT to a folder for the results}"
gunzip -kf $A/ab.db.gz
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64 KTUNE_CACHE=$PWD/$A/ab.db KTUNE_JIT=0 KTUNE_LOG=error
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do for v in v1 v2 v3 v4; do
  echo "== round $r $v"; timeout 60 $A/$v run --rows "T8 fp8" --own-only --reps 40 --json "$OUT/$v-$r.json" 2>&1 | tail -4
done; done | tee "$OUT/ab.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in v1 v2 v3 v4; do
  timeout 60 "$NCU" --clock-control none -k regex:'decode_kernel|combine' --launch-skip 40 --launch-count 20 \
    --metrics gpu__time_duration.sum --csv --page raw $A/$v run --rows "T8 fp8" --own-only --reps 30 > "$OUT/ncu-$v.csv"
done
python3 - "$OUT" <<'PY'
import csv, statistics, sys
for v in ("v1", "v2", "v3", "v4"):
    rows = [r for r in csv.reader(open(f"{sys.argv[1]}/ncu-{v}.csv")) if len(r) > 5]
    h = rows[0]; n = h.index("Kernel Name"); t = h.index("gpu__time_duration.sum")
    by = {}
    for r in rows[2:]: by.setdefault(r[n].split("(")[0].split("<")[0], []).append(float(r[t].replace(",", "")))
    for k, xs in by.items(): print(f"| {v} | {k} | {statistics.median(xs)} {rows[1][t]} | {len(xs)} launches |")
PY
