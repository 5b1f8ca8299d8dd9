#include "autotune/worker_protocol.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"

namespace ktune::autotune {

using cache::Json;

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& line) {
  std::string shown = line.size() > 200 ? line.substr(0, 197) + "..." : line;
  throw Error(Status::internal, "warmup", fmt::format("worker message: {}: got '{}'", what, shown));
}

Json parse_object(const std::string& line) {
  Json j;
  try {
    j = Json::parse(line);
  } catch (const cache::JsonError& e) {
    bad(fmt::format("expected one JSON object ({})", e.what()), line);
  }
  if (!j.is_object()) bad("expected a JSON object", line);
  return j;
}

std::string text(const Json& j, const char* key, const std::string& line) {
  const Json* v = j.find(key);
  if (!v || !v->is_string()) bad(fmt::format("{}: expected a string", key), line);
  return v->as_string();
}

double number(const Json& j, const char* key, const std::string& line) {
  const Json* v = j.find(key);
  if (!v || !v->is_number()) bad(fmt::format("{}: expected a number", key), line);
  return v->as_number();
}

int64_t integer(const Json& j, const char* key, const std::string& line) {
  const Json* v = j.find(key);
  if (!v || !v->is_int()) bad(fmt::format("{}: expected an integer", key), line);
  return v->as_int();
}

}  // namespace

std::string encode(const WorkerHello& m) {
  Json j = Json::object();
  if (!m.fatal.empty()) return j.set("fatal", m.fatal).dump();
  return j.set("hello", 1).set("arch", m.arch).set("fingerprint", m.fingerprint).dump();
}

std::string encode(const TuneTask& m) {
  Json buckets = Json::array();
  for (const auto& [dim, value] : m.buckets) buckets.push(Json::array().push(dim).push(value));
  Json measure = Json::object();
  measure.set("warmup_iters", m.measure.warmup_iters).set("samples", m.measure.samples)
      .set("iters_per_sample", m.measure.iters_per_sample).set("max_spread", m.measure.max_spread)
      .set("max_rounds", m.measure.max_rounds);
  Json j = Json::object();
  j.set("task", m.id).set("family", m.family).set("problem_key", m.problem_key).set("buckets", std::move(buckets))
      .set("noise_fraction", m.noise_fraction).set("measure", std::move(measure)).set("compile_jobs", m.compile_jobs)
      .set("retune", m.retune).set("flight_wait_s", m.flight_wait_s);
  return j.dump();
}

std::string encode(const TaskResult& m) {
  Json j = Json::object();
  return j.set("task", m.id).set("status", m.status).set("winner", m.winner).set("ms", m.ms).dump();
}

WorkerHello decode_hello(const std::string& line) {
  Json j = parse_object(line);
  WorkerHello m;
  if (j.contains("fatal")) {
    m.fatal = text(j, "fatal", line);
    if (m.fatal.empty()) m.fatal = "the worker failed to start (no reason given)";
    return m;
  }
  if (integer(j, "hello", line) != 1) bad("hello: expected 1", line);
  m.arch = text(j, "arch", line);
  m.fingerprint = text(j, "fingerprint", line);
  if (m.arch.empty() || m.fingerprint.empty()) bad("arch, fingerprint: expected non-empty strings", line);
  return m;
}

TuneTask decode_task(const std::string& line) {
  Json j = parse_object(line);
  TuneTask m;
  m.id = integer(j, "task", line);
  m.family = text(j, "family", line);
  m.problem_key = text(j, "problem_key", line);
  const Json* buckets = j.find("buckets");
  if (!buckets || !buckets->is_array()) bad("buckets: expected an array", line);
  for (size_t i = 0; i < buckets->size(); ++i) {
    const Json& b = buckets->at(i);
    if (!b.is_array() || b.size() != 2 || !b.at(0).is_string() || !b.at(1).is_int())
      bad(fmt::format("buckets[{}]: expected [\"dim\", value]", i), line);
    m.buckets.emplace_back(b.at(0).as_string(), b.at(1).as_int());
  }
  m.noise_fraction = number(j, "noise_fraction", line);
  const Json* measure = j.find("measure");
  if (!measure || !measure->is_object()) bad("measure: expected an object", line);
  m.measure.warmup_iters = static_cast<int>(integer(*measure, "warmup_iters", line));
  m.measure.samples = static_cast<int>(integer(*measure, "samples", line));
  m.measure.iters_per_sample = static_cast<int>(integer(*measure, "iters_per_sample", line));
  m.measure.max_spread = number(*measure, "max_spread", line);
  m.measure.max_rounds = static_cast<int>(integer(*measure, "max_rounds", line));
  m.compile_jobs = static_cast<int>(integer(j, "compile_jobs", line));
  const Json* retune = j.find("retune");
  if (!retune || !retune->is_bool()) bad("retune: expected true or false", line);
  m.retune = retune->as_bool();
  m.flight_wait_s = number(j, "flight_wait_s", line);
  if (!(m.flight_wait_s >= 0)) bad("flight_wait_s: expected a number >= 0", line);
  return m;
}

TaskResult decode_result(const std::string& line) {
  Json j = parse_object(line);
  TaskResult m;
  m.id = integer(j, "task", line);
  m.status = text(j, "status", line);
  m.winner = text(j, "winner", line);
  m.ms = number(j, "ms", line);
  if (m.status.empty()) bad("status: expected a non-empty string", line);
  return m;
}

bool LineChannel::send_line(const std::string& line) {
  std::string data = line + "\n";
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool LineChannel::fill() {
  char chunk[65536];
  // The first read may block (a caller waiting for a line); then everything already there is drained without
  // blocking, so a message longer than one read is whole before the caller judges the peer.
  bool first = true;
  for (;;) {
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, first ? 0 : MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !first && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    first = false;
    if (buffer_.size() >= kMaxLine) return true;  // buffered_line refuses it
  }
}

std::optional<std::string> LineChannel::buffered_line() {
  const size_t nl = buffer_.find('\n', scanned_);
  if (nl == std::string::npos) {
    scanned_ = buffer_.size();
    if (buffer_.size() >= kMaxLine)
      throw Error(Status::internal, "warmup",
                  fmt::format("a line of more than {} bytes without an end: not a message of the protocol", kMaxLine));
    return std::nullopt;
  }
  std::string line = buffer_.substr(0, nl);
  buffer_.erase(0, nl + 1);
  scanned_ = 0;
  return line;
}

std::optional<std::string> LineChannel::read_line() {
  for (;;) {
    if (auto line = buffered_line()) return line;
    if (!fill()) return buffered_line();  // a last line may have come with the end of stream
  }
}

}  // namespace ktune::autotune
