#!/usr/bin/env bash
# The README's new-user story on a GPU machine, run from the README's own text:
#   1. set-up: `tools/setup.sh` (skipped when build/lib/libktune.so is already there: the H200 machine has no
#      network for apt, so bench/run_h200.sh readme brings a build made by that same command on the CPU machine)
#   2. the shell block under "## Python (PyTorch engines)", extracted from README.md and run as written
#      (`python3 -m pip install --no-index ./python`, `export KTUNE_LIBRARY=...`)
#   3. the python block under the same heading, exec'd unchanged by tests/readme/readme_story.py with that same
#      python3: ktune.warmup(preset="llama-3.1-8b") into the default cache, then the XQA op on torch tensors,
#      checked against fp64 torch attention
# The default cache (~/.cache/ktune/ktune.db) is left as found and reported (on a fresh machine: absent, so the
# warmup compiles and tunes from nothing). HOME is not redirected: Python finds user-site packages (torch)
# through it. Exit 0 = PASS, 77 = no GPU (skip), else FAIL.
set -euo pipefail
cd "$(dirname "$0")/../.."
db=${XDG_CACHE_HOME:-$HOME/.cache}/ktune/ktune.db
echo "readme story: default cache $db: $( [[ -e $db ]] && echo "exists, $(du -k "$db" | cut -f1) KiB" || echo absent)"
if [[ ! -f build/lib/libktune.so ]]; then
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
eval "$block"
cd /tmp  # import the installed package, not the checkout's python/ folder
python3 -c 'import ktune, torch; print("ktune", ktune.version(), "from", ktune.__file__, "| torch", torch.__version__)'
python3 "$OLDPWD/tests/readme/readme_story.py"
