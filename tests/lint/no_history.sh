#!/usr/bin/env bash
# Shipped sources carry no development record: no dates, session or issue numbers, or bench/results paths in
# runtime/, templates/, cache/, autotune/ (comments say why the code is as it is; figures and histories live in
# docs/ and git log), and no dev knobs in templates/ (experiments live in bench/dev/ harnesses). Also checks
# that bench/results/README.md indexes every results file.
#   tests/lint/no_history.sh [SOURCE_DIR]
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
src=(runtime templates cache autotune)
inc=(--include=*.cpp --include=*.hpp --include=*.h --include=*.cuh --include=*.c --include=*.txt --include=*.cmake)
report "dates in library sources" "$(grep -rnE "20[0-9]{2}-[01][0-9]-[0-3][0-9]" "${inc[@]}" "${src[@]}")"
report "bench/results references in library sources" "$(grep -rnE "bench/results" "${inc[@]}" "${src[@]}")"
report "session or issue numbers in library sources" "$(grep -rnE \
  "\b[Ss]essions? [0-9]+|\b[Ii]ssues? #?[0-9]+[):,;.]|\([Ii]ssues? #?[0-9]+|\b[Ii]ssue #[0-9]+" "${inc[@]}" "${src[@]}")"
report "dev knobs in templates/" "$(grep -rnE "kDev|KTUNE_SPEC_KNOB|spec_knob" templates)"
if [[ -d bench/results ]]; then
  missing=$(for f in bench/results/*; do
    name=$(basename "$f")
    [[ $name == README.md ]] || grep -qsF "($name)" bench/results/README.md || echo "$f"
  done)
  report "results files missing from bench/results/README.md" "$missing"
fi
((fail == 0)) && echo "no history in library sources, no dev knobs in templates/, results indexed"
exit $fail
