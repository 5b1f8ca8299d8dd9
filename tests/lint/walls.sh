#!/usr/bin/env bash
# The walls between the rooms hold (docs/architecture.md):
#   - templates/, tools/ and autotune/ reach the runtime through its public headers (runtime/include/ktune/)
#     and runtime/internal/ktune_internal/ only: no #include of a runtime/src header (driver_api.hpp,
#     runtime_impl.hpp, nvrtc_api.hpp, ... -- the list is read from runtime/src, so a new private header is
#     covered the day it appears);
#   - the runtime core (runtime/, and templates/ but a family's workload*.cpp, which autotune/ builds) never
#     includes autotune/;
#   - installed headers (runtime/include/ktune/) include no internal header.
#   tests/lint/walls.sh [SOURCE_DIR]
set -u
cd "${1:-$(dirname "$0")/../..}"
fail=0
report() {  # report WHAT LINES: prints the offending lines, marks the run failed
  if [[ -n $2 ]]; then
    echo "$1:"
    echo "$2"
    fail=1
  fi
}
inc=(--include=*.cpp --include=*.hpp --include=*.h --include=*.cuh --include=*.c)
# Every header under runtime/src, as a regex alternative of its file name.
private=$(cd runtime/src && ls -- *.hpp *.h 2>/dev/null | sed 's/\./\\./g' | paste -sd'|' -)
if [[ -z $private ]]; then
  echo "walls: no headers found under runtime/src (run from the source tree)"
  exit 2
fi
# '#include "name"', '#include <name>' or '... "runtime/src/name"' (any leading path ending in runtime/src/).
pattern="^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]((\\.\\./)*([^\">]*/)?runtime/src/[^\">]*|($private))[\">]"
report "runtime/src headers included from templates/, tools/ or autotune/" \
  "$(grep -rnE "${inc[@]}" "$pattern" templates tools autotune)"
report "autotune/ included from the runtime core" \
  "$(grep -rnE "${inc[@]}" '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]autotune/' runtime templates \
     | grep -vE '^templates/[^/]+/workload[^/]*:')"
report "internal headers included from installed headers" \
  "$(grep -rnE "${inc[@]}" "$pattern|^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<](ktune_internal|autotune)/" \
     runtime/include)"
((fail == 0)) && echo "walls hold: no runtime/src header outside runtime/, no autotune/ in the runtime core, no internal header installed"
exit $fail
