// Cross-process single flight for tunings: processes warming one cache measure each key once. The one that
// claims a key first holds its lock in `<layer>.tune-lock` while it tunes; another waits for it and then takes
// the stored row, even after having looked the key up (and remembered a miss) before. Two Runtimes on one file
// stand for two processes: each lock is its own open file description, and those exclude each other in one
// process as across processes. Tunes on the host backend.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "autotune/presets.hpp"
#include "autotune/tuner.hpp"
#include "autotune/warmup.hpp"
#include "host/host_support.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/tuning_store.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace std::chrono_literals;

namespace {

const std::string kFamily = "xqa_decode";
const std::string kKey = "d64.h8.kv2.p16.hnd.bf16-bf16-bf16.q1.none|b1.l512";

RuntimeOptions options_for(const std::string& path) {
  RuntimeOptions o;
  o.cache_path = path;
  return o;
}

// Two runtimes on one cache file: two processes, as far as the locks can tell.
struct TwoRuntimes {
  test::TempDir dir;
  RuntimeOptions o = options_for(dir.file("t.db"));
  Runtime first{o}, second{o};
};

// The row a host tuning of kKey would store, with `winner`.
cache::TuningRecord host_row(Runtime& rt, const std::string& winner) {
  cache::TuningRecord row;
  row.family = kFamily;
  row.problem_key = kKey;
  row.device_fingerprint = rt.host_fingerprint();
  row.ktune_version = version();
  row.winner_config = winner;
  row.candidates_json = "[]";
  return row;
}

}  // namespace

TEST_CASE("tuning single flight: a claim waits while another runtime tunes the key, then takes its row",
          "[autotune][warmup][singleflight]") {
  KTUNE_REQUIRE_HOST();
  TwoRuntimes two;
  const RuntimeOptions& o = two.o;
  Runtime &tuner = two.first, &waiter = two.second;
  // The waiter looked the key up before the row existed: it remembers a miss, which it must not trust later.
  CHECK(waiter.host_tuned_config(kFamily, kKey).empty());

  autotune::KeyClaim first = autotune::claim_key(tuner, kFamily, kKey, /*host=*/true, /*retune=*/false, 5);
  REQUIRE(first.winner.empty());
  REQUIRE(first.flight);  // held: this one tunes
  CHECK_FALSE(first.waited);
  auto second = std::async(std::launch::async, [&] {
    return autotune::claim_key(waiter, kFamily, kKey, true, false, 60);
  });
  CHECK(second.wait_for(500ms) == std::future_status::timeout);  // waiting, not tuning beside it

  // What a host tuning does at its end: the row into the cache, the winner into its runtime's memo.
  REQUIRE(internal::store_tuning_row(tuner, host_row(tuner, "t64.s3.w2")));
  tuner.remember_host_tuned_config(kFamily, kKey, "t64.s3.w2");
  first.flight.reset();  // stored: let the waiter go
  const autotune::KeyClaim got = second.get();
  CHECK(got.waited);
  CHECK(got.winner == "t64.s3.w2");
  CHECK_FALSE(got.flight);  // nothing to tune: the lock is not kept
  CHECK(got.note.empty());
  CHECK(waiter.host_tuned_config(kFamily, kKey) == "t64.s3.w2");

  // Claimed again once the row exists, by a runtime that never looked: no wait, the winner, no lock.
  Runtime third(o);
  const autotune::KeyClaim later = autotune::claim_key(third, kFamily, kKey, true, false, 5);
  CHECK_FALSE(later.waited);
  CHECK(later.winner == "t64.s3.w2");
  CHECK_FALSE(later.flight);
}

TEST_CASE("tuning single flight: a wait that times out tunes anyway and says why", "[autotune][warmup][singleflight]") {
  KTUNE_REQUIRE_HOST();
  TwoRuntimes two;
  const RuntimeOptions& o = two.o;
  Runtime &stuck = two.first, &waiter = two.second;
  const autotune::KeyClaim held = autotune::claim_key(stuck, kFamily, kKey, true, false, 5);
  REQUIRE(held.flight);
  const auto t0 = std::chrono::steady_clock::now();
  const autotune::KeyClaim got = autotune::claim_key(waiter, kFamily, kKey, true, false, 0.3);
  CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
  CHECK(got.waited);
  CHECK(got.winner.empty());
  CHECK_FALSE(got.flight);  // it tunes without the lock: duplicate work at worst, never a hang
  CHECK(got.note == "waited 0.3 s for another process tuning it (lock " + o.cache_path + ".tune-lock); tuning here too");
}

TEST_CASE("tuning single flight: a claim reads the cache again after another runtime stored the key",
          "[autotune][warmup][singleflight]") {
  KTUNE_REQUIRE_HOST();
  TwoRuntimes two;
  Runtime &engine = two.first, &other = two.second;
  // A process that served requests remembers a miss; another warmup then tunes and stores the key, and is done
  // (no lock held) before this one claims it: the claim takes the row, it does not tune the key again.
  CHECK(engine.host_tuned_config(kFamily, kKey).empty());
  REQUIRE(internal::store_tuning_row(other, host_row(other, "t32.v8.u1")));
  const autotune::KeyClaim got = autotune::claim_key(engine, kFamily, kKey, true, false, 5);
  CHECK_FALSE(got.waited);
  CHECK(got.winner == "t32.v8.u1");
  CHECK_FALSE(got.flight);
}

TEST_CASE("tuning single flight: two warmups of one cache at the same time tune each key once",
          "[autotune][warmup][singleflight][host]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  const RuntimeOptions o = options_for(dir.file("w.db"));
  const autotune::Preset preset =
      autotune::with_overrides(autotune::load_preset("llama-3.1-8b"), std::nullopt, 4, 1024, std::nullopt);
  autotune::WarmupOptions w;
  w.arches = {"host"};
  Runtime a(o), b(o);
  auto run = [&w, &preset](Runtime* rt) { return autotune::warmup(*rt, preset, w); };
  auto first = std::async(std::launch::async, run, &a);
  auto second = std::async(std::launch::async, run, &b);
  const autotune::WarmupReport ra = first.get(), rb = second.get();
  REQUIRE(ra.keys == 6);  // batch {1, 2, 4} x seq_len {512, 1024}
  REQUIRE(rb.keys == ra.keys);
  CHECK(ra.failed + rb.failed == 0);
  CHECK(ra.tuned + ra.already_done == ra.keys);
  CHECK(rb.tuned + rb.already_done == rb.keys);
  CHECK(ra.tuned + rb.tuned == ra.keys);  // each key measured by one of them
  // Both report the same winner for every key: the one row stored.
  for (const auto& x : ra.items)
    for (const auto& y : rb.items)
      if (x.tuning_key == y.tuning_key) {
        INFO(x.tuning_key);
        CHECK(x.winner == y.winner);
      }
}
