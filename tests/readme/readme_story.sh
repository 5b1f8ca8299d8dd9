#!/usr/bin/env bash
# The README's new-user story on a GPU machine, run from the README's own text (issue 9):
#   1. set-up: `tools/setup.sh` (skipped when build/lib/libktune.so.0 is already there: the H200 machine has no
#      network for apt, so bench/run_h200_readme.sh brings a build made by that same command on the CPU machine)
#   2. the shell block under "## Python (PyTorch engines)", extracted from README.md and run as written
#      (venv, `pip install --no-index ./python`, `export KTUNE_LIBRARY=...`)
#   3. the python block under the same heading, exec'd unchanged by tests/readme/readme_story.py with the venv's
#      python: ktune.warmup(preset="llama-3.1-8b") into the default cache, then the XQA op on torch tensors,
#      checked against fp64 torch attention
# KTUNE_README_FRESH_HOME=1 points HOME at an empty folder first, so the default cache (~/.cache/ktune/ktune.db)
# starts empty like a new user's. Exit 0 = PASS, 77 = no GPU (skip), else FAIL.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ ${KTUNE_README_FRESH_HOME:-0} == 1 ]]; then
  HOME=$(mktemp -d)
  export HOME
fi
echo "readme story: HOME=$HOME, default cache $( [[ -e $HOME/.cache/ktune/ktune.db ]] && echo exists || echo absent )"
if [[ ! -f build/lib/libktune.so.0 ]]; then
  tools/setup.sh
fi
block=$(python3 - <<'PY'
import re, pathlib
text = pathlib.Path("README.md").read_text()
start = text.index("\n## Python (PyTorch engines)\n")
print(re.compile(r"^```sh\n(.*?)^```", re.S | re.M).search(text, start).group(1))
PY
)
echo "README shell block, run as written:"
echo "$block"
rm -rf .venv
eval "$block"
.venv/bin/python -c 'import ktune, torch; print("ktune", ktune.version(), "from", ktune.__file__, "| torch", torch.__version__)'
.venv/bin/python tests/readme/readme_story.py
