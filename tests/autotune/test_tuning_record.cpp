#include <catch2/catch.hpp>

#include "autotune/sweep.hpp"
#include "autotune/tuner.hpp"
#include "autotune/tuning_record.hpp"
#include "fake_timer.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/error.hpp"
#include "support/temp_dir.hpp"

using namespace ktune::autotune;
using ktune::cache::Json;
using ktune_test::FakeTimer;

namespace {

TuningResult sample_result() {
  FakeTimer timer(5);
  timer.script("t64.s2.w4", {1.0});
  timer.script("t64.s3.w4", {0.8});
  FakeTimer::Script broken{0.5};
  broken.launch_fails = true;
  timer.script("t128.s4.w8", broken);
  MeasureOptions o;
  o.iters_per_sample = 1;
  TuningResult t;
  t.family = "xqa_decode";
  t.problem_key = tuning_problem_key("d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none", {{"batch", 64}, {"seq_len", 4096}});
  t.device_fingerprint = "NVIDIA H200|9.0|132|3201000|13000";
  t.candidates = sweep(timer, {"t64.s2.w4", "t128.s4.w8", "t64.s3.w4"},
                       [&](const std::string& c) { return timer.launcher(c); }, o);
  t.noise_fraction = 0.03;
  t.winner = select_winner(t.candidates, t.noise_fraction);
  t.tuned_at = 1764400000;
  return t;
}

// The record with candidates_json edited by `edit`.
ktune::cache::TuningRecord tampered(void (*edit)(Json&)) {
  ktune::cache::TuningRecord r = to_tuning_record(sample_result());
  Json j = Json::parse(r.candidates_json);
  edit(j);
  r.candidates_json = j.dump();
  return r;
}

void expect_damaged(const ktune::cache::TuningRecord& r, const std::string& message) {
  try {
    from_tuning_record(r);
    FAIL("no error; expected " << message);
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::cache_error);
    CHECK_THAT(e.what(), Catch::Contains("tuning row xqa_decode/d128."));
    CHECK_THAT(e.what(), Catch::Contains(message));
  }
}

}  // namespace

TEST_CASE("autotune tuning key: readable, bucket order does not matter", "[autotune]") {
  CHECK(tuning_problem_key("d128.h32.kv8", {{"seq_len", 4096}, {"batch", 64}}) == "d128.h32.kv8|b64.l4096");
  CHECK(tuning_problem_key("d128.h32.kv8", {{"batch", 64}, {"seq_len", 4096}}) == "d128.h32.kv8|b64.l4096");
  CHECK(tuning_problem_key("n5760.k2880", {{"tokens", 16}}) == "n5760.k2880|m16");
  CHECK(tuning_problem_key("n5760.k2880", {}) == "n5760.k2880");
  CHECK_THROWS_WITH(tuning_problem_key("", {}), Catch::Contains("problem_key"));
  CHECK_THROWS_WITH(tuning_problem_key("a|b", {}), Catch::Contains("'|'"));
  CHECK_THROWS_WITH(tuning_problem_key("k", {{"batch", 1}, {"batch", 2}}), Catch::Contains("twice"));
  CHECK_THROWS_WITH(tuning_problem_key("k", {{"batch", 0}}), Catch::Contains("batch: expected a value >= 1, got 0"));
  CHECK_THROWS_WITH(tuning_problem_key("k", {{"Batch7", 1}}), Catch::Contains("Batch7"));
}

TEST_CASE("autotune tuning record: every candidate round-trips through the cache", "[autotune]") {
  TuningResult t = sample_result();
  REQUIRE(t.winner == 2);
  ktune::test::TempDir dir;
  auto db = ktune::cache::CacheDb::open(dir.file("k.db"), {});
  db->put_tuning(to_tuning_record(t));
  auto row = db->get_tuning(t.family, t.problem_key, t.device_fingerprint);
  REQUIRE(row);
  CHECK(row->winner_config == "t64.s3.w4");
  CHECK(row->ktune_version == tuning_ktune_version());
  CHECK(row->tuned_at == 1764400000);
  CHECK_FALSE(db->get_tuning(t.family, t.problem_key, "NVIDIA L40S|8.9|142|9001000|13000"));

  TuningResult back = from_tuning_record(*row);
  CHECK(back.family == t.family);
  CHECK(back.problem_key == "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none|b64.l4096");
  CHECK(back.device_fingerprint == t.device_fingerprint);
  CHECK(back.ktune_version == tuning_ktune_version());
  CHECK(back.winner == t.winner);
  CHECK(back.noise_fraction == t.noise_fraction);
  CHECK(back.tuned_at == t.tuned_at);
  REQUIRE(back.candidates.size() == t.candidates.size());
  for (size_t i = 0; i < t.candidates.size(); ++i) {
    const auto &a = t.candidates[i], &b = back.candidates[i];
    CHECK(a.config == b.config);
    CHECK(a.ok == b.ok);
    CHECK(a.error == b.error);
    CHECK(a.m.median_ms == b.m.median_ms);  // exact: doubles are written in round-trip form
    CHECK(a.m.spread == b.m.spread);
    CHECK(a.m.rounds == b.m.rounds);
    CHECK(a.m.stable == b.m.stable);
    CHECK(a.m.samples_ms == b.m.samples_ms);
  }
  CHECK_FALSE(back.candidates[1].ok);
  CHECK_THAT(back.candidates[1].error, Catch::Contains("launch failed"));
}

TEST_CASE("autotune tuning record: the NVRTC that compiled the candidates is kept, and a different one re-tunes",
          "[autotune]") {
  TuningResult t = sample_result();
  t.compiler_version = "13.0.88";
  ktune::cache::TuningRecord r = to_tuning_record(t);
  CHECK(Json::parse(r.candidates_json).at("compiler_version").as_string() == "13.0.88");
  CHECK(from_tuning_record(r).compiler_version == "13.0.88");

  // Rows written without it (host rows, older builds) read as "not recorded".
  ktune::cache::TuningRecord unrecorded = to_tuning_record(sample_result());
  CHECK_FALSE(Json::parse(unrecorded.candidates_json).contains("compiler_version"));
  CHECK(from_tuning_record(unrecorded).compiler_version.empty());
  expect_damaged(tampered([](Json& j) { j.set("compiler_version", 13); }), "compiler_version: expected a string, got 13");
  expect_damaged(tampered([](Json& j) { j.set("compiler_version", ""); }), "compiler_version: expected a compiler version");

  // warmup measures a key again only when both versions are known and differ
  CHECK(tuned_by_another_compiler("13.0.88", "13.1.80"));
  CHECK_FALSE(tuned_by_another_compiler("13.0.88", "13.0.88"));
  CHECK_FALSE(tuned_by_another_compiler("", "13.1.80"));  // not recorded: kept
  CHECK_FALSE(tuned_by_another_compiler("13.0.88", ""));  // no NVRTC here: nothing to compare with
}

TEST_CASE("autotune tuning record: a damaged or hand-edited row is a clear error", "[autotune]") {
  ktune::cache::TuningRecord good = to_tuning_record(sample_result());
  REQUIRE_NOTHROW(from_tuning_record(good));

  auto truncated = good;
  truncated.candidates_json.resize(truncated.candidates_json.size() / 2);
  expect_damaged(truncated, "candidates_json: expected JSON");

  auto winner_column = good;
  winner_column.winner_config = "t64.s2.w4";
  expect_damaged(winner_column, "winner: expected \"t64.s2.w4\" (the row's winner column), got \"t64.s3.w4\"");

  auto other_device = good;
  other_device.device_fingerprint = "NVIDIA H100";
  expect_damaged(other_device, "device_fingerprint: expected \"NVIDIA H100\"");

  expect_damaged(tampered([](Json& j) { j.set("format", "ktune.tuning.v0"); }), "format: expected \"ktune.tuning.v1\"");
  expect_damaged(tampered([](Json& j) { j.set("noise_fraction", -1); }), "noise_fraction: expected a finite number >= 0, got -1");
  expect_damaged(tampered([](Json& j) {
                   Json without = Json::object();
                   for (const auto& [k, v] : j.members())
                     if (k != "candidates") without.set(k, v);
                   j = without;
                 }),
                 "candidates: expected a non-empty array, got nothing");
  expect_damaged(tampered([](Json& j) { j = Json::array(); }), "candidates_json: expected an object, got []");
}

TEST_CASE("autotune tuning record: damaged candidates name the field", "[autotune]") {
  auto edit_candidate = [](size_t i, const char* key, Json value) {
    ktune::cache::TuningRecord r = to_tuning_record(sample_result());
    Json j = Json::parse(r.candidates_json);
    Json list = Json::array();
    for (size_t k = 0; k < j.at("candidates").size(); ++k) {
      Json c = j.at("candidates").at(k);
      if (k == i) c.set(key, value);
      list.push(c);
    }
    j.set("candidates", list);
    r.candidates_json = j.dump();
    return r;
  };
  expect_damaged(edit_candidate(0, "median_ms", Json("fast")), "candidates[0].median_ms: expected a finite number >= 0, got \"fast\"");
  expect_damaged(edit_candidate(2, "samples_ms", Json::array()), "candidates[2].samples_ms: expected a non-empty array");
  expect_damaged(edit_candidate(0, "rounds", Json(0)), "candidates[0].rounds: expected an integer >= 1, got 0");
  expect_damaged(edit_candidate(1, "config", Json("t64.s2.w4")), "candidates[1].config: expected each config once");
  // The winner must be a candidate that ran.
  expect_damaged(edit_candidate(2, "ok", Json(false)), "winner: expected a candidate that ran");
  // Winner not among the candidates.
  expect_damaged(edit_candidate(2, "config", Json("t256.s1.w4")), "winner: expected one of the candidates' configs");
}

TEST_CASE("autotune tuning record: inconsistent results are refused before writing", "[autotune]") {
  TuningResult t = sample_result();
  auto expect_invalid = [](TuningResult r, const char* message) {
    try {
      to_tuning_record(r);
      FAIL("no error; expected " << message);
    } catch (const ktune::Error& e) {
      CHECK(e.status() == ktune::Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(message));
    }
  };
  TuningResult r = t;
  r.winner = 7;
  expect_invalid(r, "winner: expected an index below 3, got 7");
  r = t;
  r.winner = 1;
  expect_invalid(r, "expected a candidate that ran, got failed \"t128.s4.w8\"");
  r = t;
  r.candidates[1].config = "t64.s2.w4";
  expect_invalid(r, "\"t64.s2.w4\" twice");
  r = t;
  r.device_fingerprint.clear();
  expect_invalid(r, "device_fingerprint");
  r = t;
  r.candidates.clear();
  expect_invalid(r, "candidates: expected at least one");
}
