#include "key_parse.hpp"

#include "common/dtype.h"

namespace ktune::key_parse {

const char* dtype_token(int dtype) {
  switch (dtype) {
    case ::ktune_common::kBF16: return "bf16";
    case ::ktune_common::kFP16: return "fp16";
    case ::ktune_common::kE4M3: return "e4m3";
    case ::ktune_common::kF32: return "f32";
  }
  return "?";
}

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == '.') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

bool parse_num(const std::string& tok, const std::string& prefix, int* out, int max_digits) {
  if (tok.size() <= prefix.size() || tok.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string digits = tok.substr(prefix.size());
  if (digits.size() > size_t(max_digits) || max_digits > 9 || (digits.size() > 1 && digits[0] == '0')) return false;
  for (char ch : digits)
    if (ch < '0' || ch > '9') return false;
  *out = std::stoi(digits);
  return true;
}

}  // namespace ktune::key_parse
