#!/usr/bin/env bash
# ASan+UBSan and TSan builds of the CPU test suite, plus a reduced stress run under each
# (docs/reliability.md). Separate build trees: build-asan/, build-tsan/ (g++; see cmake/sanitize.cmake).
#   tools/sanitize.sh [asan|tsan|all]      default all
#   tools/sanitize.sh ci                   what CI runs (ctest `sanitizers`; build trees under $KTUNE_SANITIZE_ROOT,
#                                          default .): -O0 builds without the LLVM host
#                                          plugin; ASan+UBSan over the CPU suite minus the multi-arch NVRTC
#                                          [compile] sweeps, TSan over the concurrent parts ([runtime], [cache],
#                                          [autotune], [hardening]; their own, smaller test binary) and the
#                                          stress tool
# Exit status 0 only when every test passes with no sanitizer report (reports are fatal: halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
jobs="$(nproc)"
root="$PWD"

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$root/tools/sanitize.supp.lsan:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tools/sanitize.supp.tsan"

run() {
  local name="$1" flags="$2" dir="build-$1"
  echo "== $name: KTUNE_SANITIZE=$flags in $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTUNE_SANITIZE="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs" --target ktune_tests ktune_stress fuzz_json fuzz_problem_key fuzz_cache_db \
    fuzz_seed_cache_db
  local t0=$SECONDS
  # The CPU suite ([gpu] tests skip themselves without a GPU; on a GPU machine they run too).
  "$dir/bin/ktune_tests" --order rand --rng-seed 1 "~[.]"
  # Reduced load: the same code paths as the full runs, sized for an instrumented build.
  "$dir/bin/ktune_stress" cache --procs 6 --ops 300
  "$dir/bin/ktune_stress" runtime --procs 2 --threads 16 --kernels 3 || [[ $? == 77 ]]
  "$dir/bin/ktune_stress" crash --rounds 20
  local seeds="$dir/fuzz/scratch/cache_db_seeds"
  mkdir -p "$seeds"
  "$dir/bin/fuzz_seed_cache_db" "$seeds"
  "$dir/bin/fuzz_json" -max_total_time=20 fuzz/corpus/json
  "$dir/bin/fuzz_problem_key" -max_total_time=20 fuzz/corpus/problem_key
  "$dir/bin/fuzz_cache_db" -max_total_time=20 "$seeds"
  echo "== $name: clean ($((SECONDS - t0)) s of runs)"
}

# CI: smaller, faster builds and the suites that exercise ktune's own code, each sanitizer where it finds most.
# -O0: an instrumented TU compiles in about half the time of -O1 (10.6 s -> 5.6 s for tests/hardening/
# test_damage.cpp with ASan+UBSan), which keeps CI's two extra trees to minutes on 2 cores; no host plugin
# (it links LLVM, which is not instrumented anyway). The TSan tree builds ktune_tests_concurrent, the test files
# of its suites only (tests/CMakeLists.txt), and must list exactly the cases the ASan tree's ktune_tests lists
# for the same filter.
ci_dir() { echo "${KTUNE_SANITIZE_ROOT:-.}/build-ci-$1"; }
run_ci() {
  local name="$1" flags="$2" filter="$3" tests="$4" dir
  dir="$(ci_dir "$1")"
  echo "== ci $name: KTUNE_SANITIZE=$flags in $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0 -g0" -DKTUNE_HOST_BACKEND=OFF \
    -DKTUNE_SANITIZE="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs" --target "$tests" ktune_stress
  if [[ "$tests" != ktune_tests ]]; then
    local full="$(ci_dir asan)/bin/ktune_tests"
    if ! diff <("$full" --list-test-names-only "$filter" | sort) <("$dir/bin/$tests" --list-test-names-only "$filter" | sort); then
      echo "error: $tests lacks (<) or adds (>) the cases above for $filter: see tests/CMakeLists.txt" >&2
      return 1
    fi
  fi
  local t0=$SECONDS
  # These trees build no host backend: their host tests skip whatever the caller's KTUNE_TEST_REQUIRE says.
  local require
  require=$(tr ',' '\n' <<<"${KTUNE_TEST_REQUIRE:-}" | { grep -vx host || true; } | paste -sd, -)
  # A random order each run, with the seed said up front and again beside any failure: the CI log keeps only the
  # head and tail of this test's output, so a failure's report is repeated at the end where it survives.
  local seed=$((RANDOM * 32768 + RANDOM)) log="$dir/tests.log" rc=0
  echo "== ci $name: $tests --order rand --rng-seed $seed"
  KTUNE_TEST_REQUIRE=$require "$dir/bin/$tests" --order rand --rng-seed "$seed" "$filter" 2>&1 | tee "$log" \
    || rc=$?
  if ((rc != 0)); then
    echo "== ci $name: FAILED (exit $rc, --rng-seed $seed); the failures again:"
    { grep -v '^\[ktune ' "$log" | grep -B 14 -A 8 -E 'FAILED|due to unexpected exception' | head -150; } || true
    return "$rc"
  fi
  "$dir/bin/ktune_stress" cache --procs 4 --ops 200
  "$dir/bin/ktune_stress" runtime --procs 2 --threads 16 --kernels 2 || [[ $? == 77 ]]
  "$dir/bin/ktune_stress" crash --rounds 10
  echo "== ci $name: clean ($((SECONDS - t0)) s of runs)"
}

case "$which" in
  ci)
    run_ci asan "address,undefined" "~[.]~[compile]" ktune_tests
    run_ci tsan "thread" "[runtime],[cache],[autotune],[hardening]" ktune_tests_concurrent
    ;;
  asan) run asan "address,undefined" ;;
  tsan) run tsan "thread" ;;
  all) run asan "address,undefined"; run tsan "thread" ;;
  *) echo "usage: $0 [asan|tsan|all|ci]" >&2; exit 2 ;;
esac
