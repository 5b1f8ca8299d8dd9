// `ktune report` (tools/ktune/report_html.cpp) and what it reads: bytes/FLOPs per call and device ceilings in
// tuning rows (autotune/tuning_record.hpp), gpu_ceilings, escaping of user-influenced strings, and the page
// built from a fixture cache whose rows come from real sweeps over a scripted timer.
//
// The fixture case also writes the fixture cache to $KTUNE_REPORT_FIXTURE_DB when set, with the expected counts
// in $KTUNE_REPORT_FIXTURE_DB.expect: tests/report/report_chromium.sh renders it with the CLI and checks the page
// in headless Chromium.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "autotune/host_tuner.hpp"
#include "autotune/sweep.hpp"
#include "autotune/tuning_record.hpp"
#include "autotune/tuning_view.hpp"
#include "autotune/fake_timer.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "support/temp_dir.hpp"
#include "tools/ktune/report_html.hpp"

using namespace ktune::autotune;
using ktune_test::FakeTimer;

namespace {

// Carries '</script>', an element, an attribute breaker, an entity and U+2028. (An invalid UTF-8 byte in a key
// makes the row unreadable — its JSON copy cannot equal the column — so that byte goes into an error message.)
const std::string kHostile =
    "d64.h8.kv8</script><script>document.body.setAttribute('data-pwned','1')</script><b id=\"pwned\">&amp;'\xE2\x80\xA8";
const std::string kHostileConfig = "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">";

const char* kH200 = "NVIDIA H200|cc9.0|sm132|memclk3201000|drv13000";
const char* kHost = "x86_64-pc-linux-gnu/znver5/+avx2,+fma;llvm 19.1.7;cores=2";

struct Expect {
  int keys = 0, unreadable = 0, candidates = 0, roofline_points = 0, devices = 0, binaries = 0;
};

struct Cand {
  std::string config;
  double base_ms = 0;
  bool fails = false;
  std::string prune;  // non-empty: pruned with this reason
};
Cand ok(const std::string& config, double ms) {
  Cand c;
  c.config = config;
  c.base_ms = ms;
  return c;
}
Cand failing(const std::string& config) {
  Cand c = ok(config, 1);
  c.fails = true;
  return c;
}
Cand pruned(const std::string& config, const std::string& why) {
  Cand c = ok(config, 1);
  c.prune = why;
  return c;
}

// One tuning row from a real sweep (scripted timer), optionally with workload and ceilings.
TuningResult swept(const std::string& family, const std::string& key, const std::string& device,
                   const std::vector<Cand>& cands, uint64_t seed) {
  FakeTimer timer(seed);
  std::vector<std::string> configs;
  for (const auto& c : cands) {
    FakeTimer::Script s{c.base_ms, 0.01};
    s.launch_fails = c.fails;
    timer.script(c.config, s);
    configs.push_back(c.config);
  }
  MeasureOptions o;
  o.iters_per_sample = 1;
  o.samples = 5;
  TuningResult t;
  t.family = family;
  t.problem_key = key;
  t.device_fingerprint = device;
  t.candidates = sweep(timer, configs, [&](const std::string& config) -> std::function<void()> {
    for (const auto& c : cands)
      if (c.config == config && !c.prune.empty()) throw ktune::Error(ktune::Status::unsupported, "autotune", c.prune);
    return timer.launcher(config);
  }, o);
  t.noise_fraction = 0.02;
  t.winner = select_winner(t.candidates, t.noise_fraction);
  t.tuned_at = 1764400000 + static_cast<int64_t>(seed);
  return t;
}

// Writes the fixture cache; returns what the page must show.
Expect make_fixture(const std::string& path) {
  auto db = ktune::cache::CacheDb::open(path, {});
  Expect e;
  const ktune::DeviceCeilings h200 = ktune::gpu_ceilings(9, 0, 132, 1980000, 3201000, 6144);
  ktune::DeviceCeilings host;
  host.peak_bytes_per_s = 40e9;
  host.source = "measured: fixture";
  auto put = [&](TuningResult t, double bytes, double flops, const ktune::DeviceCeilings& c) {
    t.bytes_per_call = bytes;
    t.flops_per_call = flops;
    t.ceilings = c;
    db->put_tuning(to_tuning_record(t));
    e.keys++;
    e.candidates += static_cast<int>(t.candidates.size());
    if (bytes > 0 && flops > 0) e.roofline_points++;
  };
  const std::string xqa = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none";
  int seed = 1;
  for (int b : {1, 16, 64}) {
    // KV bytes read per call: b x 4096 tokens x 8 heads x 128 x 2 (K and V) x 2 bytes; 4 FLOP per (q head, token, d).
    const double bytes = double(b) * 4096 * 8 * 128 * 2 * 2, flops = 4.0 * b * 32 * 4096 * 128;
    const double t_ms = bytes / 3.9e12 * 1e3;
    TuningResult t = swept("xqa_decode", xqa + "|b" + std::to_string(b) + ".l4096", kH200,
                           {ok("t64.s2.w4", t_ms * 1.15), ok("t64.s4.w4", t_ms), failing("t128.s4.w8"),
                            pruned("t128.s8.w8", "pruned: entry 0 uses 64 bytes of local memory per thread (255 registers)"),
                            ok("t32.s1.w4", t_ms * 1.6)},
                           seed++);
    if (b == 64) t.compiler_version = "13.0.88";  // the NVRTC of its candidates, as a GPU tuning records it
    put(t, bytes, flops, h200);
  }
  for (int m : {16, 256}) {
    const double bytes = 2880.0 * 2880 * 0.53125 + m * 2880 * 4.0, flops = 2.0 * m * 2880 * 2880;
    put(swept("mxfp4_gemm", "n2880.k2880.bf16|m" + std::to_string(m), kH200,
              {ok("bm64.bn128.s3", std::max(bytes / 2.5e12, flops / 5e14) * 1e3),
               ok("bm128.bn128.s4", std::max(bytes / 3.1e12, flops / 6e14) * 1e3)},
              seed++),
        bytes, flops, h200);
  }
  put(swept("xqa_decode", xqa + "|b4.l2048", kHost,
            {ok("t64.v16.u4", 2.0), ok("t32.v8.u1", 3.5), ok("t128.v16.u4", 1.9)}, seed++),
      4.0 * 2048 * 8 * 128 * 4, 4.0 * 4 * 32 * 2048 * 128, host);
  // A row of an older build: no workload, no ceilings -> bars but no roofline point.
  put(swept("xqa_decode", xqa + "|b2.l4096", kH200, {ok("t64.s2.w4", 0.05), ok("t64.s4.w4", 0.045)}, seed++), 0, 0, {});
  // Hostile strings in the key, a config and an error message.
  TuningResult hostile = swept("xqa_decode", kHostile + "|b1", kH200,
                               {ok("t64.s2.w4", 0.01), ok(kHostileConfig, 0.02),
                                pruned("t9.s9.w9", "pruned: " + kHostile + "\xFF")},
                               seed++);
  hostile.compiler_version = "13.0<i id=\"pwned\">";
  put(hostile, 1e6, 1e6, h200);
  // A row whose candidates_json cannot be read: listed with the reason, no chart.
  ktune::cache::TuningRecord junk;
  junk.family = "sparse_mla_decode";
  junk.problem_key = "h128.topk2048|b1";
  junk.device_fingerprint = kH200;
  junk.ktune_version = tuning_ktune_version();
  junk.winner_config = "x";
  junk.candidates_json = "{\"format\": \"something else\"}";
  junk.tuned_at = 1764400000;
  db->put_tuning(junk);
  e.keys++;
  e.unreadable++;
  e.devices = 2;

  int n = 0;
  for (auto [fam, arch, comp, ver] : {std::tuple<const char*, const char*, const char*, const char*>
                                          {"xqa_decode", "sm_90a", "nvrtc", "13.0.88"},
                                      {"xqa_decode", "sm_90a", "nvrtc", "13.0.88"},
                                      {"xqa_decode", "host", "llvm", "x86_64-pc-linux-gnu/znver5;llvm 19.1.7"},
                                      {"mxfp4_gemm", "sm_100a", "nvrtc", "13.0.88"}}) {
    ktune::cache::BinaryRecord b;
    b.digest = std::string(63, 'a') + std::to_string(n);
    b.family = fam;
    b.arch = arch;
    b.compiler = comp;
    b.compiler_version = ver;
    b.name = std::string(fam) + "/" + arch + "/fixture" + std::to_string(n);
    b.options = "--std=c++17";
    b.source_digest = std::string(64, 'b');
    b.ktune_version = tuning_ktune_version();
    b.schema_version = 1;
    b.entry_points = "kernel";
    b.blob.assign(1000 + 500 * n, static_cast<uint8_t>(n));
    db->put_binary(b);
    ++n;
  }
  e.binaries = n;
  return e;
}

ktune::cli::report::Input input_for(const std::string& path) {
  ktune::cli::report::Input in;
  in.search_path = path;
  in.generated_at = "2026-11-29 18:00:00 UTC";
  in.ktune_version = ktune::version();
  in.layers = ktune::cache_layers(path);
  in.binaries = ktune::cache_list(path);
  in.tuning = ktune::cache_list_tuning(path);
  return in;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: tuning rows carry bytes, FLOPs and ceilings, rows without them stay readable", "[report]") {
  TuningResult t = swept("xqa_decode", "d128|b1.l512", kH200, {ok("a", 1.0), ok("b", 0.5)}, 7);
  ktune::cache::TuningRecord plain = to_tuning_record(t);
  CHECK(plain.candidates_json.find("workload") == std::string::npos);  // nothing recorded: nothing written
  TuningResult back = from_tuning_record(plain);
  CHECK(back.bytes_per_call == 0);
  CHECK(back.ceilings.peak_bytes_per_s == 0);

  t.bytes_per_call = 1.5e9;
  t.flops_per_call = 3.25e11;
  t.ceilings = ktune::gpu_ceilings(9, 0, 132, 1980000, 3201000, 6144);
  back = from_tuning_record(to_tuning_record(t));
  CHECK(back.bytes_per_call == 1.5e9);
  CHECK(back.flops_per_call == 3.25e11);
  CHECK(back.ceilings.peak_bytes_per_s == t.ceilings.peak_bytes_per_s);
  CHECK(back.ceilings.peak_flops == t.ceilings.peak_flops);
  CHECK(back.ceilings.source == t.ceilings.source);

  t.bytes_per_call = -1;
  CHECK_THROWS_WITH(to_tuning_record(t), Catch::Contains("bytes_per_call: expected a finite number >= 0"));
  t.bytes_per_call = 1;

  // A damaged optional field is reported like any other field.
  ktune::cache::TuningRecord r = to_tuning_record(t);
  auto j = ktune::cache::Json::parse(r.candidates_json);
  ktune::cache::Json w = ktune::cache::Json::object();
  w.set("bytes_per_call", "many");
  w.set("flops_per_call", 1.0);
  j.set("workload", w);
  r.candidates_json = j.dump();
  CHECK_THROWS_WITH(from_tuning_record(r), Catch::Contains("workload.bytes_per_call: expected a finite number >= 0"));

  // The view used by the report never throws: a bad row comes back unreadable with the reason.
  ktune::CacheTuningEntry entry{"x.db", r.family, r.problem_key, r.device_fingerprint, r.ktune_version,
                                r.winner_config, r.candidates_json, r.tuned_at};
  TuningView v = read_tuning_entry(entry);
  CHECK_FALSE(v.readable);
  CHECK_THAT(v.error, Catch::Contains("workload.bytes_per_call"));
}

TEST_CASE("report: GPU ceilings from driver attributes and the per-arch table", "[report]") {
  // H200: 132 SMs, 1980 MHz, HBM3e reported at 3201 MHz on a 6144-bit bus.
  ktune::DeviceCeilings h200 = ktune::gpu_ceilings(9, 0, 132, 1980000, 3201000, 6144);
  CHECK(h200.peak_bytes_per_s == Approx(4.917e12).epsilon(1e-3));
  CHECK(h200.peak_flops == Approx(4096.0 * 132 * 1.98e9));
  CHECK_THAT(h200.source, Catch::Contains("4096 dense BF16 FLOP/clk/SM"));
  // A100 SXM 40GB: 108 SMs at 1410 MHz, 1215 MHz x 5120 bit: the published 312 TFLOP/s and 1555 GB/s.
  ktune::DeviceCeilings a100 = ktune::gpu_ceilings(8, 0, 108, 1410000, 1215000, 5120);
  CHECK(a100.peak_flops == Approx(312e12).epsilon(0.01));
  CHECK(a100.peak_bytes_per_s == Approx(1555e9).epsilon(0.001));
  // An arch outside the table: bandwidth only; missing attributes: nothing.
  ktune::DeviceCeilings ada = ktune::gpu_ceilings(8, 9, 128, 2520000, 10501000, 384);
  CHECK(ada.peak_flops == 0);
  CHECK(ada.peak_bytes_per_s == Approx(1008e9).epsilon(0.001));
  CHECK_THAT(ada.source, Catch::Contains("unknown for sm_89"));
  ktune::DeviceCeilings none = ktune::gpu_ceilings(9, 0, 0, 0, 0, 0);
  CHECK(none.peak_flops == 0);
  CHECK(none.peak_bytes_per_s == 0);
}

TEST_CASE("report: the host ceiling is measured once per process", "[report]") {
  const ktune::DeviceCeilings a = host_ceilings();
  CHECK(a.peak_bytes_per_s > 1e8);   // any machine reads more than 100 MB/s
  CHECK(a.peak_bytes_per_s < 1e13);  // and no CPU socket 10 TB/s
  CHECK(a.peak_flops == 0);          // not measured
  CHECK_THAT(a.source, Catch::StartsWith("measured: "));
  CHECK(host_ceilings().peak_bytes_per_s == a.peak_bytes_per_s);  // memoized: one measurement per process
}

TEST_CASE("report: escaping of user-influenced strings", "[report]") {
  using namespace ktune::cli::report;
  CHECK(html_escape("<b a=\"x\">'&'</b>") == "&lt;b a=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;");
  CHECK(script_json_string("</script><!--") == "\"\\u003c/script\\u003e\\u003c!--\"");
  CHECK(script_json_string("a\"b\\c\n\x01&") == "\"a\\\"b\\\\c\\n\\u0001\\u0026\"");
  CHECK(script_json_string("\xE2\x80\xA8\xE2\x80\xA9") == "\"\\u2028\\u2029\"");
  CHECK(script_json_string("\xC3\xA9") == "\"\xC3\xA9\"");  // valid UTF-8 passes through
  // Invalid sequences (lone continuation, overlong '<', truncated, surrogate) become U+FFFD, never '<'.
  CHECK(valid_utf8("a\x80z") == "a\xEF\xBF\xBDz");
  CHECK(valid_utf8("\xC0\xBC") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(valid_utf8("\xE2\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(valid_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(valid_utf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");
}

TEST_CASE("report: the page from a fixture cache", "[report]") {
  ktune::test::TempDir dir;
  const std::string db = dir.file("fixture.db");
  const Expect e = make_fixture(db);

  ktune::cli::report::Summary s;
  const std::string page = ktune::cli::report::render_html(input_for(db), "n0nce", &s);
  CHECK(s.keys == e.keys);
  CHECK(s.unreadable == e.unreadable);
  CHECK(s.candidates == e.candidates);
  CHECK(s.roofline_points == e.roofline_points);
  CHECK(s.devices == e.devices);
  CHECK(s.binaries == e.binaries);

  // Self-contained: the data block and the page's own script, nothing fetched.
  CHECK(count(page, "<script") == 2);
  CHECK(count(page, "</script>") == 2);
  CHECK(page.find("<script nonce=\"n0nce\">") != std::string::npos);
  CHECK(page.find("script-src 'nonce-n0nce'") != std::string::npos);
  CHECK_FALSE(std::regex_search(page, std::regex("(src|href)\\s*=\\s*[\"']?[a-z]+:", std::regex::icase)));
  CHECK(page.find("@import") == std::string::npos);
  CHECK(page.find("url(") == std::string::npos);
  // The hostile strings appear only escaped.
  CHECK(page.find("<b id=") == std::string::npos);
  CHECK(page.find("<img") == std::string::npos);
  const size_t data_at = page.find("id=\"ktune-data\">");
  REQUIRE(data_at != std::string::npos);
  const std::string data = page.substr(data_at, page.find("</script>", data_at) - data_at);
  CHECK(data.find("\xE2\x80\xA8") == std::string::npos);  // a raw U+2028 would end a JS string in old engines
  CHECK(data.find("\\u2028") != std::string::npos);
  CHECK(data.find('<') == std::string::npos);
  CHECK(page.find("&lt;/script&gt;&lt;script&gt;document.body.setAttribute(&#39;data-pwned&#39;") != std::string::npos);
  CHECK(page.find("\\u003c/script\\u003e\\u003cscript\\u003e") != std::string::npos);
  // The NVRTC a row records, escaped like every string from the cache.
  CHECK(page.find("&middot; NVRTC 13.0.88") != std::string::npos);
  CHECK(page.find("&middot; NVRTC 13.0&lt;i id=&quot;pwned&quot;&gt;") != std::string::npos);
  // The unreadable row is named with its reason.
  CHECK(std::regex_search(page, std::regex("unreadable row: [^<]*tuning row sparse_mla_decode/h128\\.topk2048\\|b1: format")));
  // Cache contents by family and arch.
  CHECK(page.find("<td>mxfp4_gemm</td><td>sm_100a</td><td class=\"n\">1</td>") != std::string::npos);
  CHECK(page.find("<td>xqa_decode</td><td>sm_90a</td><td class=\"n\">2</td>") != std::string::npos);

  if (const char* out = std::getenv("KTUNE_REPORT_FIXTURE_DB")) {
    std::filesystem::copy_file(db, out, std::filesystem::copy_options::overwrite_existing);
    std::ofstream(std::string(out) + ".expect")
        << "keys=" << e.keys << "\nunreadable=" << e.unreadable << "\ncandidates=" << e.candidates
        << "\nroofline_points=" << e.roofline_points << "\ndevices=" << e.devices << "\nbinaries=" << e.binaries << "\n";
  }
}
