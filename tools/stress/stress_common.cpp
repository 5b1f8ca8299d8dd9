#include "stress_common.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "ktune/cache/sha256.hpp"

namespace ktune::stress {

Options::Options(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw std::runtime_error("unexpected argument '" + a + "'");
    a = a.substr(2);
    std::string value = "1";
    if (size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      value = argv[++i];
    }
    values_[a] = value;
    used_[a] = false;
  }
}

int Options::num(const std::string& name, int fallback) {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  used_[name] = true;
  size_t pos = 0;
  int v = std::stoi(it->second, &pos);
  if (pos != it->second.size() || v < 0) throw std::runtime_error("--" + name + ": expected a non-negative integer");
  return v;
}

std::string Options::str(const std::string& name, const std::string& fallback) {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  used_[name] = true;
  return it->second;
}

bool Options::flag(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  used_[name] = true;
  return it->second != "0";
}

void Options::done() {
  for (const auto& [k, used] : used_)
    if (!used) throw std::runtime_error("unknown option --" + k + " for this mode");
}

void Report::count(const std::string& name, int64_t value, bool must_be_zero) {
  rows_.emplace_back(name, cache::Json(value));
  if (must_be_zero && value != 0) failures_.push_back(fmt::format("{} = {} (must be 0)", name, value));
}

void Report::text(const std::string& name, const std::string& value, const std::string& required) {
  rows_.emplace_back(name, cache::Json(value));
  if (!required.empty() && value != required)
    failures_.push_back(fmt::format("{} = {} (must be {})", name, value, required));
}

void Report::fail(const std::string& why) { failures_.push_back(why); }

int Report::finish(const std::string& json_path, double seconds) const {
  fmt::print("ktune_stress {}: {:.1f} s\n", mode_, seconds);
  for (const auto& [k, v] : rows_) fmt::print("  {:<34} {}\n", k, v.dump());
  for (const auto& f : failures_) fmt::print("  FAILED: {}\n", f);
  fmt::print("RESULT {} {}\n", mode_, failures_.empty() ? "ok" : "FAILED");
  if (!json_path.empty()) {
    cache::Json body = cache::Json::object().set("mode", mode_).set("ok", failures_.empty()).set("seconds", seconds);
    for (const auto& [k, v] : rows_) body.set(k, v);
    cache::Json failures = cache::Json::array();
    for (const auto& f : failures_) failures.push(f);
    body.set("failures", std::move(failures));
    std::ofstream(json_path) << body.dump() << "\n";
  }
  return failures_.empty() ? 0 : 1;
}

namespace {

std::vector<uint8_t> blob_for(const std::string& key, size_t size) {
  // A keyed stream: sha256(key) seeds an LCG, so every byte depends on the key.
  const auto seed = cache::Sha256().update(key).digest();
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | seed[i];
  std::vector<uint8_t> b(size);
  for (auto& v : b) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<uint8_t>(x >> 56);
  }
  return b;
}

}  // namespace

cache::BinaryRecord make_record(const std::string& key, size_t blob_size) {
  cache::BinaryRecord r;
  r.digest = cache::sha256_hex(key);
  r.family = "stress";
  r.name = "stress/sm_90a/" + key;
  r.arch = "sm_90a";
  r.compiler = "nvrtc";
  r.compiler_version = "13.0.88";
  r.options = "--gpu-architecture=sm_90a -std=c++17";
  r.source_digest = cache::sha256_hex("source of " + key);
  r.ktune_version = "0.1.0";
  r.schema_version = 1;
  r.entry_points = "_Z6kernelv\n_Z7combinev";
  r.blob = blob_for(key, blob_size);
  r.compile_ms = static_cast<double>(blob_size % 997) / 10.0;
  r.created_at = 1700000000;
  return r;
}

bool is_whole(const cache::BinaryRecord& r) {
  const std::string prefix = "stress/sm_90a/";
  if (r.name.rfind(prefix, 0) != 0) return false;
  cache::BinaryRecord want = make_record(r.name.substr(prefix.size()), r.blob.size());
  return want.digest == r.digest && want.family == r.family && want.arch == r.arch && want.compiler == r.compiler &&
         want.compiler_version == r.compiler_version && want.options == r.options &&
         want.source_digest == r.source_digest && want.entry_points == r.entry_points && want.blob == r.blob &&
         want.compile_ms == r.compile_ms;
}

cache::TuningRecord make_tuning(const std::string& key, const std::string& winner) {
  cache::TuningRecord t;
  t.family = "stress";
  t.problem_key = key;
  t.device_fingerprint = "NVIDIA H200|9.0|132|580|13000";
  t.ktune_version = "0.1.0";
  t.winner_config = winner;
  t.candidates_json = "[{\"config\":\"" + winner + "\",\"us\":1.5}]";
  return t;
}

pid_t spawn(const std::function<int()>& fn) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", static_cast<int>(::getpid()), e.what());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(rc);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 255;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

std::string temp_dir(const std::string& tag) {
  static int counter = 0;
  auto p = std::filesystem::temp_directory_path() /
           fmt::format("ktune-stress-{}-{}-{}", tag, static_cast<long>(::getpid()), counter++);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string integrity_check(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    return msg;
  }
  sqlite3_busy_timeout(db, 30000);
  sqlite3_stmt* st = nullptr;
  std::string out = "no result";
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    else out = sqlite3_errmsg(db);
  } else {
    out = sqlite3_errmsg(db);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

}  // namespace ktune::stress
