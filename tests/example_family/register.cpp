// The one registration line of example_scale: every binary this object is linked into (ktune_tests,
// libktune_example.so, the ktune_example CLI) knows the family before main runs. A family of the library
// itself is one line in templates/registry.cpp instead (docs/new_family.md).
#include "example_family/family.hpp"

namespace {
[[maybe_unused]] const bool registered = (ktune::register_family(ktune::example::family_info()), true);
}  // namespace
