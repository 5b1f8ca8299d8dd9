// The CLI's --json builder (tools/ktune/json_writer.*) writes through the library's JSON value: the same
// one-line text as the CLI always printed (", " and ": " separators, 6 significant digits for timings), and a
// value that is not JSON is refused instead of printed.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "ktune/cache/json.hpp"
#include "tools/ktune/json_writer.hpp"

using ktune::cli::json_array;
using ktune::cli::json_quote;
using ktune::cli::JsonObject;

TEST_CASE("cli json: objects, arrays and numbers print as the CLI's one-line format", "[cli][json]") {
  const std::string inner = JsonObject().str("name", "a/b").boolean("compiled", true).real("compile_ms", 1234.56789).dump();
  CHECK(inner == R"({"name": "a/b", "compiled": true, "compile_ms": 1234.57})");
  const std::string out = JsonObject()
                              .num("count", 2)
                              .raw("kernels", json_array({inner, JsonObject().num("n", -3).dump()}))
                              .real("ratio", 0.5)
                              .real("nan", std::nan(""))
                              .real("inf", std::numeric_limits<double>::infinity())
                              .raw("empty", json_array({}))
                              .dump();
  CHECK(out == R"({"count": 2, "kernels": [{"name": "a/b", "compiled": true, "compile_ms": 1234.57}, {"n": -3}], )"
               R"("ratio": 0.5, "nan": null, "inf": null, "empty": []})");
  CHECK(JsonObject().dump() == "{}");
  CHECK(JsonObject().num("big", 9007199254740993LL).dump() == R"({"big": 9007199254740993})");
}

TEST_CASE("cli json: strings are escaped and stay valid JSON", "[cli][json]") {
  CHECK(json_quote("a\"b\\c\n\t\x01") == R"("a\"b\\c\n\t\u0001")");
  const std::string s = JsonObject().str("k\"ey", "caf\xc3\xa9 \xff").dump();
  CHECK(s == "{\"k\\\"ey\": \"caf\xc3\xa9 \\ufffd\"}");  // malformed UTF-8 replaced, valid UTF-8 kept
  CHECK_NOTHROW(ktune::cache::Json::parse(s));
}

TEST_CASE("cli json: a raw value that is not JSON is refused", "[cli][json]") {
  CHECK_THROWS_AS(JsonObject().raw("x", "{not json"), ktune::cache::JsonError);
  CHECK_THROWS_AS(json_array({"1", "[2"}), ktune::cache::JsonError);
}
