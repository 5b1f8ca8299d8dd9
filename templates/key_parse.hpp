// Readable problem/config keys ("d128.h32.kv8.p32...", "t64.s3.w4"): the token helpers every family's spec
// parses them with. Strict on purpose: a key has exactly one spelling, so a cache listing, a log line and a
// command line always name the same binary.
#pragma once

#include <string>
#include <vector>

namespace ktune::key_parse {

// "a.b..c" -> {"a", "b", "", "c"}.
std::vector<std::string> split_dots(const std::string& s);
// "<prefix><non-negative int>" exactly: no sign, no leading zeros, at most `max_digits` digits (<= 9), no
// trailing text.
bool parse_num(const std::string& token, const std::string& prefix, int* out, int max_digits = 6);
// Key spelling of a ktune_common::DType: "bf16", "fp16", "e4m3", "f32" ("?" for anything else).
const char* dtype_token(int dtype);
inline bool is_pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

}  // namespace ktune::key_parse
