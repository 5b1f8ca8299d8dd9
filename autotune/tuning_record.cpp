#include "autotune/tuning_record.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"

#ifndef KTUNE_VERSION_STRING
#error "KTUNE_VERSION_STRING must be defined by the build"
#endif

namespace ktune::autotune {

using cache::Json;

namespace {

constexpr const char* kFormat = "ktune.tuning.v1";

[[noreturn]] void bad_arg(const std::string& what) { throw Error(Status::invalid_argument, "autotune", what); }

bool is_dim_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

Json candidate_json(const CandidateResult& c) {
  Json j = Json::object();
  j.set("config", c.config);
  j.set("ok", c.ok);
  if (!c.ok) {
    j.set("error", c.error);
    return j;
  }
  j.set("median_ms", c.m.median_ms);
  j.set("spread", c.m.spread);
  j.set("rounds", c.m.rounds);
  j.set("stable", c.m.stable);
  Json samples = Json::array();
  for (double s : c.m.samples_ms) samples.push(s);
  j.set("samples_ms", std::move(samples));
  return j;
}

// Reads candidates_json; every failure names the row and the field path.
class RowReader {
 public:
  explicit RowReader(const cache::TuningRecord& r) : row_(r.family + "/" + r.problem_key) {}

  [[noreturn]] void fail(const std::string& path, const std::string& expected, std::string got) const {
    if (got.size() > 80) got = got.substr(0, 77) + "...";
    throw Error(Status::cache_error, "autotune",
                fmt::format("tuning row {}: {}: expected {}, got {}", row_, path, expected, got));
  }
  [[noreturn]] void fail(const std::string& path, const std::string& expected, const Json* got) const {
    fail(path, expected, got ? got->dump() : std::string("nothing"));
  }
  const Json& field(const Json& obj, const std::string& path, const char* key, const char* expected) const {
    const Json* v = obj.find(key);
    if (!v) fail(path + key, expected, std::string("nothing"));
    return *v;
  }
  std::string string(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = field(obj, path, key, "a string");
    if (!v.is_string()) fail(path + key, "a string", &v);
    return v.as_string();
  }
  double non_negative(const Json& v, const std::string& path) const {
    if (!v.is_number() || !std::isfinite(v.as_number()) || v.as_number() < 0) fail(path, "a finite number >= 0", &v);
    return v.as_number();
  }
  double non_negative(const Json& obj, const std::string& path, const char* key) const {
    return non_negative(field(obj, path, key, "a finite number >= 0"), path + key);
  }
  bool boolean(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = field(obj, path, key, "true or false");
    if (!v.is_bool()) fail(path + key, "true or false", &v);
    return v.as_bool();
  }
  int64_t integer(const Json& obj, const std::string& path, const char* key, int64_t min) const {
    std::string expected = fmt::format("an integer >= {}", min);
    const Json& v = field(obj, path, key, expected.c_str());
    if (!v.is_int() || v.as_int() < min) fail(path + key, expected, &v);
    return v.as_int();
  }
  void same(const std::string& in_json, const std::string& column, const char* key) const {
    if (in_json != column) fail(key, fmt::format("\"{}\" (the row's {} column)", column, key), Json(in_json).dump());
  }

 private:
  std::string row_;
};

CandidateResult read_candidate(const RowReader& rd, const Json& c, const std::string& path) {
  if (!c.is_object()) rd.fail(path, "an object", &c);
  CandidateResult out;
  out.config = rd.string(c, path + ".", "config");
  if (out.config.empty()) rd.fail(path + ".config", "a non-empty config key", &c.at("config"));
  out.ok = rd.boolean(c, path + ".", "ok");
  if (!out.ok) {
    const Json* e = c.find("error");
    if (e && !e->is_string()) rd.fail(path + ".error", "a string", e);
    out.error = e ? e->as_string() : std::string();
    return out;
  }
  out.m.median_ms = rd.non_negative(c, path + ".", "median_ms");
  out.m.spread = rd.non_negative(c, path + ".", "spread");
  out.m.rounds = static_cast<int>(rd.integer(c, path + ".", "rounds", 1));
  out.m.stable = rd.boolean(c, path + ".", "stable");
  const Json& samples = rd.field(c, path + ".", "samples_ms", "a non-empty array of times");
  if (!samples.is_array() || samples.size() == 0)
    rd.fail(path + ".samples_ms", "a non-empty array of times", &samples);
  for (size_t i = 0; i < samples.size(); ++i)
    out.m.samples_ms.push_back(rd.non_negative(samples.at(i), fmt::format("{}.samples_ms[{}]", path, i)));
  return out;
}

}  // namespace

const char* tuning_ktune_version() { return KTUNE_VERSION_STRING; }

std::string tuning_problem_key(const std::string& problem_key, const std::vector<BucketValue>& buckets) {
  if (problem_key.empty()) bad_arg("tuning key: problem_key: expected a problem key, got \"\"");
  if (problem_key.find('|') != std::string::npos)
    bad_arg(fmt::format("tuning key: problem_key: expected no '|', got \"{}\"", problem_key));
  std::vector<std::pair<std::string, int>> parts;
  std::set<std::string> seen;
  for (const auto& b : buckets) {
    if (!is_dim_name(b.dim)) bad_arg(fmt::format("tuning key: bucket dim: expected a name of a-z and _, got \"{}\"", b.dim));
    if (!seen.insert(b.dim).second) bad_arg(fmt::format("tuning key: bucket dim: expected each once, got \"{}\" twice", b.dim));
    if (b.value < 1) bad_arg(fmt::format("tuning key: bucket {}: expected a value >= 1, got {}", b.dim, b.value));
    parts.emplace_back(short_dim(b.dim), b.value);
  }
  if (parts.empty()) return problem_key;
  std::sort(parts.begin(), parts.end());
  std::string key = problem_key + "|";
  for (size_t i = 0; i < parts.size(); ++i) key += fmt::format("{}{}{}", i ? "." : "", parts[i].first, parts[i].second);
  return key;
}

cache::TuningRecord to_tuning_record(const TuningResult& t) {
  if (t.family.empty()) bad_arg("tuning result: family: expected a family name, got \"\"");
  if (t.problem_key.empty()) bad_arg("tuning result: problem_key: expected a tuning key, got \"\"");
  if (t.device_fingerprint.empty()) bad_arg("tuning result: device_fingerprint: expected a fingerprint, got \"\"");
  if (t.candidates.empty()) bad_arg("tuning result: candidates: expected at least one, got none");
  for (auto [name, v] : {std::pair<const char*, double>{"bytes_per_call", t.bytes_per_call},
                         {"flops_per_call", t.flops_per_call},
                         {"ceilings.peak_bytes_per_s", t.ceilings.peak_bytes_per_s},
                         {"ceilings.peak_flops", t.ceilings.peak_flops}})
    if (!std::isfinite(v) || v < 0) bad_arg(fmt::format("tuning result: {}: expected a finite number >= 0, got {}", name, v));
  if (t.winner >= t.candidates.size())
    bad_arg(fmt::format("tuning result: winner: expected an index below {}, got {}", t.candidates.size(), t.winner));
  if (!t.candidates[t.winner].ok)
    bad_arg(fmt::format("tuning result: winner: expected a candidate that ran, got failed \"{}\"",
                        t.candidates[t.winner].config));
  if (!std::isfinite(t.noise_fraction) || t.noise_fraction < 0)
    bad_arg(fmt::format("tuning result: noise_fraction: expected a finite fraction >= 0, got {}", t.noise_fraction));
  if (t.device_index < -1)
    bad_arg(fmt::format("tuning result: device_index: expected -1 (not recorded) or an index >= 0, got {}", t.device_index));
  std::set<std::string> configs;
  for (const auto& c : t.candidates) {
    if (c.config.empty()) bad_arg("tuning result: candidates: expected non-empty config keys, got \"\"");
    if (!configs.insert(c.config).second)
      bad_arg(fmt::format("tuning result: candidates: expected each config once, got \"{}\" twice", c.config));
  }

  cache::TuningRecord r;
  r.family = t.family;
  r.problem_key = t.problem_key;
  r.device_fingerprint = t.device_fingerprint;
  r.ktune_version = t.ktune_version.empty() ? std::string(tuning_ktune_version()) : t.ktune_version;
  r.winner_config = t.candidates[t.winner].config;
  r.tuned_at = t.tuned_at ? t.tuned_at : static_cast<int64_t>(std::time(nullptr));

  Json j = Json::object();
  j.set("format", kFormat);
  j.set("family", r.family);
  j.set("problem_key", r.problem_key);
  j.set("device_fingerprint", r.device_fingerprint);
  j.set("ktune_version", r.ktune_version);
  j.set("tuned_at", r.tuned_at);
  j.set("noise_fraction", t.noise_fraction);
  j.set("winner", r.winner_config);
  Json list = Json::array();
  for (const auto& c : t.candidates) list.push(candidate_json(c));
  j.set("candidates", std::move(list));
  if (t.bytes_per_call > 0 || t.flops_per_call > 0) {
    Json w = Json::object();
    w.set("bytes_per_call", t.bytes_per_call);
    w.set("flops_per_call", t.flops_per_call);
    j.set("workload", std::move(w));
  }
  if (t.ceilings.peak_bytes_per_s > 0 || t.ceilings.peak_flops > 0) {
    Json c = Json::object();
    c.set("peak_bytes_per_s", t.ceilings.peak_bytes_per_s);
    c.set("peak_flops", t.ceilings.peak_flops);
    c.set("source", t.ceilings.source);
    j.set("device_ceilings", std::move(c));
  }
  if (t.device_index >= 0) j.set("device_index", t.device_index);
  if (!t.compiler_version.empty()) j.set("compiler_version", t.compiler_version);
  r.candidates_json = j.dump();
  return r;
}

TuningResult from_tuning_record(const cache::TuningRecord& r) {
  RowReader rd(r);
  Json j;
  try {
    j = Json::parse(r.candidates_json);
  } catch (const cache::JsonError& e) {
    throw Error(Status::cache_error, "autotune",
                fmt::format("tuning row {}/{}: candidates_json: expected JSON, got a parse error ({})", r.family,
                            r.problem_key, e.what()));
  }
  if (!j.is_object()) rd.fail("candidates_json", "an object", &j);
  std::string format = rd.string(j, "", "format");
  if (format != kFormat) rd.fail("format", fmt::format("\"{}\"", kFormat), &j.at("format"));

  TuningResult t;
  t.family = rd.string(j, "", "family");
  t.problem_key = rd.string(j, "", "problem_key");
  t.device_fingerprint = rd.string(j, "", "device_fingerprint");
  t.ktune_version = rd.string(j, "", "ktune_version");
  rd.same(t.family, r.family, "family");
  rd.same(t.problem_key, r.problem_key, "problem_key");
  rd.same(t.device_fingerprint, r.device_fingerprint, "device_fingerprint");
  rd.same(t.ktune_version, r.ktune_version, "ktune_version");
  t.tuned_at = rd.integer(j, "", "tuned_at", 0);
  t.noise_fraction = rd.non_negative(j, "", "noise_fraction");
  std::string winner = rd.string(j, "", "winner");
  rd.same(winner, r.winner_config, "winner");

  const Json& list = rd.field(j, "", "candidates", "a non-empty array");
  if (!list.is_array() || list.size() == 0) rd.fail("candidates", "a non-empty array", &list);
  std::set<std::string> configs;
  bool found = false;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string path = fmt::format("candidates[{}]", i);
    CandidateResult c = read_candidate(rd, list.at(i), path);
    if (!configs.insert(c.config).second) rd.fail(path + ".config", "each config once", &list.at(i).at("config"));
    if (c.config == winner) {
      if (!c.ok) rd.fail("winner", "a candidate that ran", &j.at("winner"));
      t.winner = i;
      found = true;
    }
    t.candidates.push_back(std::move(c));
  }
  if (!found) rd.fail("winner", "one of the candidates' configs", &j.at("winner"));
  if (const Json* w = j.find("workload")) {  // optional: rows written before it existed lack it
    if (!w->is_object()) rd.fail("workload", "an object", w);
    t.bytes_per_call = rd.non_negative(*w, "workload.", "bytes_per_call");
    t.flops_per_call = rd.non_negative(*w, "workload.", "flops_per_call");
  }
  if (const Json* c = j.find("device_ceilings")) {
    if (!c->is_object()) rd.fail("device_ceilings", "an object", c);
    t.ceilings.peak_bytes_per_s = rd.non_negative(*c, "device_ceilings.", "peak_bytes_per_s");
    t.ceilings.peak_flops = rd.non_negative(*c, "device_ceilings.", "peak_flops");
    t.ceilings.source = rd.string(*c, "device_ceilings.", "source");
  }
  if (j.contains("device_index")) t.device_index = static_cast<int>(rd.integer(j, "", "device_index", 0));
  if (j.contains("compiler_version")) {
    t.compiler_version = rd.string(j, "", "compiler_version");
    if (t.compiler_version.empty()) rd.fail("compiler_version", "a compiler version", &j.at("compiler_version"));
  }
  return t;
}

}  // namespace ktune::autotune
