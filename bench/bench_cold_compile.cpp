// Cold compile per kernel (no GPU needed): every kernel `ktune compile --family F --arch A` builds, compiled by
// NVRTC on one thread exactly as the runtime compiles it, without and with nvrtc_speed_options (and with
// --pch: also with NVRTC's automatic precompiled headers), the modes in rotating order. Prints per family the
// median over kernels of each kernel's median wall and thread-CPU time, NVRTC's phases (its --time table:
// front end, NVVM optimizer, ptxas), and whether every CUBIN is byte-identical across modes and repetitions
// (exit 1 if not). --trace: one more compile per kernel (speed options on) with NVRTC's --fdevice-time-trace,
// whose per-function events give each entry point's NVVM and ptxas time, so a module's cost splits by kernel.
// A family's shared modules (one per problem: split-KV combine, helpers) are summed up in a row of their own,
// "<family> shared". Run through bench/cold_compile.sh.
// --first-call: instead, per problem of a family with shared modules, what a cold first call of an op compiles:
// its default config's module and the shared module, one after the other against the shared one on a second
// thread (the op's first call, launch_support::start_binary), median wall of --reps.
//   bench_cold_compile [--arch sm_90a] [--family F] [--all-configs] [--pch] [--trace] [--reps 3] [--json OUT]
//   bench_cold_compile --first-call [--arch sm_90a] [--family F] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_args.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/nvrtc_jobs.hpp"

using namespace ktune;
using bench_args::arg;
using bench_args::flag;
using cache::Json;
using detail::SpeedOptions;

namespace {

struct Sample {
  double wall_ms, cpu_ms;
};

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// The rows of NVRTC's `--time=-` table in the log ("file, CUDA C++ Frontend, 72, ms"), by phase name.
std::map<std::string, double> phases(const std::string& log) {
  std::map<std::string, double> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string c; std::getline(row, c, ',');) cells.push_back(c.substr(c.find_first_not_of(' ')));
    if (cells.size() == 4 && cells[3] == "ms") {
      try {
        out[cells[1]] += std::stod(cells[2]);
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

// One way of compiling: the runtime's key options plus `extra`, with or without the speed options.
struct Mode {
  std::string name;
  SpeedOptions speed;
  std::vector<std::string> extra;
};

// One entry point's share of a module's compile, from NVRTC's time trace.
struct EntryTime {
  std::string entry;  // as the family names it ("ktune_xqa::combine_kernel<ktune_xqa::Spec>")
  double nvvm_ms = 0, ptxas_ms = 0;
};
struct Trace {
  double frontend_ms = 0;
  std::vector<EntryTime> entries;
};

struct KernelResult {
  std::string name;
  std::vector<std::vector<double>> wall, cpu;                  // per mode, per rep
  std::vector<std::map<std::string, std::vector<double>>> phase;  // per mode, per phase name, per rep
  bool identical = true;                            // every mode, every rep: the same CUBIN
  size_t cubin_bytes = 0;
  Trace trace;  // --trace only
};

detail::CompiledBinary compile(const test::NvrtcJob& job, const Mode& mode, Sample* s,
                               const std::vector<std::string>& extra = {}) {
  std::vector<std::string> opts = job.options;
  opts.insert(opts.end(), mode.extra.begin(), mode.extra.end());
  opts.insert(opts.end(), extra.begin(), extra.end());
  const double c0 = thread_cpu_ms();
  const auto w0 = std::chrono::steady_clock::now();
  detail::CompiledBinary b = detail::compile_with_nvrtc(job.kernel, job.arch, opts, mode.speed);
  if (s) {
    s->wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    s->cpu_ms = thread_cpu_ms() - c0;
  }
  return b;
}

// Compiles once with --fdevice-time-trace into a private file and sums, per entry point, the trace's NVVM
// "OptFunction" events (args.detail: the lowered name) and its ptxas "Optimizing compilation unit" events
// (args.name: the lowered name).
Trace trace_compile(const test::NvrtcJob& job, const Mode& mode) {
  char tmpl[] = "/tmp/ktune_bench_trace_XXXXXX";
  if (!mkdtemp(tmpl)) throw Error(Status::internal, "bench", "mkdtemp failed");
  const std::string dir = tmpl, path = dir + "/trace.json";
  const detail::CompiledBinary b = compile(job, mode, nullptr, {"--fdevice-time-trace=" + path});
  std::string file = std::filesystem::exists(path) ? path : path + ".json";  // NVRTC 13 appends ".json"
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove_all(dir);
  if (text.str().empty()) throw Error(Status::internal, "bench", "NVRTC wrote no time trace for " + job.name);
  const Json doc = Json::parse(text.str());
  const Json& events = doc.is_object() ? doc.at("traceEvents") : doc;
  Trace t;
  for (size_t i = 0; i < job.kernel.entry_points.size(); ++i) t.entries.push_back({job.kernel.entry_points[i]});
  for (const Json& e : events.items()) {
    if (!e.is_object() || e.get_string("ph") != "X") continue;
    const std::string name = e.get_string("name");
    const double ms = e.get_number("dur", 0) / 1e3;
    if (name == "CUDA C++ Front-End") t.frontend_ms += ms;
    const Json* args = e.find("args");
    if (!args || !args->is_object()) continue;
    const std::string fn = name == "OptFunction" ? args->get_string("detail")
                           : name == "Optimizing compilation unit" ? args->get_string("name") : std::string();
    for (size_t i = 0; i < b.lowered_names.size() && !fn.empty(); ++i)
      if (fn == b.lowered_names[i]) (name == "OptFunction" ? t.entries[i].nvvm_ms : t.entries[i].ptxas_ms) += ms;
  }
  return t;
}

double wall_ms(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// --first-call: the config's module and the shared module of each example problem, in turn and on two threads.
int first_call(const Arch& arch, const std::string& only, int reps) {
  const Mode shipped{"on", SpeedOptions::on, {}};
  fmt::print("cold first call of an op: its config module and its shared module (speed options on), arch {}, {} "
             "reps, {} hardware threads; load average {}\n\n| problem | config module ms | shared module ms | one after "
             "the other ms | on two threads ms | saved |\n|---|---|---|---|---|---|\n",
             arch.str(), reps, std::thread::hardware_concurrency(), loadavg());
  for (const FamilyInfo& f : families()) {
    if (!only.empty() && f.name != only) continue;
    for (const std::string& p : f.example_problems()) {
      if (shared_module_configs(f, p, arch).empty()) continue;
      const test::NvrtcJob config = test::nvrtc_job(f, p, f.default_config(p, arch), arch);
      const test::NvrtcJob shared = test::nvrtc_job(f, p, kSharedConfig, arch);
      compile(config, shipped, nullptr);  // NVRTC's own start-up, untimed
      std::vector<double> c_ms, s_ms, seq, par;
      for (int rep = 0; rep < reps; ++rep) {
        c_ms.push_back(wall_ms([&] { compile(config, shipped, nullptr); }));
        s_ms.push_back(wall_ms([&] { compile(shared, shipped, nullptr); }));
        seq.push_back(c_ms.back() + s_ms.back());  // one after the other, as a first call did
        par.push_back(wall_ms([&] {
          std::thread second([&] { compile(shared, shipped, nullptr); });
          compile(config, shipped, nullptr);
          second.join();
        }));
      }
      const double a = median(seq), b = median(par);
      fmt::print("| {} {} / {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} ms ({:.0f}%) |\n", f.name, p,
                 config.kernel.config_key, median(c_ms), median(s_ms), a, b, a - b, 100.0 * (a - b) / a);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const Arch arch = Arch::parse(arg(argc, argv, "arch", "sm_90a"));
  const std::string only = arg(argc, argv, "family", "");
  const bool all_configs = flag(argc, argv, "all-configs");
  const int reps = std::stoi(arg(argc, argv, "reps", "3"));
  const std::string json_out = arg(argc, argv, "json", "");
  const bool trace = flag(argc, argv, "trace");
  if (reps < 1) throw Error(Status::invalid_argument, "bench", "--reps: expected at least 1");
  if (flag(argc, argv, "first-call")) return first_call(arch, only, reps);

  const auto& api = detail::nvrtc();
  const auto speed = detail::nvrtc_speed_options(api.version);
  std::vector<Mode> modes = {{"off", SpeedOptions::off, {}}, {"on", SpeedOptions::on, {}}};
  std::string pch_dir;
  if (flag(argc, argv, "pch")) {
    // NVRTC's automatic precompiled headers, kept in a private directory of this process (0700, removed at
    // exit) rather than NVRTC's default under /tmp.
    char tmpl[] = "/tmp/ktune_bench_pch_XXXXXX";
    if (!mkdtemp(tmpl)) throw Error(Status::internal, "bench", "mkdtemp failed");
    pch_dir = tmpl;
    modes.push_back({"on+pch", SpeedOptions::on, {"--pch", "--pch-dir=" + pch_dir, "--pch-messages=false"}});
  }
  const size_t nm = modes.size();
  const std::string load_before = loadavg();
  fmt::print("NVRTC {} ({}); speed options: [{}]; arch {}; {} configs; {} reps; load average {}\n", api.version,
             api.library_path, fmt::join(speed, " "), arch.str(), all_configs ? "all" : "default", reps,
             load_before);

  std::map<std::string, std::vector<KernelResult>> by_family;
  std::vector<std::string> order;
  bool all_identical = true;
  for (const FamilyInfo& f : families()) {
    if (!only.empty() && f.name != only) continue;
    std::vector<test::NvrtcJob> jobs = test::nvrtc_jobs(f, arch, all_configs);
    if (jobs.empty()) continue;
    // One untimed compile first: the first compile in a process pays NVRTC's own start-up, not the kernel's.
    compile(jobs.front(), modes[1], nullptr);
    for (const auto& job : jobs) {
      // A family's shared modules (compiled once per problem, not per config) get a row of their own.
      const std::string group = job.kernel.config_key == kSharedConfig ? f.name + " shared" : f.name;
      if (std::find(order.begin(), order.end(), group) == order.end()) order.push_back(group);
      auto& results = by_family[group];
      KernelResult r;
      r.name = job.name;
      r.wall.resize(nm);
      r.cpu.resize(nm);
      r.phase.resize(nm);
      std::vector<uint8_t> first;
      for (int rep = 0; rep < reps; ++rep) {
        for (size_t k = 0; k < nm; ++k) {
          const size_t m = (rep + k) % nm;  // rotate which mode goes first
          Sample s{};
          auto b = compile(job, modes[m], &s);
          r.wall[m].push_back(s.wall_ms);
          r.cpu[m].push_back(s.cpu_ms);
          if (first.empty()) first = b.cubin;
          r.identical = r.identical && b.cubin == first;
          // The phases from a compile of its own, so the timed one above runs exactly the shipped options.
          for (const auto& [name, ms] : phases(compile(job, modes[m], nullptr, {"--time=-"}).log))
            r.phase[m][name].push_back(ms);
        }
      }
      r.cubin_bytes = first.size();
      all_identical = all_identical && r.identical;
      fmt::print("  {:<90}", r.name);
      for (size_t m = 0; m < nm; ++m) fmt::print(" {} {:5.0f} ms", modes[m].name, median(r.wall[m]));
      fmt::print("  {}\n", r.identical ? "identical" : "CUBIN DIFFERS");
      if (trace) {
        r.trace = trace_compile(job, modes[1]);
        fmt::print("      trace: front end {:.0f} ms", r.trace.frontend_ms);
        for (const EntryTime& e : r.trace.entries)
          fmt::print("; {} NVVM {:.0f} ptxas {:.0f}", e.entry.substr(0, e.entry.find('<')), e.nvvm_ms, e.ptxas_ms);
        fmt::print(" ms\n");
      }
      std::fflush(stdout);
      results.push_back(std::move(r));
    }
  }
  if (!pch_dir.empty()) std::filesystem::remove_all(pch_dir);

  // Per family and mode: the median over kernels of each kernel's median over repetitions; "best" takes each
  // kernel's fastest repetition instead (the least disturbed by other load on the machine).
  const char* kPhases[] = {"CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation"};
  fmt::print("\n| family | mode | kernels | wall ms | wall ms, best | CPU ms | front end ms | NVVM ms | ptxas ms | "
             "CUBIN identical |\n|---|---|---|---|---|---|---|---|---|---|\n");
  Json json_families = Json::array();
  for (size_t fi = 0; fi < order.size(); ++fi) {
    const auto& rs = by_family[order[fi]];
    auto over_kernels = [&](auto get) {
      std::vector<double> v;
      for (const auto& r : rs) v.push_back(get(r));
      return median(v);
    };
    const size_t same = std::count_if(rs.begin(), rs.end(), [](const KernelResult& r) { return r.identical; });
    Json json_modes = Json::object();
    for (size_t m = 0; m < nm; ++m) {
      const double wall = over_kernels([&](const KernelResult& r) { return median(r.wall[m]); });
      const double best =
          over_kernels([&](const KernelResult& r) { return *std::min_element(r.wall[m].begin(), r.wall[m].end()); });
      const double cpu = over_kernels([&](const KernelResult& r) { return median(r.cpu[m]); });
      double ph[3];
      for (int p = 0; p < 3; ++p)
        ph[p] = over_kernels([&](const KernelResult& r) {
          auto it = r.phase[m].find(kPhases[p]);
          return it == r.phase[m].end() ? 0.0 : median(it->second);
        });
      fmt::print("| {} | {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {}/{} |\n", order[fi],
                 modes[m].name, rs.size(), wall, best, cpu, ph[0], ph[1], ph[2], same, rs.size());
      json_modes.set(modes[m].name, Json::object()
                                        .set("median_wall_ms", wall).set("best_wall_ms", best).set("cpu_ms", cpu)
                                        .set("frontend_ms", ph[0]).set("nvvm_ms", ph[1]).set("ptxas_ms", ph[2]));
    }
    Json per_kernel = Json::array();
    for (const KernelResult& r : rs) {
      Json k = Json::object().set("name", r.name).set("cubin_bytes", static_cast<int64_t>(r.cubin_bytes))
                   .set("identical", r.identical);
      for (size_t m = 0; m < nm; ++m) k.set("wall_ms_" + modes[m].name, median(r.wall[m]));
      if (trace) {
        Json entries = Json::array();
        for (const EntryTime& e : r.trace.entries)
          entries.push(Json::object().set("entry", e.entry).set("nvvm_ms", e.nvvm_ms).set("ptxas_ms", e.ptxas_ms));
        k.set("trace", Json::object().set("frontend_ms", r.trace.frontend_ms).set("entries", std::move(entries)));
      }
      per_kernel.push(std::move(k));
    }
    json_families.push(Json::object()
                           .set("family", order[fi]).set("kernels", static_cast<int64_t>(rs.size()))
                           .set("identical", same == rs.size()).set("modes", std::move(json_modes))
                           .set("per_kernel", std::move(per_kernel)));
  }
  const std::string load_after = loadavg();
  fmt::print("load average after: {}\n", load_after);
  if (!json_out.empty())
    std::ofstream(json_out) << Json::object()
                                   .set("nvrtc", api.version).set("arch", arch.str()).set("all_configs", all_configs)
                                   .set("reps", reps).set("speed_options", fmt::format("{}", fmt::join(speed, " ")))
                                   .set("load_before", load_before).set("families", std::move(json_families))
                                   .set("load_after", load_after)
                                   .dump()
                            << "\n";
  if (!all_identical) {
    fmt::print(stderr, "FAILED: a CUBIN differs between the modes\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_cold_compile: {}\n", e.what());
  return 1;
}
