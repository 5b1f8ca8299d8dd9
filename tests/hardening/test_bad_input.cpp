// Bad input at every API entry point that takes a problem: the family interface (every FamilyInfo function of
// every family), the C API, xqa::Problem/Config::from_key, Arch::parse and preset JSON. Each bad value must
// give ktune::Error(invalid_argument or not_found) whose message names the field — never another exception
// type, a crash, or a silently different problem. (xqa launch-argument validation has its own tests in
// tests/xqa/.)
#include <catch2/catch.hpp>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "autotune/presets.hpp"
#include "ktune/arch.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "support/temp_dir.hpp"
#include "templates/xqa_decode/spec.hpp"

using namespace ktune;

namespace {

// Runs f; returns the ktune::Error message (checking its status), or fails on success / a foreign exception.
template <class F>
std::string error_of(F&& f, Status expected = Status::invalid_argument) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.status() == expected);
    return e.what();
  } catch (const std::exception& e) {
    FAIL("a foreign exception escaped: " << typeid(e).name() << ": " << e.what());
  }
  FAIL("no error");
  return {};
}

const char* const kKey = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal";
const char* const kJson =
    R"({"head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"max_q_len":4,"mask":"causal"})";

std::string with(const std::string& field, const std::string& value) {
  // kJson with one member replaced (or added).
  std::string j = kJson;
  const std::string key = "\"" + field + "\":";
  size_t at = j.find(key);
  if (at == std::string::npos) return j.substr(0, j.size() - 1) + "," + key + value + "}";
  size_t end = at + key.size();
  int depth = 0;
  while (end < j.size() && !(depth == 0 && (j[end] == ',' || j[end] == '}'))) {
    if (j[end] == '[' || j[end] == '{') ++depth;
    if (j[end] == ']' || j[end] == '}') --depth;
    ++end;
  }
  return j.substr(0, at) + key + value + j.substr(end);
}

}  // namespace

TEST_CASE("bad input: every family's problem_from_json names the field", "[hardening][badinput]") {
  const FamilyInfo& f = family("xqa_decode");
  REQUIRE(f.problem_from_json(kJson) == kKey);
  struct Case {
    std::string json, field;
  } cases[] = {
      {"", "problem JSON"},
      {"{", "problem JSON"},
      {"[]", "expected an object"},
      {"null", "expected an object"},
      {"\"d128\"", "expected an object"},
      {with("head_dim", "96"), "head_dim"},
      {with("head_dim", "\"128\""), "head_dim"},
      {with("head_dim", "128.5"), "head_dim"},
      {with("head_dim", "-128"), "head_dim"},
      {with("head_dim", "null"), "head_dim"},
      {with("head_dim", "4294967424"), "head_dim"},  // 2^32 + 128: must not wrap to 128
      {with("head_dim", "1e300"), "head_dim"},
      {with("num_q_heads", "0"), "num_q_heads"},
      {with("num_q_heads", "30"), "num_q_heads"},
      {with("num_q_heads", "4294967328"), "num_q_heads"},  // 2^32 + 32
      {with("num_kv_heads", "0"), "num_kv_heads"},
      {with("num_kv_heads", "-8"), "num_kv_heads"},
      {with("num_kv_heads", "2147483648"), "num_kv_heads"},
      {with("page_size", "48"), "page_size"},
      {with("page_size", "0"), "page_size"},
      {with("page_size", "[]"), "page_size"},
      {with("page_size", "4294967328"), "page_size"},
      {with("layout", "\"xyz\""), "layout"},
      {with("layout", "1"), "layout"},
      {with("q_dtype", "\"int8\""), "q_dtype"},
      {with("q_dtype", "\"fp16\""), "q_dtype"},  // fp16 Q with bf16 KV
      {with("kv_dtype", "\"fp4\""), "kv_dtype"},
      {with("out_dtype", "\"f32\""), "out_dtype"},
      {with("max_q_len", "0"), "max_q_len"},
      {with("max_q_len", "65"), "max_q_len"},
      {with("max_q_len", "4294967297"), "max_q_len"},  // 2^32 + 1
      {with("mask", "\"bogus\""), "mask"},
      {with("mask", "\"none\""), "mask"},  // none with max_q_len 4
      {with("sinks", "\"yes\""), "sinks"},
      {with("sliding_window", "1"), "sliding_window"},
      {with("softcap", "null"), "softcap"},
      {with("lse", "[]"), "lse"},
      {with("typo_field", "1"), "typo_field"},
      {R"({"num_q_heads":32,"num_kv_heads":8})", "head_dim"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    const std::string msg = error_of([&] { f.problem_from_json(c.json); });
    INFO(msg);
    CHECK_THAT(msg, Catch::Contains(c.field));
    CHECK_THAT(msg, Catch::StartsWith("ktune xqa_decode: "));
  }
}

TEST_CASE("bad input: every FamilyInfo function rejects a bad problem or config key", "[hardening][badinput]") {
  for (const FamilyInfo& f : families()) {
    INFO(f.name);
    const Arch arch = Arch::parse("sm_90a");
    for (const std::string& problem : f.example_problems()) CHECK(f.canonical_problem(problem) == problem);
    const std::string good = f.example_problems().front();
    for (const std::string& bad : {std::string(), std::string("garbage"), good + ".", "." + good, good + ".bogus",
                                  std::string(4096, 'd'), std::string("d128\0h32", 8)}) {
      INFO(bad);
      CHECK_THAT(error_of([&] { f.canonical_problem(bad); }), Catch::Contains("key"));
      CHECK_THAT(error_of([&] { f.default_config(bad, arch); }), Catch::Contains("key"));
      CHECK_THAT(error_of([&] { f.search_space(bad, arch, xqa::default_limits(arch)); }), Catch::Contains("key"));
      CHECK_THAT(error_of([&] { f.generate(bad, f.default_config(good, arch), arch); }), Catch::Contains("key"));
    }
    for (const std::string bad_config : {"", "t64", "t64.s3.w4.m0", "t64.s3.w4.", "T64.s3.w4", "t99999999.s3.w4"}) {
      INFO(bad_config);
      CHECK_THAT(error_of([&] { f.generate(good, bad_config, arch); }), Catch::Contains("config key"));
    }
    // Limits of a device that can run nothing: an empty search space, not an error or a crash.
    DeviceLimits none;
    none.max_smem_per_block_optin = 0;
    none.max_threads_per_block = 0;
    CHECK(f.search_space(good, arch, none).empty());
    CHECK(f.description.size() > 0);
  }
  CHECK_THAT(error_of([] { family("no_such_family"); }, Status::not_found),
             Catch::Contains("no_such_family") && Catch::Contains("xqa_decode"));
}

TEST_CASE("bad input: Problem::from_key never throws anything but a field-naming Error", "[hardening][badinput]") {
  // Every single-character substitution, deletion and insertion of a valid key: it parses to exactly the
  // text given (a valid key), or it is an Error naming the key; never a foreign exception (stoi overflow...).
  const std::string key = std::string(kKey) + ".sink.win";
  REQUIRE(xqa::Problem::from_key(key).key() == key);
  const std::string alphabet = "0123456789.-adhkvpqnbfecmusilwtx \xff";
  int parsed = 0, rejected = 0;
  auto probe = [&](const std::string& s) {
    try {
      xqa::Problem p = xqa::Problem::from_key(s);
      CHECK(p.key() == s);
      ++parsed;
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("key:") || Catch::Contains(": expected"));
      ++rejected;
    }
  };
  for (size_t i = 0; i <= key.size(); ++i) {
    if (i < key.size()) probe(key.substr(0, i) + key.substr(i + 1));
    for (char c : alphabet) {
      if (i < key.size()) probe(key.substr(0, i) + c + key.substr(i + 1));
      probe(key.substr(0, i) + c + key.substr(i));
    }
  }
  for (const std::string& s : {std::string("d99999999999999999999.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal"),
                               std::string("d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal.sink.win.cap.lse.lse"),
                               std::string("d128.h0.kv0.p32.hnd.bf16-bf16-bf16.q4.causal"),
                               std::string("d128.h2147483647.kv1.p32.hnd.bf16-bf16-bf16.q4.causal"),
                               std::string(100000, '.')})
    probe(s);
  CHECK(parsed > 0);
  CHECK(rejected > 1000);
  WARN("Problem::from_key: " << parsed + rejected << " mutated keys: " << parsed << " valid, " << rejected
                             << " rejected with a field-naming error");
}

TEST_CASE("bad input: Config::from_key and Arch::parse name what is wrong", "[hardening][badinput]") {
  for (const char* bad : {"", ".", "t.s.w", "t64.s3.w4.m", "t64.s3.w4.m-1", "t0064.s3.w4", "t64,s3,w4",
                          "t9999999.s3.w4", "t64.s3.w4.m2.m2"}) {
    INFO(bad);
    CHECK_THAT(error_of([&] { xqa::Config::from_key(bad); }), Catch::Contains("config key"));
  }
  for (const char* bad : {"", "sm", "sm_", "sm_9", "sm_9000", "sm_90b", "sm_90aa", "SM_90", "sm_60", "sm_-90",
                          "sm_99999999999999999999", "host ", " sm_90"}) {
    INFO(bad);
    CHECK_THAT(error_of([&] { Arch::parse(bad); }), Catch::Contains("is not an arch"));
  }
}

TEST_CASE("bad input: the C API turns every bad argument into a status and a message naming it",
          "[hardening][badinput][capi]") {
  test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime_options_default(nullptr);  // no crash
  ktune_runtime_options o;
  ktune_runtime_options_default(&o);
  o.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&o, &rt) == KTUNE_OK);
  struct Case {
    const char *family, *problem, *config, *arch;
    ktune_status status;
    const char* names;
  } cases[] = {
      {nullptr, kKey, nullptr, "sm_90a", KTUNE_ERROR_INVALID_ARGUMENT, "family"},
      {"xqa_decode", nullptr, nullptr, "sm_90a", KTUNE_ERROR_INVALID_ARGUMENT, "problem_key"},
      {"xqa_decode", kKey, nullptr, nullptr, KTUNE_ERROR_INVALID_ARGUMENT, "arch"},
      {"", kKey, nullptr, "sm_90a", KTUNE_ERROR_NOT_FOUND, "unknown family"},
      {"xqa_decode", "", nullptr, "sm_90a", KTUNE_ERROR_INVALID_ARGUMENT, "key"},
      {"xqa_decode", "d96.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.causal", nullptr, "sm_90a", KTUNE_ERROR_INVALID_ARGUMENT,
       "head_dim"},
      {"xqa_decode", kKey, "t64", "sm_90a", KTUNE_ERROR_INVALID_ARGUMENT, "config key"},
      {"xqa_decode", kKey, nullptr, "sm_9z", KTUNE_ERROR_INVALID_ARGUMENT, "arch"},
      {"xqa_decode", kKey, nullptr, "", KTUNE_ERROR_INVALID_ARGUMENT, "arch"},
  };
  for (const Case& c : cases) {
    INFO((c.family ? c.family : "(null)") << " / " << (c.problem ? c.problem : "(null)") << " / "
                                          << (c.config ? c.config : "(null)") << " / " << (c.arch ? c.arch : "(null)"));
    int compiled = 7;
    CHECK(ktune_compile(rt, c.family, c.problem, c.config, c.arch, &compiled) == c.status);
    CHECK_THAT(ktune_last_error(), Catch::Contains(c.names));
    CHECK(compiled == 7);  // untouched on failure
  }
  CHECK(ktune_compile(nullptr, "xqa_decode", kKey, nullptr, "sm_90a", nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("runtime"));
  CHECK(ktune_runtime_stats(nullptr, nullptr) == KTUNE_ERROR_INVALID_ARGUMENT);
  // -1 is KTUNE_HOST_DEVICE (the host CPU); any other negative ordinal is an error (no_driver without a GPU).
  CHECK(ktune_use_device(-2) != KTUNE_OK);
  CHECK(std::string(ktune_last_error()).size() > 0);
  CHECK(ktune_status_name(static_cast<ktune_status>(999)) != nullptr);
  CHECK(ktune_status_name(static_cast<ktune_status>(-1)) != nullptr);
  ktune_runtime_destroy(rt);
  ktune_runtime_destroy(nullptr);

  // A cache path that cannot be a cache: created runtime, error on use or a clear status at creation.
  ktune_runtime_options bad = o;
  bad.cache_path = "";
  ktune_runtime* rt2 = nullptr;
  if (ktune_runtime_create(&bad, &rt2) == KTUNE_OK) ktune_runtime_destroy(rt2);
}

TEST_CASE("bad input: preset JSON mutated value by value gives field-path errors", "[hardening][badinput]") {
  const std::string base =
      R"({"name": "m", "buckets": {"batch": {"min": 1, "max": 64}, "seq_len": {"min": 512, "max": 8192}}, "tp": 2,)"
      R"( "spec_tokens": 1, "ops": [{"label": "attn", "family": "xqa_decode", "problem": {"head_dim": 128,)"
      R"( "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32, "kv_dtype": "fp8"}}]})";
  REQUIRE_NOTHROW(autotune::parse_preset(base, "m.json"));
  const std::vector<std::string> bad_values = {"-1",   "0",    "1.5",  "1e300", "\"x\"", "null",
                                               "[]",   "{}",   "true", "4294967297", "\"\"", "-9223372036854775809"};
  // Every scalar value in the document, by the key that holds it.
  struct Slot {
    std::string key;
    size_t begin, end;
  };
  std::vector<Slot> slots;
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] != ':') continue;
    size_t kq = base.rfind('"', i - 1), ks = base.rfind('"', kq - 1);
    std::string key = base.substr(ks + 1, kq - ks - 1);
    size_t b = i + 1;
    while (base[b] == ' ') ++b;
    if (base[b] == '{' || base[b] == '[') continue;
    size_t e = b;
    if (base[b] == '"') e = base.find('"', b + 1) + 1;
    else
      while (e < base.size() && base[e] != ',' && base[e] != '}' && base[e] != ']') ++e;
    slots.push_back({key, b, e});
  }
  REQUIRE(slots.size() >= 13);
  int errors = 0, accepted = 0;
  for (const Slot& s : slots) {
    for (const std::string& v : bad_values) {
      const std::string doc = base.substr(0, s.begin) + v + base.substr(s.end);
      INFO(doc);
      try {
        autotune::parse_preset(doc, "m.json");
        ++accepted;  // e.g. "tp": 0.0 is not in the list; some replacements are legal values
      } catch (const Error& e) {
        ++errors;
        CHECK(e.status() == Status::invalid_argument);
        CHECK_THAT(e.what(), Catch::Contains("m.json") && Catch::Contains(s.key));
      } catch (const std::exception& e) {
        FAIL("foreign exception: " << e.what());
      }
    }
  }
  CHECK(errors > 100);
  WARN("preset JSON: " << slots.size() * bad_values.size() << " single-value mutations: " << errors
                       << " rejected naming the field, " << accepted << " legal");
}
