#!/usr/bin/env bash
# ctest report_chromium: `ktune report` on a cache of real tuning rows, checked in headless Chromium.
#   1. the [report] unit tests write a fixture cache (rows from real sweeps over a scripted timer: two devices'
#      worth of keys, failed and pruned candidates, a row of an older build, a hostile key, an unreadable row);
#   2. with the LLVM host backend, `ktune tune --arch host` tunes one small xqa_decode key on this CPU (a real
#      measured row with bytes/FLOPs per call and the measured host bandwidth ceiling);
#   3. `ktune report` renders both layers; Chromium (--headless --dump-dom) runs the page's script, and the DOM
#      must hold one SVG bar per candidate in the cache, one winner bar per readable key, one roofline point per
#      key that records bytes and FLOPs, and the hostile strings only as text (no injected element/attribute).
# Skips (exit 77, which ctest reports as skipped, saying why) when Chromium is absent; tools/setup.sh installs
# it (Debian package chromium).
# usage: report_chromium.sh KTUNE_CLI KTUNE_TESTS BUILD_DIR
set -euo pipefail
ktune="${1:?usage: report_chromium.sh KTUNE_CLI KTUNE_TESTS BUILD_DIR}"
tests="${2:?}"
build="${3:?}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. Fixture cache + its expected counts.
KTUNE_REPORT_FIXTURE_DB="$tmp/fixture.db" "$tests" "[report]" >"$tmp/unit.log" 2>&1 || { cat "$tmp/unit.log"; fail "[report] unit tests"; }
expect() { sed -n "s/^$1=//p" "$tmp/fixture.db.expect"; }
keys=$(expect keys); unreadable=$(expect unreadable); candidates=$(expect candidates)
points=$(expect roofline_points); devices=$(expect devices); binaries=$(expect binaries)
search="$tmp/fixture.db"

# 2. A real host tuning (small key), when the host backend was built.
if [[ -f "$build/lib/libktune_host.so" ]]; then
  tune="$("$ktune" tune --family xqa_decode --problem d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none --batch 1 \
          --max-seq-len 512 --arch host --cache "$tmp/host.db" --json)"
  n=$(grep -o '{"config": ' <<<"$tune" | wc -l)
  [[ "$n" -gt 1 ]] || fail "host tuning reported $n candidates: $tune"
  grep -q '"\(bytes_per_call\|peak_bytes_per_s\)"' < <("$ktune" cache show b1.l512 --cache "$tmp/host.db" --json) ||
    fail "the host tuning row records no bytes per call / ceilings"
  keys=$((keys + 1)); candidates=$((candidates + n)); points=$((points + 1)); devices=$((devices + 1))
  binaries=$((binaries + $("$ktune" cache ls --cache "$tmp/host.db" --json | sed -n 's/^{"count": \([0-9]*\).*/\1/p')))
  search="$search:$tmp/host.db"
  echo "host tuning: $n candidates measured on this CPU"
else
  echo "note: host backend not built ($build/lib/libktune_host.so): fixture rows only"
fi

# 3. The report.
summary="$("$ktune" report --cache "$search" -o "$tmp/report.html" --json)"
echo "report: $summary"
field() { sed -n "s/.*\"$1\": *\([0-9-]*\).*/\1/p" <<<"$summary" | head -n1; }
for f in "tuning_keys $keys" "unreadable $unreadable" "candidates $candidates" "roofline_points $points" \
         "devices $devices" "binaries $binaries"; do
  set -- $f
  [[ "$(field "$1")" == "$2" ]] || fail "report summary $1 = $(field "$1"), expected $2"
done
page="$tmp/report.html"
[[ $(grep -o '<script' "$page" | wc -l) == 2 ]] || fail "expected exactly 2 <script> elements (data + code)"
if grep -Eqi '(src|href)[[:space:]]*=[[:space:]]*["'"'"']?[a-z]+:|@import|url\(' "$page"; then
  fail "the page references an external resource"
fi
grep -q '<b id=\|<img' "$page" && fail "a hostile string is in the page source unescaped"

chromium=""
for c in "${KTUNE_CHROMIUM:-}" chromium chromium-browser; do
  [[ -n "$c" ]] && command -v "$c" >/dev/null 2>&1 && { chromium="$c"; break; }
done
if [[ -z "$chromium" ]]; then
  echo "[report] skipped the Chromium check (the checks above passed): no chromium on PATH (tools/setup.sh installs the Debian package chromium)"
  exit 77
fi
flags=(--headless --disable-gpu --no-first-run --no-default-browser-check --disable-extensions
       --disable-dev-shm-usage --user-data-dir="$tmp/profile")
[[ $(id -u) -eq 0 ]] && flags+=(--no-sandbox)
timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$page" >"$tmp/dom.html" 2>"$tmp/chromium.log" ||
  { tail -n 20 "$tmp/chromium.log"; fail "chromium exited with $?"; }
dom="$tmp/dom.html"
count() { grep -o "$1" "$dom" | wc -l; }
grep -q 'data-rendered="ok"' "$dom" || { tail -n 20 "$tmp/chromium.log"; fail "the page's script did not finish (no data-rendered=\"ok\")"; }
[[ $(count 'class="bar bar-') == "$candidates" ]] || fail "$(count 'class="bar bar-') bars rendered, $candidates candidates in the cache"
[[ $(count 'class="bar bar-winner"') == $((keys - unreadable)) ]] || fail "$(count 'class="bar bar-winner"') winner bars, $((keys - unreadable)) readable keys"
[[ $(count 'class="bar bar-failed"') -ge 3 && $(count 'class="bar bar-pruned"') -ge 4 ]] || fail "failed/pruned candidates not drawn as such"
[[ $(count 'class="roofpt"') == "$points" ]] || fail "$(count 'class="roofpt"') roofline points rendered, expected $points"
[[ $(count 'class="roofline"') -ge 2 ]] || fail "device roofs not drawn"
grep -q "data-bars=\"$candidates\"" "$dom" || fail "data-bars does not say $candidates"
# Injected markup would serialize as a real tag / attribute; escaped text serializes as &lt;... (and
# setAttribute('data-pwned',...) as text has no '="').
grep -q 'data-pwned="' "$dom" && fail "a hostile string ran as script"
grep -qF '<b id=' "$dom" && fail "a hostile key became an element"
grep -qF '<img src="x"' "$dom" && fail "a hostile config became an element"
grep -qF '&lt;/script&gt;&lt;script&gt;document.body.setAttribute(' "$dom" || fail "the hostile key is not shown as text"
grep -q 'unreadable row: [^<]*tuning row sparse_mla_decode/h128\.topk2048|b1: format' "$dom" || fail "the unreadable row is not named"
echo "report_chromium: $candidates bars ($((keys - unreadable)) winners), $points roofline points, $keys keys on $devices devices; hostile key escaped"
