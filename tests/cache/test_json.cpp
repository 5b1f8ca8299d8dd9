#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "ktune/cache/json.hpp"

using ktune::cache::Json;
using ktune::cache::JsonError;

namespace {

std::string parse_error(std::string_view text) {
  try {
    Json::parse(text);
  } catch (const JsonError& e) {
    return e.what();
  }
  return "(parsed without error)";
}

}  // namespace

TEST_CASE("json round trip keeps values and member order", "[cache][json]") {
  const std::string text = R"({
    "zeta": 1, "alpha": [true, false, null, -0.5, 1e3, "x"],
    "nested": {"b": {"c": []}, "a": {}},
    "text": "quote\" backslash\\ slash\/ tab\t nl\n ctl\u0001 é 中 \ud83d\ude00",
    "big": 9007199254740993, "min": -9223372036854775808, "huge": 18446744073709551616
  })";
  Json j = Json::parse(text);
  REQUIRE(j.is_object());
  CHECK(j.members()[0].first == "zeta");
  CHECK(j.members()[1].first == "alpha");
  CHECK(j.at("text").as_string() == "quote\" backslash\\ slash/ tab\t nl\n ctl\x01 é 中 \xF0\x9F\x98\x80");
  CHECK(j.at("big").as_int() == 9007199254740993LL);
  CHECK(j.at("min").as_int() == std::numeric_limits<int64_t>::min());
  CHECK_FALSE(j.at("huge").is_int());
  CHECK(j.at("huge").as_number() == 18446744073709551616.0);
  CHECK(j.at("alpha").at(4).as_int() == 1000);

  for (int indent : {-1, 0, 2}) {
    const std::string out = j.dump(indent);
    Json back = Json::parse(out);
    CHECK(back == j);
    CHECK(back.dump(indent) == out);
    CHECK(back.at("big").as_int() == 9007199254740993LL);
  }
  CHECK(j.dump().find("\"zeta\":1,\"alpha\":[true,false,null,-0.5,1000,\"x\"]") != std::string::npos);
  CHECK(j.dump().find("\\u0001") != std::string::npos);
  CHECK(j.dump().find("中") != std::string::npos);  // UTF-8 passes through
}

TEST_CASE("json doubles round trip exactly", "[cache][json]") {
  for (double d : {0.1, 1.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, -2.5e-7, 123456.789}) {
    Json back = Json::parse(Json(d).dump());
    CHECK(back.as_number() == d);
  }
  CHECK(Json::parse("1e-400").as_number() == 0.0);
  CHECK(std::signbit(Json::parse("-1e-400").as_number()));
  CHECK(Json(std::numeric_limits<double>::quiet_NaN()).dump() == "null");
  CHECK(Json(std::numeric_limits<double>::infinity()).dump() == "null");
  CHECK_THROWS_WITH(Json::parse("1e400"), Catch::Contains("range of a double"));
  CHECK(Json(std::numeric_limits<uint64_t>::max()).as_number() == 18446744073709551615.0);
  CHECK_THROWS_AS(Json(0.5).as_int(), JsonError);
  CHECK(Json(3.0).as_int() == 3);
}

TEST_CASE("json parse errors give line:column and what was expected", "[cache][json]") {
  try {
    Json::parse("{\n  \"a\": 1,\n  \"b\" 2\n}");
    FAIL("expected a JsonError");
  } catch (const JsonError& e) {
    CHECK(e.line() == 3);
    CHECK(e.column() == 7);
    CHECK_THAT(e.what(), Catch::Contains("3:7") && Catch::Contains("expected ':'") && Catch::Contains("'2'"));
  }
  CHECK_THAT(parse_error("[1, 2,]"), Catch::Contains("1:7") && Catch::Contains("expected a value"));
  CHECK_THAT(parse_error("{\"a\":1,}"), Catch::Contains("1:8") && Catch::Contains("expected a string key"));
  CHECK_THAT(parse_error(""), Catch::Contains("1:1") && Catch::Contains("end of input"));
  CHECK_THAT(parse_error("01"), Catch::Contains("1:2") && Catch::Contains("end of input after"));
  CHECK_THAT(parse_error("1."), Catch::Contains("digit after '.'"));
  CHECK_THAT(parse_error("-"), Catch::Contains("a digit"));
  CHECK_THAT(parse_error("\"abc"), Catch::Contains("1:5") && Catch::Contains("close the string"));
  CHECK_THAT(parse_error("\"a\nb\""), Catch::Contains("control characters must be escaped"));
  CHECK_THAT(parse_error("\"\\x\""), Catch::Contains("after '\\'"));
  CHECK_THAT(parse_error("\"\\udc00\""), Catch::Contains("surrogate"));
  CHECK_THAT(parse_error("\"\\ud800x\""), Catch::Contains("low surrogate"));
  CHECK_THAT(parse_error("\"\xC3\x28\""), Catch::Contains("valid UTF-8") && Catch::Contains("0xc3"));
  CHECK_THAT(parse_error("\"\xED\xA0\x80\""), Catch::Contains("valid UTF-8"));  // encoded surrogate
  CHECK_THAT(parse_error("\"\xC0\xAF\""), Catch::Contains("valid UTF-8"));      // overlong
  CHECK_THAT(parse_error("nul"), Catch::Contains("expected 'null'"));
  CHECK_THAT(parse_error("true false"), Catch::Contains("1:6"));
  CHECK_THAT(parse_error("\x01"), Catch::Contains("byte 0x01"));
}

TEST_CASE("json nesting deeper than the limit is rejected, not a stack overflow", "[cache][json]") {
  const int limit = Json::kMaxDepth;
  std::string ok = std::string(static_cast<size_t>(limit), '[') + std::string(static_cast<size_t>(limit), ']');
  CHECK(Json::parse(ok).is_array());
  std::string too_deep = "[" + ok + "]";
  CHECK_THAT(parse_error(too_deep), Catch::Contains("nested too deeply"));
  CHECK_THAT(parse_error(std::string(1000000, '[')), Catch::Contains("nested too deeply"));
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  CHECK_THAT(parse_error(objects), Catch::Contains("nested too deeply"));
}

TEST_CASE("json accessors and builders", "[cache][json]") {
  Json j = Json::object();
  j.set("name", "xqa").set("count", 3).set("ratio", 0.25).set("on", true).set("list", Json::array());
  j.at("list").push(1).push("two").push(Json());
  j.set("count", 4);  // replaces in place
  CHECK(j.members()[1].first == "count");
  CHECK(j.size() == 5);
  CHECK(j.get_int("count", 0) == 4);
  CHECK(j.get_int("missing", 7) == 7);
  CHECK(j.get_string("name") == "xqa");
  CHECK(j.get_string("nope", "dflt") == "dflt");
  CHECK(j.get_bool("on", false));
  CHECK(j.get_number("ratio", 0) == 0.25);
  CHECK(j.contains("list"));
  CHECK_FALSE(j.contains("List"));
  CHECK_THROWS_WITH(j.at("missing_key"), Catch::Contains("missing key 'missing_key'"));
  CHECK_THROWS_WITH(j.get_int("name", 0), Catch::Contains("'name'") && Catch::Contains("string"));
  CHECK_THROWS_AS(j.at("list").at(3), JsonError);
  CHECK_THROWS_AS(Json(1).push(2), JsonError);
  CHECK_THROWS_AS(Json("s").at("k"), JsonError);

  int n = 0;
  for (const auto& item : j.at("list").items()) n += item.is_null() ? 100 : 1;
  CHECK(n == 102);
  std::string keys;
  for (const auto& [k, v] : j.members()) keys += k + ",";
  CHECK(keys == "name,count,ratio,on,list,");
  CHECK(j.dump() == R"({"name":"xqa","count":4,"ratio":0.25,"on":true,"list":[1,"two",null]})");
  CHECK(Json::parse(j.dump(2)) == j);

  // A repeated key is an error naming it, at the repeat, in nested objects too.
  CHECK_THROWS_WITH(Json::parse(R"({"a":1,"b":2,"a":3})"),
                    Catch::Contains("1:14: expected a key not given before in this object") && Catch::Contains("\"a\" repeats"));
  CHECK_THROWS_WITH(Json::parse(R"({"o":{"k":1,"k":1}})"), Catch::Contains("\"k\" repeats"));
  CHECK(Json::parse(R"({"o":{"k":1},"p":{"k":1}})").size() == 2);  // the same key in two objects is fine
  // Object equality ignores member order.
  CHECK(Json::parse(R"({"x":1,"y":[2]})") == Json::parse(R"({"y":[2],"x":1})"));
  CHECK(Json::parse(R"({"x":1})") != Json::parse(R"({"x":2})"));
}

TEST_CASE("json dump always produces valid JSON", "[cache][json]") {
  Json s(std::string("ctl\x01\x1f del\x7f bad\xFF\xC3 ok\xC3\xA9 \"q\""));
  const std::string out = s.dump();
  CHECK(out == "\"ctl\\u0001\\u001f del\x7f bad\\ufffd\\ufffd ok\xC3\xA9 \\\"q\\\"\"");
  CHECK(Json::parse(out).is_string());
  CHECK(Json::object().dump(2) == "{}");
  CHECK(Json::array().dump(2) == "[]");
}

TEST_CASE("json parse of random garbage never crashes", "[cache][json]") {
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[]:,\"\\ 0123456789.eE+-truefalsnul\n\tu";
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s(rng() % 48, '\0');
    const bool json_like = iter % 4 != 0;
    for (auto& c : s) c = json_like ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() & 0xff);
    // Also mutate valid documents, which reaches deeper into the parser than pure noise.
    if (iter % 3 == 0) {
      s = R"({"a":[1,2.5e3,"x\u00e9",{"b":null}],"c":true})";
      for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng() & 0xff);
    }
    try {
      Json j = Json::parse(s);
      ++parsed;
      REQUIRE(Json::parse(j.dump()) == j);
    } catch (const JsonError& e) {
      ++rejected;
      REQUIRE(e.line() >= 1);
      REQUIRE(e.column() >= 1);
    }
  }
  CHECK(parsed > 0);
  CHECK(rejected > 0);
}
