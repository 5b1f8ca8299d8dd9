// One NVRTC compile of a generated kernel source with the runtime's options, timed by NVRTC's own
// --fdevice-time-trace: prints "front_ms nvvm_ms ptxas_ms wall_ms" (front end, NVVM optimizer + code
// generation, ptxas) for bench/dev/mla_compile_parts.sh. Templates come from an include directory, so a
// modified copy of templates/ can be timed against the shipped one.
//   nvrtc_phases SOURCE.cu TEMPLATES_DIR ENTRY [ARCH [OPTION...]]
// Options after ARCH are added to the runtime's (e.g. -Xptxas=-O2, to time settings that change the CUBIN);
// with KTUNE_PHASES_CUBIN=FILE set, the CUBIN is written there; with KTUNE_PHASES_LOG set, NVRTC's log goes to
// stderr (with -Xptxas=-v: registers, spills and stack frame per function).
#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool ok(nvrtcResult r, const char* what) {
  if (r == NVRTC_SUCCESS) return true;
  std::fprintf(stderr, "nvrtc_phases: %s: %s\n", what, nvrtcGetErrorString(r));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: nvrtc_phases SOURCE.cu TEMPLATES_DIR ENTRY [ARCH]\n");
    return 2;
  }
  const std::string src = slurp(argv[1]), include = std::string("-I") + argv[2];
  const std::string arch = std::string("--gpu-architecture=") + (argc > 4 ? argv[4] : "sm_90a");
  char trace_dir[] = "/tmp/nvrtc_phases_XXXXXX";
  if (!mkdtemp(trace_dir)) return 1;
  const std::string trace = std::string("--fdevice-time-trace=") + trace_dir + "/t";
  // The runtime's options (runtime/src/nvrtc_compiler.cpp: nvrtc_options + nvrtc_speed_options).
  std::vector<const char*> opts = {arch.c_str(), "--std=c++17", "--device-as-default-execution-space",
                                   "-DKTUNE_NVRTC=1", "-std=c++17", "--minimal", include.c_str(), trace.c_str()};
  for (int i = 5; i < argc; ++i) opts.push_back(argv[i]);
  nvrtcProgram prog;
  if (!ok(nvrtcCreateProgram(&prog, src.c_str(), "kernel.cu", 0, nullptr, nullptr), "create")) return 1;
  if (!ok(nvrtcAddNameExpression(prog, argv[3]), "name expression")) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult r = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::fprintf(stderr, "nvrtc_phases: compile failed:\n%s\n", log.c_str());
    return 1;
  }
  if (std::getenv("KTUNE_PHASES_LOG")) {  // e.g. with -Xptxas=-v: registers, spills and stack per kernel
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    std::fprintf(stderr, "%s\n", log.c_str());
  }
  if (const char* out = std::getenv("KTUNE_PHASES_CUBIN")) {
    size_t n = 0;
    nvrtcGetCUBINSize(prog, &n);
    std::string cubin(n, '\0');
    nvrtcGetCUBIN(prog, cubin.data());
    std::ofstream(out, std::ios::binary) << cubin;
  }
  nvrtcDestroyProgram(&prog);
  // The trace is Chrome's JSON, one complete event per phase or function: {"args":{...},"dur":<us>,"name":...}.
  const std::string json = slurp(std::string(trace_dir) + "/t.json");
  std::map<std::string, double> us;
  const std::regex event(R"re("dur"\s*:\s*([0-9.]+)\s*,\s*"name"\s*:\s*"([^"]+)")re");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), event); it != std::sregex_iterator(); ++it)
    us[(*it)[2]] += std::stod((*it)[1]);
  std::remove((std::string(trace_dir) + "/t.json").c_str());
  std::remove(trace_dir);
  std::printf("%.0f %.0f %.0f %.0f\n", us["CUDA C++ Front-End"] / 1000,
              (us["NVVM Optimizer"] + us["NVVM CodeGen"]) / 1000, us["Total PTXAS Time"] / 1000, wall);
  return 0;
}
