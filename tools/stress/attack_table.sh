#!/usr/bin/env bash
# Re-runs the attack table of docs/reliability.md and prints, per area, how many attacks held (the cache, the
# runtime or the CLI refused or survived them as documented) and how many broke. An attack is one Catch2 test
# case tagged [attack][<area>] or one shell attack script under tests/cli/ named attack_*.sh; every one of them
# fails on a tree without the protection it checks.
#   tools/stress/attack_table.sh build            (exit 0 only if nothing broke)
#   tools/stress/attack_table.sh build --markdown (the table as it appears in docs/reliability.md)
set -uo pipefail
build=${1:?usage: attack_table.sh BUILD_DIR [--markdown]}
markdown=${2:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
tests="$build/bin/ktune_tests"
[[ -x "$tests" ]] || { echo "error: $tests not found (build the ktune_tests target)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

areas=(trust tamper poison lock readonly export singleflight cli capi)
declare -A held broke names seen
total_broke=0
for area in "${areas[@]}"; do
  held[$area]=0
  broke[$area]=0
  names[$area]=""
  while IFS= read -r name; do
    [[ -z "$name" || -v seen[$name] ]] && continue
    seen[$name]=1
    # Catch2 treats a name with [ or , as a pattern: escape them so exactly this case runs.
    pattern=${name//\\/\\\\}
    pattern=${pattern//[/\\[}
    pattern=${pattern//,/\\,}
    if "$tests" "$pattern" >"$tmp/out.txt" 2>&1; then
      held[$area]=$((held[$area] + 1))
    else
      broke[$area]=$((broke[$area] + 1))
      names[$area]+="    broke: $name"$'\n'
    fi
  done < <("$tests" --list-test-names-only "[attack][$area]" 2>/dev/null | sed -e 's/^ *//' -e '/^$/d')
done

# Shell attacks: tests/cli/attack_<area>_*.sh BUILD_DIR, exit 0 = held, 77 = skipped, anything else = broke.
shopt -s nullglob
for script in "$root"/tests/cli/attack_*.sh; do
  base=$(basename "$script" .sh)
  area=${base#attack_}
  area=${area%%_*}
  [[ -v held[$area] ]] || { areas+=("$area"); held[$area]=0; broke[$area]=0; names[$area]=""; }
  "$script" "$build" >"$tmp/out.txt" 2>&1
  rc=$?
  if ((rc == 0)); then
    held[$area]=$((held[$area] + 1))
  elif ((rc != 77)); then
    broke[$area]=$((broke[$area] + 1))
    names[$area]+="    broke: $base ($(tail -n 1 "$tmp/out.txt"))"$'\n'
  fi
done

if [[ "$markdown" == --markdown ]]; then
  echo "| area | attacks | held | broke |"
  echo "| --- | --- | --- | --- |"
fi
for area in "${areas[@]}"; do
  n=$((held[$area] + broke[$area]))
  ((n == 0)) && continue
  total_broke=$((total_broke + broke[$area]))
  if [[ "$markdown" == --markdown ]]; then
    echo "| $area | $n | ${held[$area]} | ${broke[$area]} |"
  else
    printf '%-13s %3d attacks  %3d held  %3d broke\n' "$area" "$n" "${held[$area]}" "${broke[$area]}"
    printf '%s' "${names[$area]}"
  fi
done
((total_broke == 0))
