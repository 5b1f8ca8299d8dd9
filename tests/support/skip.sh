# Gated shell tests, as tests/support/skip.hpp is for the C++ suite: a test that needs something this machine may
# lack skips with the reason (exit 77, ctest's SKIP_RETURN_CODE), unless KTUNE_TEST_REQUIRE lists that capability,
# in which case the skip is a failure (exit 1). Sourced by the scripts:
#   skip_or_fail CAPABILITY WHY [CODE]   CODE: the exit status of a skip (default 77; 0 where the part of the
#                                        test that did run has passed and only the rest is skipped)
skip_or_fail() {
  local item
  IFS=',' read -ra items <<<"${KTUNE_TEST_REQUIRE:-}"
  for item in "${items[@]}"; do
    if [[ $item == "$1" ]]; then
      echo "FAIL: KTUNE_TEST_REQUIRE names $1 but this test would skip: $2"
      exit 1
    fi
  done
  echo "[$1] skipped: $2"
  exit "${3:-77}"
}
