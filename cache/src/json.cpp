// Json value access, builders and dump(). The parser lives in json_parse.cpp.
#include <charconv>
#include <cmath>

#include "ktune/cache/json.hpp"
#include "utf8.hpp"

namespace ktune::cache {
namespace {

constexpr const char* kTypeNames[] = {"null", "bool", "number", "string", "array", "object"};

// An integral double in [-2^63, 2^63) converts to int64 without undefined behaviour.
bool double_fits_int64(double d) {
  return std::isfinite(d) && d == std::trunc(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
}

void dump_string(std::string& out, const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t len = utf8_sequence_length(s, i);
      if (len == 0) {
        out += "\\ufffd";  // malformed UTF-8 put in by a builder: keep the output valid JSON
        ++i;
      } else {
        out.append(s, i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
}

}  // namespace

Json Json::object() {
  Json j;
  j.v_ = Object{};
  return j;
}

Json Json::array() {
  Json j;
  j.v_ = Array{};
  return j;
}

const char* Json::type_name() const { return kTypeNames[v_.index()]; }

void Json::type_mismatch(const char* wanted) const {
  throw JsonError(std::string("JSON: expected ") + wanted + ", found " + type_name());
}

bool Json::is_int() const {
  const auto* n = std::get_if<Number>(&v_);
  return n && (n->exact || double_fits_int64(n->d));
}

bool Json::as_bool() const {
  if (const auto* b = std::get_if<bool>(&v_)) return *b;
  type_mismatch("a bool");
}

double Json::as_number() const {
  if (const auto* n = std::get_if<Number>(&v_)) return n->d;
  type_mismatch("a number");
}

int64_t Json::as_int() const {
  const auto* n = std::get_if<Number>(&v_);
  if (!n) type_mismatch("an integer");
  if (n->exact) return n->i;
  if (!double_fits_int64(n->d)) throw JsonError("JSON: expected an integer, found a number that is not an int64");
  return static_cast<int64_t>(n->d);
}

const std::string& Json::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v_)) return *s;
  type_mismatch("a string");
}

const Json::Array& Json::items() const {
  if (const auto* a = std::get_if<Array>(&v_)) return *a;
  type_mismatch("an array");
}

const Json::Object& Json::members() const {
  if (const auto* o = std::get_if<Object>(&v_)) return *o;
  type_mismatch("an object");
}

size_t Json::size() const {
  if (const auto* a = std::get_if<Array>(&v_)) return a->size();
  if (const auto* o = std::get_if<Object>(&v_)) return o->size();
  return 0;
}

const Json* Json::find(std::string_view key) const {
  const auto* o = std::get_if<Object>(&v_);
  if (!o) return nullptr;
  for (const auto& m : *o)
    if (m.first == key) return &m.second;
  return nullptr;
}

const Json& Json::member_or_throw(std::string_view key) const {
  if (!is_object()) throw JsonError("JSON: cannot look up key '" + std::string(key) + "' in a " + type_name());
  const Json* j = find(key);
  if (!j) throw JsonError("JSON: missing key '" + std::string(key) + "'");
  return *j;
}

const Json& Json::at(std::string_view key) const { return member_or_throw(key); }
Json& Json::at(std::string_view key) { return const_cast<Json&>(member_or_throw(key)); }

const Json& Json::at(size_t index) const {
  const Array& a = items();
  if (index >= a.size())
    throw JsonError("JSON: index " + std::to_string(index) + " out of range for an array of " +
                    std::to_string(a.size()));
  return a[index];
}

namespace {
// Wraps a typed accessor so its error names the key it was reading.
template <class F>
auto keyed(std::string_view key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const JsonError& e) {
    throw JsonError("JSON key '" + std::string(key) + "': " + e.what());
  }
}
}  // namespace

int64_t Json::get_int(std::string_view key, int64_t def) const {
  const Json* j = is_object() ? find(key) : &member_or_throw(key);
  return j ? keyed(key, [&] { return j->as_int(); }) : def;
}

double Json::get_number(std::string_view key, double def) const {
  const Json* j = is_object() ? find(key) : &member_or_throw(key);
  return j ? keyed(key, [&] { return j->as_number(); }) : def;
}

bool Json::get_bool(std::string_view key, bool def) const {
  const Json* j = is_object() ? find(key) : &member_or_throw(key);
  return j ? keyed(key, [&] { return j->as_bool(); }) : def;
}

std::string Json::get_string(std::string_view key, const std::string& def) const {
  const Json* j = is_object() ? find(key) : &member_or_throw(key);
  return j ? keyed(key, [&] { return j->as_string(); }) : def;
}

Json& Json::set(std::string key, Json value) {
  if (is_null()) v_ = Object{};
  auto* o = std::get_if<Object>(&v_);
  if (!o) throw JsonError(std::string("JSON: set('") + key + "') on a " + type_name());
  for (auto& m : *o) {
    if (m.first == key) {
      m.second = std::move(value);
      return *this;
    }
  }
  o->emplace_back(std::move(key), std::move(value));
  return *this;
}

Json& Json::push(Json value) {
  if (is_null()) v_ = Array{};
  auto* a = std::get_if<Array>(&v_);
  if (!a) throw JsonError(std::string("JSON: push() on a ") + type_name());
  a->push_back(std::move(value));
  return *this;
}

bool operator==(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Json::Type::null: return true;
    case Json::Type::boolean: return std::get<bool>(a.v_) == std::get<bool>(b.v_);
    case Json::Type::number: {
      const auto& x = std::get<Json::Number>(a.v_);
      const auto& y = std::get<Json::Number>(b.v_);
      if (x.exact && y.exact) return x.i == y.i;
      return x.d == y.d;
    }
    case Json::Type::string: return std::get<std::string>(a.v_) == std::get<std::string>(b.v_);
    case Json::Type::array: return std::get<Json::Array>(a.v_) == std::get<Json::Array>(b.v_);
    case Json::Type::object: {
      const auto& x = std::get<Json::Object>(a.v_);
      const auto& y = std::get<Json::Object>(b.v_);
      if (x.size() != y.size()) return false;
      for (const auto& m : x) {
        const Json* other = b.find(m.first);
        if (!other || !(*other == m.second)) return false;
      }
      return true;
    }
  }
  return false;
}

namespace {

void dump_value(std::string& out, const Json& j, int indent, int level) {
  switch (j.type()) {
    case Json::Type::null: out += "null"; return;
    case Json::Type::boolean: out += j.as_bool() ? "true" : "false"; return;
    case Json::Type::number: {
      char buf[64];
      std::to_chars_result r{};
      double d = j.as_number();
      if (j.is_int()) {
        r = std::to_chars(buf, buf + sizeof buf, j.as_int());  // exact, including beyond 2^53
      } else if (std::isfinite(d)) {
        r = std::to_chars(buf, buf + sizeof buf, d);  // shortest text that reads back to the same double
      } else {
        out += "null";
        return;
      }
      out.append(buf, r.ptr);
      return;
    }
    case Json::Type::string: dump_string(out, j.as_string()); return;
    case Json::Type::array: {
      const auto& a = j.items();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += indent == Json::kOneLine ? ", " : ",";
        newline(out, indent, level + 1);
        dump_value(out, a[i], indent, level + 1);
      }
      newline(out, indent, level);
      out.push_back(']');
      return;
    }
    case Json::Type::object: {
      const auto& o = j.members();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += indent == Json::kOneLine ? ", " : ",";
        newline(out, indent, level + 1);
        dump_string(out, o[i].first);
        out += indent >= 0 || indent == Json::kOneLine ? ": " : ":";
        dump_value(out, o[i].second, indent, level + 1);
      }
      newline(out, indent, level);
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

}  // namespace ktune::cache
