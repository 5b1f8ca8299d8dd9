// Compiles one xqa_decode problem's default kernel (and its shared module) for sm_90a into a cache given on the
// command line (no GPU needed). The headers are C++17 (std::optional options, inline constants): built through
// ktune::ktune, this compiles as C++17 whatever standard the consumer's project sets.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  ktune::RuntimeOptions o;
  o.cache_path = argv[1];
  o.trusted_keys = std::nullopt;  // no signature checks (a std::optional: set, even to "", it names key files)
  ktune::Runtime rt(o);
  const std::optional<std::string>& keys = rt.options().trusted_keys;
  std::printf("writable layer %s, signatures %s\n", rt.writable_cache_layer().c_str(),
              keys ? "checked" : "unchecked");
  ktune::xqa::Problem p;  // Llama-3.1-8B decode: 32 q heads, 8 kv heads, head_dim 128
  p.max_q_len = 1;
  p.mask = ktune::xqa::MaskKind::None;
  const ktune::FamilyInfo& f = ktune::family("xqa_decode");
  ktune::Arch arch = ktune::Arch::parse("sm_90a");
  // What a launch of the problem needs: the default config's module and the problem's shared module (its
  // split-KV combine and helpers).
  std::vector<std::string> configs = {f.default_config(p.key(), arch)};
  for (const std::string& c : ktune::shared_module_configs(f, p.key(), arch)) configs.push_back(c);
  for (const std::string& c : configs) {
    auto r = rt.ensure_binary(f.generate(p.key(), c, arch), arch);
    std::printf("%s%s %s\n", c == ktune::kSharedConfig ? "shared module " : "", r.name.c_str(),
                r.compiled ? "compiled" : "cached");
  }
  return 0;
}
