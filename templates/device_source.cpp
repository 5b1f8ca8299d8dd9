#include "device_source.hpp"

#include <sstream>

namespace ktune::device_source {

GeneratedKernel generate(const SpecSource& s) {
  std::ostringstream src;
  src << "// ktune " << s.family << " " << s.title << "\n";
  for (const std::string& h : s.includes) src << "#include \"" << h << "\"\n";
  src << "namespace " << s.device_namespace << " {\n"
      << "struct Spec {\n"
      << s.spec_members << "};\n"
      << "}  // namespace " << s.device_namespace << "\n";
  GeneratedKernel k;
  k.family = s.family;
  k.problem_key = s.problem_key;
  k.config_key = s.config_key;
  k.source = src.str();
  k.entry_points = s.entry_points;
  k.options = {"-std=c++17"};
  return k;
}

}  // namespace ktune::device_source
