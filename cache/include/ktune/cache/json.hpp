// A small JSON value: null, bool, number, string, array, object (members keep their insertion order).
//
// Numbers are doubles; an integer literal that fits in int64 is also kept exactly (as_int() returns it bit for
// bit, e.g. 9007199254740993). Strings are UTF-8: parse() rejects malformed UTF-8 and lone surrogates; dump()
// writes non-ASCII text through unchanged, escapes control characters, and replaces any malformed UTF-8 that
// was put into a string by hand with U+FFFD so its output is always valid JSON. Non-finite numbers dump as null.
//
// parse() accepts any byte string without undefined behaviour: nesting is limited to kMaxDepth, and every
// failure is a JsonError carrying the 1-based line and column (in bytes) and what was expected there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace ktune::cache {

class JsonError : public std::runtime_error {
 public:
  explicit JsonError(const std::string& what, int line = 0, int column = 0)
      : std::runtime_error(what), line_(line), column_(column) {}
  int line() const { return line_; }      // 0 unless the error came from parse()
  int column() const { return column_; }  // byte column, 1-based

 private:
  int line_, column_;
};

class Json {
 public:
  enum class Type { null, boolean, number, string, array, object };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;
  static constexpr int kMaxDepth = 256;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : v_(b) {}
  Json(double d) : v_(Number{d, 0, false}) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json(T i) : v_(from_integer(i)) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(std::string_view s) : v_(std::string(s)) {}

  static Json object();
  static Json array();
  static Json parse(std::string_view text);  // throws JsonError
  // indent -1 (kCompact): one line, no spaces. kOneLine: one line with ", " and ": " between items (the CLI's
  // --json output, easy to read and to grep). indent >= 0: one member per line, nested by that many spaces.
  static constexpr int kCompact = -1;
  static constexpr int kOneLine = -2;
  std::string dump(int indent = kCompact) const;

  Type type() const { return static_cast<Type>(v_.index()); }
  const char* type_name() const;  // "null", "bool", "number", "string", "array", "object"
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_number() const { return type() == Type::number; }
  bool is_int() const;  // a number that is an exact int64 (integer literal, or integral double in range)
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  // Typed access; each throws JsonError naming the expected and the actual type.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // also rejects fractional or out-of-range numbers
  const std::string& as_string() const;
  const Array& items() const;    // array elements, for range-for
  const Object& members() const; // object members in insertion order, for range-for
  size_t size() const;           // elements or members; 0 for scalars

  // Object access. at() throws JsonError naming the missing key; find() returns nullptr instead.
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  Json& at(std::string_view key);
  const Json& at(size_t index) const;  // array access, throws when out of range
  // Return the default when the key is missing; throw JsonError when it is present with the wrong type.
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_number(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  std::string get_string(std::string_view key, const std::string& def = {}) const;

  // Builders. A null value becomes an object (set) or an array (push); other types throw JsonError.
  // set() replaces an existing key's value in place, so the member keeps its position.
  Json& set(std::string key, Json value);
  Json& push(Json value);

  friend bool operator==(const Json& a, const Json& b);  // objects compare regardless of member order
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

 private:
  struct Number {
    double d = 0;
    int64_t i = 0;
    bool exact = false;  // i holds the value exactly
  };
  template <class T>
  static Number from_integer(T v) {
    if constexpr (std::is_signed_v<T> || sizeof(T) < sizeof(int64_t)) {
      return Number{static_cast<double>(v), static_cast<int64_t>(v), true};
    } else {
      if (v <= static_cast<T>(std::numeric_limits<int64_t>::max())) return Number{static_cast<double>(v), static_cast<int64_t>(v), true};
      return Number{static_cast<double>(v), 0, false};
    }
  }
  const Json& member_or_throw(std::string_view key) const;
  [[noreturn]] void type_mismatch(const char* wanted) const;
  friend class JsonParser;

  std::variant<std::nullptr_t, bool, Number, std::string, Array, Object> v_;
};

}  // namespace ktune::cache
