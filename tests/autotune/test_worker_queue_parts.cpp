// The pieces of the multi-device warmup that need no process: --devices lists, the worker messages, and the C
// options' checks.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include "autotune/device_list.hpp"
#include "autotune/worker_protocol.hpp"
#include "ktune/error.hpp"
#include "ktune/ktune.h"
#include "support/c_runtime.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using autotune::parse_device_list;

namespace {

std::string device_list_error(const std::string& text, int count) {
  try {
    parse_device_list(text, count, "--devices");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("device lists (--devices): all, ordinals in the order given, each bad entry named", "[autotune][workers]") {
  CHECK(parse_device_list("all", 3, "--devices") == std::vector<int>{0, 1, 2});
  CHECK(parse_device_list("2,0", 3, "--devices") == std::vector<int>{2, 0});
  CHECK(parse_device_list("1", 2, "--devices") == std::vector<int>{1});
  CHECK_THAT(device_list_error("0,0", 2), Catch::Contains("--devices: '0' is given twice"));
  CHECK_THAT(device_list_error("0,0", 0), Catch::Contains("given twice"));  // on any machine
  CHECK_THAT(device_list_error("-1", 2), Catch::Contains("--devices: '-1': expected a GPU ordinal >= 0"));
  CHECK_THAT(device_list_error("x", 2), Catch::Contains("expected \"all\" or comma-separated GPU ordinals") &&
                                            Catch::Contains("got 'x'"));
  CHECK_THAT(device_list_error("1.5", 2), Catch::Contains("got '1.5'"));
  CHECK_THAT(device_list_error("0,,1", 2), Catch::Contains("got an empty entry"));
  CHECK_THAT(device_list_error("", 2), Catch::Contains("got nothing"));
  CHECK_THAT(device_list_error("2", 2), Catch::Contains("'2': expected a GPU ordinal below 2 (this machine has 2 GPUs: "
                                                        "ordinals 0..1)"));
  CHECK_THAT(device_list_error("0", 0), Catch::Contains("below 0 (this machine has no GPU)"));
  CHECK_THAT(device_list_error("all", 0), Catch::Contains("\"all\": expected at least one GPU"));
  CHECK_THAT(device_list_error("99999999999", 2), Catch::Contains("got '99999999999'"));
}

TEST_CASE("worker messages round-trip, and a malformed one is an error naming the field", "[autotune][workers]") {
  autotune::TuneTask t;
  t.id = 7;
  t.family = "xqa_decode";
  t.problem_key = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none";
  t.buckets = {{"b", 4}, {"l", 1024}};
  t.noise_fraction = 0.02;
  t.measure.samples = 3;
  t.measure.max_spread = 0.05;
  t.compile_jobs = 2;
  t.retune = true;
  const std::string line = autotune::encode(t);
  CHECK(line.find('\n') == std::string::npos);
  autotune::TuneTask back = autotune::decode_task(line);
  CHECK(back.id == 7);
  CHECK(back.family == t.family);
  CHECK(back.problem_key == t.problem_key);
  CHECK(back.buckets == t.buckets);
  CHECK(back.measure.samples == 3);
  CHECK(back.measure.max_spread == 0.05);
  CHECK(back.compile_jobs == 2);
  CHECK(back.retune);
  t.retune = false;
  CHECK_FALSE(autotune::decode_task(autotune::encode(t)).retune);

  autotune::TaskResult r{7, "failed: a message\nover two lines", "", 12.5};
  const std::string rline = autotune::encode(r);
  CHECK(rline.find('\n') == std::string::npos);
  CHECK(autotune::decode_result(rline).status == r.status);

  autotune::WorkerHello h{"sm_90a", "NVIDIA H200|sm_90|132|...", ""};
  CHECK(autotune::decode_hello(autotune::encode(h)).fingerprint == h.fingerprint);
  CHECK(autotune::decode_hello(autotune::encode(autotune::WorkerHello{"", "", "no GPU 3"})).fatal == "no GPU 3");

  CHECK_THROWS_WITH(autotune::decode_result("{\"task\": 1}"), Catch::Contains("status: expected a string"));
  CHECK_THROWS_WITH(autotune::decode_task("not json"), Catch::Contains("expected one JSON object"));
  CHECK_THROWS_WITH(autotune::decode_hello("{\"hello\": 1, \"arch\": \"\", \"fingerprint\": \"f\"}"),
                    Catch::Contains("expected non-empty strings"));
}

TEST_CASE("C warmup options: devices and workers are checked before any work", "[autotune][workers][capi]") {
  test::TempDir dir;
  const std::string db = dir.file("c.db");
  ktune_runtime_options ro;
  ktune_runtime_options_default(&ro);
  ro.cache_path = db.c_str();
  ktune_runtime* rt = nullptr;
  REQUIRE(ktune_runtime_create(&ro, &rt) == KTUNE_OK);
  ktune_warmup_options o;
  ktune_warmup_options_default(&o);
  o.preset = "llama-3.1-8b";
  ktune_warmup_result r;

  CHECK(ktune_warmup_workers(rt, &o, "0,0", 0, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("devices: '0' is given twice"));
  o.device = 0;
  CHECK(ktune_warmup_workers(rt, &o, "all", 0, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("options.device and devices"));
  o.device = -1;
  CHECK(ktune_warmup_workers(rt, &o, nullptr, -2, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("host_workers"));
  o.arches = "sm_90a";  // host workers without host among the arches
  CHECK(ktune_warmup_workers(rt, &o, nullptr, 2, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("the arches must include host"));

  // The growable request: its size is checked before any field is read, then the same checks apply.
  ktune_warmup_request q;
  ktune_warmup_request_default(&q);
  CHECK(q.struct_size == sizeof(ktune_warmup_request));
  CHECK(q.family_id == ktune_family_id("warmup_request"));
  CHECK(q.options == nullptr);
  CHECK(q.devices == nullptr);
  CHECK(q.host_workers == 0);
  CHECK(q.retune == 0);
  CHECK(ktune_warmup_run(rt, nullptr, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("request must not be NULL"));
  CHECK(ktune_warmup_run(rt, &q, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("options must not be NULL"));
  q.options = &o;
  // A newer caller's longer request: read up to this library's fields while its own are zero, refused naming
  // the byte once one is set, and a size that is no form of the struct refused before any field is read.
  struct NewerRequest {
    ktune_warmup_request known;
    int64_t future_field;
  } newer;
  REQUIRE(ktune_warmup_request_init(&newer.known, sizeof newer) == KTUNE_OK);
  CHECK(newer.known.struct_size == sizeof newer);
  CHECK(newer.future_field == 0);
  newer.known.options = &o;
  newer.known.host_workers = 2;  // o.arches is still sm_90a: the request's own checks ran
  CHECK(ktune_warmup_run(rt, &newer.known, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("the arches must include host"));
  newer.future_field = 1;
  CHECK(ktune_warmup_run(rt, &newer.known, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("byte " + std::to_string(sizeof(ktune_warmup_request))) &&
                                     Catch::Contains("does not know"));
  q.family_id = 0;  // not started from ktune_warmup_request_default: nothing past the header is read
  CHECK(ktune_warmup_run(rt, &q, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("request.family_id"));
  q.family_id = ktune_family_id("warmup_request");
  q.struct_size = sizeof(ktune_warmup_request) + 12;  // longer, but not in whole 8-byte units
  CHECK(ktune_warmup_run(rt, &q, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("request.struct_size"));
  q.struct_size = sizeof(ktune_warmup_request) - 4;
  CHECK(ktune_warmup_run(rt, &q, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("request.struct_size: expected one of " +
                                                 std::to_string(sizeof(ktune_warmup_request))));
  q.struct_size = sizeof(ktune_warmup_request);
  q.host_workers = 2;  // o.arches is still sm_90a
  CHECK(ktune_warmup_run(rt, &q, &r) == KTUNE_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(ktune_last_error(), Catch::Contains("the arches must include host"));
  ktune_runtime_destroy(rt);
}

TEST_CASE("C warmup: binaries the cache does not take count as failed compile jobs, never as done",
          "[autotune][capi]") {
  // A writable cache whose every binary insert fails (a trigger standing in for a full disk or a lock held
  // past the wait): the warmup compiles, but a binary kept in memory only is compiled again by the next process.
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  const std::string db = dir.file("full.db");
  ktune_runtime* rt = test::c_runtime(db);  // creates the cache file and its tables
  {
    sqlite3* c = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &c) == SQLITE_OK);
    REQUIRE(sqlite3_exec(c, "CREATE TRIGGER disk_full BEFORE INSERT ON binaries BEGIN "
                            "SELECT RAISE(ABORT, 'database or disk is full'); END",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(c);
  }
  ktune_warmup_options o;
  ktune_warmup_options_default(&o);
  o.preset = "llama-3.1-8b";
  o.arches = "sm_90a";
  o.max_batch = 1;
  o.max_seq_len = 128;
  o.all_candidates = 0;
  ktune_warmup_result r;
  REQUIRE(ktune_warmup(rt, &o, &r) == KTUNE_OK);
  INFO("jobs " << r.compile_jobs << ", compiled " << r.compiled << ", hits " << r.cache_hits << ", failed "
                << r.compile_failed);
  CHECK(r.compile_jobs > 0);
  CHECK(r.compiled == 0);
  CHECK(r.compile_failed == r.compile_jobs);
  // Once the cause has passed, the same runtime stores what it kept in memory: the next warmup fails nothing.
  {
    sqlite3* c = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &c) == SQLITE_OK);
    REQUIRE(sqlite3_exec(c, "DROP TRIGGER disk_full", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(c);
  }
  REQUIRE(ktune_warmup(rt, &o, &r) == KTUNE_OK);
  CHECK(r.compile_failed == 0);
  CHECK(r.cache_hits == r.compile_jobs);  // found in this process's memory, now in the cache too
  ktune_runtime_destroy(rt);
  ktune_runtime* fresh = test::c_runtime(db);
  REQUIRE(ktune_warmup(fresh, &o, &r) == KTUNE_OK);
  CHECK(r.compiled == 0);  // a new process finds every binary in the file
  CHECK(r.compile_failed == 0);
  ktune_runtime_destroy(fresh);
}

TEST_CASE("C warmup: a runtime with no writable cache layer is refused before anything is tuned",
          "[autotune][capi]") {
  // What it tuned could not be stored: it would report keys as tuned that no process ever finds.
  test::TempDir dir;
  const std::string db = dir.file("ro.db");
  ktune_runtime* rt = test::c_runtime(db, /*read_only=*/true);
  ktune_warmup_options o;
  ktune_warmup_options_default(&o);
  o.preset = "llama-3.1-8b";
  o.arches = "host";
  o.max_batch = 1;
  o.max_seq_len = 128;
  ktune_warmup_result r;
  CHECK(ktune_warmup(rt, &o, &r) == KTUNE_ERROR_CACHE);
  CHECK_THAT(ktune_last_error(), Catch::Contains("ktune warmup: nothing could be stored"));
  CHECK(r.keys == 0);
  CHECK(r.tuned == 0);
  ktune_runtime_destroy(rt);
}
