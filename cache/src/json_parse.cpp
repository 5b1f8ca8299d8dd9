// Strict RFC 8259 parser for Json. Written to take hostile input: every read is bounds-checked, nesting is
// limited, and numbers are converted with from_chars (no locale, no UB on overflow).
#include <algorithm>
#include <charconv>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ktune/cache/json.hpp"
#include "utf8.hpp"

namespace ktune::cache {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : t_(text) {}

  Json document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != t_.size()) fail("end of input after the top-level value");
    return v;
  }

 private:
  bool at_end() const { return pos_ >= t_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(t_[pos_]); }

  std::string found() const {
    if (at_end()) return "end of input";
    unsigned char c = peek();
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }

  // Every error says where (line:column of the offending byte), what was expected there and what was found.
  [[noreturn]] void fail(const std::string& expected, const std::string& note = {}) const {
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string msg = "JSON parse error at " + std::to_string(line) + ":" + std::to_string(column) +
                      ": expected " + expected + ", found " + found();
    if (!note.empty()) msg += " (" + note + ")";
    throw JsonError(msg, line, column);
  }

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  Json value(int depth) {
    if (at_end()) fail("a value");
    switch (peek()) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return Json(string());
      case 't': literal("true"); return Json(true);
      case 'f': literal("false"); return Json(false);
      case 'n': literal("null"); return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        fail("a value (object, array, string, number, true, false or null)");
    }
  }

  void check_depth(int depth) const {
    if (depth > Json::kMaxDepth)
      fail("at most " + std::to_string(Json::kMaxDepth) + " levels of nesting", "input nested too deeply");
  }

  Json object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json result = Json::object();
    auto& members = std::get<Json::Object>(result.v_);
    std::unordered_set<std::string> seen;  // keeps the duplicate-key check linear
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return result;
    }
    for (;;) {
      if (at_end() || peek() != '"') fail(members.empty() ? "a string key or '}'" : "a string key");
      const size_t key_at = pos_;
      std::string key = string();
      // A repeated key is refused, not resolved: which of two values was meant is the writer's to say (in a
      // preset, a second "head_dim" would otherwise tune another kernel without a word).
      if (!seen.insert(key).second) {
        pos_ = key_at;  // the error points at the repeat
        fail("a key not given before in this object", "\"" + key + "\" repeats");
      }
      skip_ws();
      if (at_end() || peek() != ':') fail("':' after an object key");
      ++pos_;
      skip_ws();
      Json v = value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) fail("',' or '}' after an object member");
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return result;
      }
      fail("',' or '}' after an object member");
    }
  }

  Json array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json result = Json::array();
    auto& items = std::get<Json::Array>(result.v_);
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return result;
    }
    for (;;) {
      items.push_back(value(depth));
      skip_ws();
      if (at_end()) fail("',' or ']' after an array element");
      if (peek() == ',') {
        ++pos_;
        skip_ws();
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return result;
      }
      fail("',' or ']' after an array element");
    }
  }

  void literal(std::string_view word) {
    for (char c : word) {
      if (at_end() || peek() != static_cast<unsigned char>(c)) fail("'" + std::string(word) + "'");
      ++pos_;
    }
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      if (at_end()) fail("4 hex digits after \\u");
      unsigned char c = peek();
      unsigned d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail("4 hex digits after \\u");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  void escape(std::string& out) {
    ++pos_;  // '\'
    if (at_end()) fail("an escape character after '\\'");
    unsigned char c = peek();
    switch (c) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        ++pos_;
        unsigned cp = hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          pos_ -= 4;
          fail("a high surrogate before a low surrogate", "lone UTF-16 low surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (t_.substr(pos_, 2) != "\\u") fail("'\\u' and a low surrogate after a high surrogate");
          pos_ += 2;
          unsigned lo = hex4();
          if (lo < 0xDC00 || lo > 0xDFFF) {
            pos_ -= 4;
            fail("a low surrogate \\uDC00-\\uDFFF after a high surrogate");
          }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        append_utf8(out, cp);
        return;  // hex4 already advanced
      }
      default: fail("one of \" \\ / b f n r t u after '\\'");
    }
    ++pos_;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) fail("'\"' to close the string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        fail("a string character or '\"'", "control characters must be escaped");
      } else if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        ++pos_;
      } else {
        size_t len = utf8_sequence_length(t_, pos_);
        if (len == 0) fail("valid UTF-8 in a string");
        out.append(t_.data() + pos_, len);
        pos_ += len;
      }
    }
  }

  bool digit() const { return !at_end() && peek() >= '0' && peek() <= '9'; }

  Json number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!digit()) fail("a digit");
    if (peek() == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    bool integral = true;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (!digit()) fail("a digit after '.'");
      while (digit()) ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) fail("a digit in the exponent");
      while (digit()) ++pos_;
    }
    const char* first = t_.data() + start;
    const char* last = t_.data() + pos_;
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) return Json(i);
    }
    double d = 0;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      if (decimal_magnitude(start) > 0) {
        pos_ = start;
        fail("a number within the range of a double");
      }
      d = (*first == '-') ? -0.0 : 0.0;  // underflow rounds to zero
    } else if (r.ec != std::errc() || r.ptr != last) {
      pos_ = start;
      fail("a number");
    }
    return Json(d);
  }

  // Rough base-10 exponent of the (already validated) number text at [start, pos_): only its sign matters,
  // to tell overflow from underflow when from_chars reports the value out of range.
  long decimal_magnitude(size_t start) const {
    size_t i = start;
    if (t_[i] == '-') ++i;
    long mag = 0;
    bool seen_nonzero = false;
    for (; i < pos_ && t_[i] >= '0' && t_[i] <= '9'; ++i) {
      if (t_[i] != '0') seen_nonzero = true;
      if (seen_nonzero) ++mag;
    }
    if (i < pos_ && t_[i] == '.') {
      for (++i; i < pos_ && t_[i] >= '0' && t_[i] <= '9'; ++i) {
        if (seen_nonzero) continue;
        if (t_[i] == '0') --mag;
        else seen_nonzero = true;
      }
    }
    if (i < pos_ && (t_[i] == 'e' || t_[i] == 'E')) {
      ++i;
      bool neg = false;
      if (t_[i] == '+' || t_[i] == '-') neg = t_[i++] == '-';
      long e = 0;
      for (; i < pos_; ++i) e = std::min(e * 10 + (t_[i] - '0'), 1L << 40);  // saturate, never overflow
      mag += neg ? -e : e;
    }
    return mag;
  }

  std::string_view t_;
  size_t pos_ = 0;
};

Json Json::parse(std::string_view text) { return JsonParser(text).document(); }

}  // namespace ktune::cache
