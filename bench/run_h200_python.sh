#!/usr/bin/env bash
# Issue 9 on the H200: the Python package's GPU tests (python/tests/test_torch.py: the README story, every op
# eager vs a reference, CUDA-graph capture + replay, torch.compile(fullgraph=True), opcheck; xqa_decode,
# sparse_mla_decode, mxfp4_gemm) with the device's PyTorch. Two steps:
#
#   bench/run_h200_python.sh --pack [BUILD_DIR]   on the CPU machine: fills h200pack-py/ (gitignored) with a
#       stripped lib/libktune.so.0 and ktune.db, a cache precompiled for sm_90a without a GPU (the preset's
#       every candidate via `ktune warmup --arch sm_90a`, the tests' other problems via ktune.Runtime.compile),
#       so no JIT happens on the device
#   bench/run_h200_python.sh                      on the H200 (the `run` tool, carry h200pack-py): installs
#       ./python with pip --no-index --target (no network there; PYTHONPATH points at it), copies the cache to
#       a writable place (the warmup tunes into it) and runs the tests; logs under $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
export PACK=${PACK:-h200pack-py}

if [[ "${1:-}" == "--pack" ]]; then
  set -e
  BUILD=${2:-build-py}
  rm -rf "$PACK" && mkdir -p "$PACK/lib"
  cp -L "$BUILD/lib/libktune.so.0" "$PACK/lib/libktune.so.0"
  strip --strip-unneeded "$PACK/lib/libktune.so.0"
  export KTUNE_LIBRARY=$PWD/$PACK/lib/libktune.so.0 KTUNE_LOG=error
  "$BUILD/bin/ktune" warmup --preset llama-3.1-8b --arch sm_90a --max-batch 4 --max-seq-len 1024 \
    --cache "$PACK/ktune.db" --json | tail -1
  PYTHONPATH=python:python/tests python3 - <<'PY'
import os, ktune, gpu_problems
rt = ktune.Runtime(cache=os.environ["PACK"] + "/ktune.db", allow_jit=True)
todo = [("xqa_decode", ktune.xqa_problem(**f)) for f in gpu_problems.ALL]
fams = ktune.families()
if "sparse_mla_decode" in fams:
    todo += [("sparse_mla_decode", ktune.mla_problem(**f)) for f in gpu_problems.MLA_PROBLEMS]
if "mxfp4_gemm" in fams:
    todo += [("mxfp4_gemm", ktune.mxfp4_problem(**f)) for f in gpu_problems.MXFP4_PROBLEMS]
for fam, key in todo:
    print(fam, key, "compiled" if rt.compile(fam, key, "sm_90a") else "cached")
PY
  du -sh "$PACK"
  exit 0
fi

OUT=${OUT:-/tmp/ktune-h200-python}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$PACK/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KTUNE_LIBRARY=$PWD/$PACK/lib/libktune.so.0
export KTUNE_CACHE=/tmp/ktune-python.db KTUNE_EXPECT_NO_JIT=1 KTUNE_LOG=warn
cp "$PACK/ktune.db" "$KTUNE_CACHE"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0))'
rm -rf /tmp/ktune-py
python3 -m pip install --no-index --no-deps --quiet --target /tmp/ktune-py ./python 2>&1 | tail -3
export PYTHONPATH=/tmp/ktune-py
cd /tmp  # import the installed package, not the checkout's
python3 -c 'import ktune; print("ktune", ktune.version(), ktune.__file__, ktune.library_path())'
start=$(date +%s)
python3 -m unittest discover -s "$OLDPWD/python/tests" -t "$OLDPWD/python/tests" -v >"$OUT/python_tests.log" 2>&1
rc=$?
echo "tests exit $rc in $(( $(date +%s) - start )) s"
grep -E "^(test_|warmup:|readme story|eager |graph |torch.compile|Ran |OK|FAILED)|Error|error:" "$OUT/python_tests.log" | tail -60
exit $rc
