// Compiles one xqa_decode kernel for sm_90a into a cache given on the command line (no GPU needed).
#include <cstdio>

#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  ktune::RuntimeOptions o;
  o.cache_path = argv[1];
  ktune::Runtime rt(o);
  ktune::xqa::Problem p;  // Llama-3.1-8B decode: 32 q heads, 8 kv heads, head_dim 128
  p.max_q_len = 1;
  p.mask = ktune::xqa::MaskKind::None;
  const ktune::FamilyInfo& f = ktune::family("xqa_decode");
  ktune::Arch arch = ktune::Arch::parse("sm_90a");
  auto r = rt.ensure_binary(f.generate(p.key(), f.default_config(p.key(), arch), arch), arch);
  std::printf("%s %s\n", r.name.c_str(), r.compiled ? "compiled" : "cached");
  return 0;
}
