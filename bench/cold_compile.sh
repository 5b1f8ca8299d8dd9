#!/usr/bin/env bash
# Cold compile per kernel on this machine (CPU only; no GPU needed), one thread:
#   1. bench_cold_compile: every kernel `ktune compile --family F --arch ARCH` builds, compiled by NVRTC exactly as
#      the runtime compiles it, with and without the speed options (nvrtc_speed_options), median per kernel,
#      NVRTC's phases, and a byte comparison of every CUBIN (fails if one differs);
#   2. end to end: `ktune compile --family F --arch ARCH -j 1` into a fresh cache per family (the shipped path),
#      median compile_ms per config module and per shared module, and the command's wall time per module.
#   3. a cold first call of an op (bench_cold_compile --first-call): its config module and its shared module
#      compiled one after the other against the shared one on a second thread, as the op's first call does.
#   --trace: part 1 also splits each module's NVVM and ptxas time by entry point (NVRTC's time trace).
# usage: bench/cold_compile.sh [--build DIR] [--arch sm_90a] [--reps 3] [--all-configs] [--pch] [--trace] [--json OUT]
set -euo pipefail
build=build arch=sm_90a
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --arch) arch=$2; args+=(--arch "$2"); shift 2 ;;
    --reps|--json) args+=("$1" "$2"); shift 2 ;;
    --all-configs|--pch|--trace) args+=("$1"); shift ;;
    *) echo "cold_compile.sh: unknown argument $1 (expected --build, --arch, --reps, --all-configs, --pch, --trace, --json)" >&2; exit 2 ;;
  esac
done
for bin in bench_cold_compile ktune; do
  [[ -x $build/bin/$bin ]] || { echo "cold_compile.sh: $build/bin/$bin missing: cmake --build $build --target ${bin/ktune/ktune_cli}" >&2; exit 2; }
done
# On a GPU machine NVRTC may return PTX/CUBIN from the driver's compute cache instead of compiling: not cold.
export CUDA_CACHE_DISABLE=1

here=$(cd "$(dirname "$0")/.." && pwd)
echo "machine: $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit:  $(git -C "$here" rev-parse --short HEAD)$(git -C "$here" diff --quiet HEAD -- runtime templates || echo ' (+ local changes)')"
echo
echo "== 1. the compiler front, with and without the speed options"
"$build/bin/bench_cold_compile" "${args[@]}"

echo
echo "== 2. ktune compile --arch $arch -j 1, fresh cache per family (speed options on)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| family | config modules | median compile_ms per config module | shared modules | median compile_ms per shared module | wall per module (whole command) |"
echo "|---|---|---|---|---|---|"
families=$("$build/bin/ktune" info | sed -n 's/^families: *//p')
for f in $families; do
  t0=$(date +%s.%N)
  "$build/bin/ktune" compile --family "$f" --arch "$arch" -j 1 --cache "$tmp/$f.db" --json > "$tmp/$f.json"
  t1=$(date +%s.%N)
  python3 - "$tmp/$f.json" "$f" "$t0" "$t1" <<'EOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
compiled = [k for k in d["kernels"] if k["compiled"]]
# A family's shared module (split-KV combine, helpers) is compiled once per problem, not once per config.
shared = [k["compile_ms"] for k in compiled if k["name"].endswith("/shared")]
ms = [k["compile_ms"] for k in compiled if not k["name"].endswith("/shared")]
wall = (float(sys.argv[4]) - float(sys.argv[3])) * 1000
med = lambda v: f"{statistics.median(v):.0f} ms" if v else "-"
print(f"| {sys.argv[2]} | {len(ms)} | {med(ms)} | {len(shared)} | {med(shared)} | {wall / max(1, len(compiled)):.0f} ms |")
EOF
done

echo
echo "== 3. a cold first call: config and shared module in turn, and on two threads"
"$build/bin/bench_cold_compile" --first-call --arch "$arch" --reps 3
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
