#!/usr/bin/env bash
# Sources carry no development record (comments and test names say what is and why; figures and histories live
# in docs/, bench/results/ and git log):
#   - no dates and no session or issue numbers in the library (runtime/, templates/, cache/, autotune/) or in
#     the code around it (tools/, tests/, bench/ but bench/results/, examples/, python/, fuzz/, cmake/, the top
#     CMakeLists.txt); the bench harnesses may cite a results file by its dated name, and the fixture lines
#     listed in `fixtures` below are test data;
#   - no bench/results paths in the library, and no dev knobs in templates/ (experiments live in bench/dev/);
#   - bench/results/README.md indexes every results file.
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
lib=(runtime templates cache autotune)
dev=(tools tests examples python fuzz cmake CMakeLists.txt)
for p in bench/*; do [[ $p == bench/results ]] || dev+=("$p"); done
inc=(--include=*.cpp --include=*.hpp --include=*.h --include=*.cu --include=*.cuh --include=*.c --include=*.py
     --include=*.sh --include=*.txt --include=*.cmake)
# Session numbers in any form; issue numbers as "Issue N", "issue-N", "issue #N", "(issue N", or "issue N"
# followed by punctuation, the end of the line, a non-word or "and/or/to N". A verb ("issues 4 wgmma") is not one.
history='\b[Ss]essions? #?[0-9]+|\bIssues?[- ]#?[0-9]+|\b[Ii]ssues?(-| ?#)[0-9]+|\([Ii]ssues? [0-9]+'
history+='|\b[Ii]ssues? [0-9]+([^0-9a-z ]|$| [^a-z]| (and|or|to) #?[0-9])'
date='20[0-9][0-9]-[01][0-9]-[0-3][0-9]'  # no {n}: awk reads it too
# Test data that holds a date (grep -n output, as an ERE).
fixtures=('^tests/report/test_report\.cpp:[0-9]+: *in\.generated_at = "')
existing=()
for p in "${lib[@]}" "${dev[@]}"; do [[ -e $p ]] && existing+=("$p"); done
dates=$(grep -rnE "$date" "${inc[@]}" "${existing[@]}" |
  grep -vE "$(IFS='|'; echo "${fixtures[*]}")" |
  awk -v d="$date" '{ s = $0; gsub(/bench\/results\/[^ ):,]*/, "", s); if (s ~ d) print }')
report "dates in sources" "$dates"
report "session or issue numbers in sources" "$(grep -rnE "$history" "${inc[@]}" "${existing[@]}")"
report "bench/results references in library sources" "$(grep -rnE "bench/results" "${inc[@]}" "${lib[@]}")"
report "dev knobs in templates/" "$(grep -rnE "kDev|KTUNE_SPEC_KNOB|spec_knob" templates)"
if [[ -d bench/results ]]; then
  missing=$(for f in bench/results/*; do
    name=$(basename "$f")
    [[ $name == README.md ]] || grep -qsF "($name)" bench/results/README.md || echo "$f"
  done)
  report "results files missing from bench/results/README.md" "$missing"
fi
((fail == 0)) && echo "no dates or session/issue numbers in sources, no dev knobs in templates/, results indexed"
exit $fail
