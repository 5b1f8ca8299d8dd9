// The message of the ktune::Error a call throws, or "" when it returns: for tests that check an error's exact text
// (field, expected, got) or, with .empty(), that a call is accepted.
#pragma once

#include <string>
#include <utility>

#include "ktune/error.hpp"

namespace ktune::test {

template <class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ktune::test
