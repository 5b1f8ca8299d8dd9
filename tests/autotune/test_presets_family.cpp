// The presets speak each family's JSON: every op of every embedded preset (plain and with the CLI overrides)
// is accepted by its family's problem_from_json, for the families this build has.
#include <catch2/catch.hpp>

#include "autotune/presets.hpp"
#include "ktune/family.hpp"

using namespace ktune::autotune;

TEST_CASE("autotune presets: every op is a valid problem for its family", "[autotune]") {
  int checked = 0;
  for (const auto& name : preset_names()) {
    Preset base = load_preset(name);
    for (const Preset& p : {base, with_overrides(base, std::string("fp8"), std::nullopt, std::nullopt, 3)}) {
      for (const auto& op : p.ops) {
        const ktune::FamilyInfo* family = nullptr;
        for (const auto& f : ktune::families())
          if (f.name == op.family) family = &f;
        if (!family) continue;  // not in this build yet
        INFO(name << " " << op.label << " " << op.problem_json);
        CHECK_NOTHROW(family->problem_from_json(op.problem_json));
        ++checked;
      }
    }
  }
  CHECK(checked > 0);
}
