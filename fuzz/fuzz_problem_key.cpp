// Fuzz target: problem/config keys and problem JSON of every family, Arch::parse.
// Properties: only ktune::Error escapes; a key that parses is canonical (key() == input); a canonical problem
// round-trips through FamilyInfo; a problem built from JSON is a canonical key.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ktune/arch.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "templates/xqa_decode/spec.hpp"

namespace {

template <class F>
void expect_only_ktune_errors(F&& f) {
  try {
    f();
  } catch (const ktune::Error& e) {
    if (e.status() != ktune::Status::invalid_argument && e.status() != ktune::Status::not_found) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  expect_only_ktune_errors([&] {
    ktune::xqa::Problem p = ktune::xqa::Problem::from_key(s);
    if (p.key() != s) std::abort();
    p.validate();
  });
  expect_only_ktune_errors([&] {
    ktune::xqa::Config c = ktune::xqa::Config::from_key(s);
    if (c.key() != s) std::abort();
  });
  expect_only_ktune_errors([&] {
    ktune::Arch a = ktune::Arch::parse(s);
    if (ktune::Arch::parse(a.str()).str() != a.str()) std::abort();
  });
  for (const ktune::FamilyInfo& f : ktune::families()) {
    expect_only_ktune_errors([&] {
      const std::string canon = f.canonical_problem(s);
      if (f.canonical_problem(canon) != canon) std::abort();
      const ktune::Arch arch = ktune::Arch::parse("sm_90a");
      const std::string config = f.default_config(canon, arch);
      if (config.empty()) std::abort();
    });
    expect_only_ktune_errors([&] {
      const std::string key = f.problem_from_json(s);
      if (f.canonical_problem(key) != key) std::abort();
    });
  }
  return 0;
}
