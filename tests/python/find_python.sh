# Sourced by the Python ctest scripts: sets $py to a python3 that has numpy, venv and ensurepip, or exits 77
# (ctest's "skipped") saying what to install.
py=""
for c in ${KTUNE_PYTHON:-} /usr/bin/python3 python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c "import numpy, venv, ensurepip" >/dev/null 2>&1; then py=$c; break; fi
done
if [[ -z "$py" ]]; then
  echo "SKIP: no python3 with numpy, venv and ensurepip (tools/setup.sh installs python3-numpy python3-venv)"
  exit 77
fi
