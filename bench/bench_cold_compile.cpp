// Cold compile per kernel (no GPU needed): every kernel `ktune compile --family F --arch A` builds, compiled by
// NVRTC on one thread exactly as the runtime compiles it, with and without nvrtc_speed_options, in alternating
// order. Prints per family the median over kernels of each kernel's median wall and CPU time, the median NVRTC
// phases (its --time table: front end, NVVM optimizer, ptxas), and whether every CUBIN is byte-identical
// between the two modes (exit 1 if not). Run through bench/cold_compile.sh.
//   bench_cold_compile [--arch sm_90a] [--family F] [--all-configs] [--reps 3] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/nvrtc_jobs.hpp"

using namespace ktune;
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

struct KernelResult {
  std::string name;
  std::vector<double> wall[2], cpu[2];  // [0] speed options off, [1] on
  std::map<std::string, double> phase[2];
  bool identical = true;
  size_t cubin_bytes = 0;
};

detail::CompiledBinary compile(const test::NvrtcJob& job, SpeedOptions mode, Sample* s,
                               const std::vector<std::string>& extra = {}) {
  std::vector<std::string> opts = job.options;
  opts.insert(opts.end(), extra.begin(), extra.end());
  const double c0 = thread_cpu_ms();
  const auto w0 = std::chrono::steady_clock::now();
  detail::CompiledBinary b = detail::compile_with_nvrtc(job.kernel, job.arch, opts, mode);
  if (s) {
    s->wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
    s->cpu_ms = thread_cpu_ms() - c0;
  }
  return b;
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

bool flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == "--" + name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) try {
  const Arch arch = Arch::parse(arg(argc, argv, "arch", "sm_90a"));
  const std::string only = arg(argc, argv, "family", "");
  const bool all_configs = flag(argc, argv, "all-configs");
  const int reps = std::stoi(arg(argc, argv, "reps", "3"));
  const std::string json_out = arg(argc, argv, "json", "");
  if (reps < 1) throw Error(Status::invalid_argument, "bench", "--reps: expected at least 1");

  const auto& api = detail::nvrtc();
  const auto speed = detail::nvrtc_speed_options(api.version);
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
    order.push_back(f.name);
    // One untimed compile first: the first compile in a process pays NVRTC's own start-up, not the kernel's.
    compile(jobs.front(), SpeedOptions::on, nullptr);
    auto& results = by_family[f.name];
    for (const auto& job : jobs) {
      KernelResult r;
      r.name = job.name;
      std::vector<uint8_t> cubin[2];
      for (int rep = 0; rep < reps; ++rep) {
        for (int k = 0; k < 2; ++k) {
          const int mode = (rep + k) % 2;  // alternate which mode goes first
          Sample s{};
          auto b = compile(job, mode ? SpeedOptions::on : SpeedOptions::off, &s);
          r.wall[mode].push_back(s.wall_ms);
          r.cpu[mode].push_back(s.cpu_ms);
          if (cubin[mode].empty()) cubin[mode] = b.cubin;
          r.identical = r.identical && b.cubin == cubin[mode];
        }
      }
      r.identical = r.identical && cubin[0] == cubin[1];
      r.cubin_bytes = cubin[1].size();
      for (int mode = 0; mode < 2; ++mode)
        r.phase[mode] = phases(compile(job, mode ? SpeedOptions::on : SpeedOptions::off, nullptr, {"--time=-"}).log);
      all_identical = all_identical && r.identical;
      fmt::print("  {:<90} off {:6.0f} ms  on {:6.0f} ms  {}\n", r.name, median(r.wall[0]), median(r.wall[1]),
                 r.identical ? "identical" : "CUBIN DIFFERS");
      std::fflush(stdout);
      results.push_back(std::move(r));
    }
  }

  const char* kPhases[] = {"CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation"};
  fmt::print("\n| family | kernels | wall ms off | wall ms on | CPU ms off | CPU ms on | front end off / on | NVVM | "
             "ptxas | CUBIN identical |\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::string json = fmt::format("{{\"nvrtc\": \"{}\", \"arch\": \"{}\", \"all_configs\": {}, \"reps\": {}, "
                                 "\"speed_options\": \"{}\", \"load_before\": \"{}\", \"families\": [",
                                 api.version, arch.str(), all_configs, reps, fmt::join(speed, " "), load_before);
  for (size_t fi = 0; fi < order.size(); ++fi) {
    const auto& rs = by_family[order[fi]];
    auto med = [&](auto get) {
      std::vector<double> v;
      for (const auto& r : rs) v.push_back(get(r));
      return median(v);
    };
    double wall[2], cpu[2], ph[2][3];
    for (int m = 0; m < 2; ++m) {
      wall[m] = med([&](const KernelResult& r) { return median(r.wall[m]); });
      cpu[m] = med([&](const KernelResult& r) { return median(r.cpu[m]); });
      for (int p = 0; p < 3; ++p)
        ph[m][p] = med([&](const KernelResult& r) {
          auto it = r.phase[m].find(kPhases[p]);
          return it == r.phase[m].end() ? 0.0 : it->second;
        });
    }
    const size_t same = std::count_if(rs.begin(), rs.end(), [](const KernelResult& r) { return r.identical; });
    fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} / {:.0f} | {:.0f} | {:.0f} | {}/{} |\n",
               order[fi], rs.size(), wall[0], wall[1], cpu[0], cpu[1], ph[0][0], ph[1][0], ph[1][1], ph[1][2], same,
               rs.size());
    json += fmt::format(
        "{}{{\"family\": \"{}\", \"kernels\": {}, \"median_wall_ms\": {{\"off\": {:.1f}, \"on\": {:.1f}}}, "
        "\"median_cpu_ms\": {{\"off\": {:.1f}, \"on\": {:.1f}}}, \"median_phase_ms_on\": {{\"frontend\": {:.1f}, "
        "\"nvvm\": {:.1f}, \"ptxas\": {:.1f}}}, \"median_frontend_ms_off\": {:.1f}, \"identical\": {}, \"per_kernel\": [",
        fi ? ", " : "", order[fi], rs.size(), wall[0], wall[1], cpu[0], cpu[1], ph[1][0], ph[1][1], ph[1][2], ph[0][0],
        same == rs.size());
    for (size_t i = 0; i < rs.size(); ++i)
      json += fmt::format("{}{{\"name\": \"{}\", \"wall_ms_off\": {:.1f}, \"wall_ms_on\": {:.1f}, \"cubin_bytes\": {}, "
                          "\"identical\": {}}}",
                          i ? ", " : "", rs[i].name, median(rs[i].wall[0]), median(rs[i].wall[1]), rs[i].cubin_bytes,
                          rs[i].identical);
    json += "]}";
  }
  const std::string load_after = loadavg();
  json += fmt::format("], \"load_after\": \"{}\"}}\n", load_after);
  fmt::print("load average after: {}\n", load_after);
  if (!json_out.empty()) std::ofstream(json_out) << json;
  if (!all_identical) {
    fmt::print(stderr, "FAILED: a CUBIN differs with and without the speed options\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_cold_compile: {}\n", e.what());
  return 1;
}
