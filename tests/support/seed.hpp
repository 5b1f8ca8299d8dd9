// The seed of a test's fresh random data: KTUNE_TEST_SEED=<n> replays a run, otherwise a new seed is drawn.
// Either way the seed is printed, so a failing run can be replayed exactly.
#pragma once

#include <cstdint>

namespace ktune::test {

// KTUNE_TEST_SEED as a decimal unsigned 64-bit integer when it is set and not empty, else a fresh random seed.
// Prints "<label>: seed <n> (KTUNE_TEST_SEED=<n> replays it)" to stdout (flushed, so a crash keeps it).
// Throws std::invalid_argument, naming the variable and what it expects, when the value is not such a number:
// a typo must not quietly become seed 0 or a fresh seed.
// Each call reads (or draws) anew; a test that wants one seed for the whole run keeps the value itself.
std::uint64_t run_seed(const char* label);

}  // namespace ktune::test
