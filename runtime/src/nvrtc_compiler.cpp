#include "nvrtc_compiler.hpp"

#include <chrono>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "nvrtc_api.hpp"
#include "source_closure.hpp"

namespace ktune::detail {
namespace {

// Owns an nvrtcProgram so every exit path (including a throw while reading the log) destroys it.
class Program {
 public:
  Program(const NvrtcApi& api, const GeneratedKernel& kernel) : api_(api) {
    auto headers = include_closure(kernel.source);
    std::vector<const char*> contents, names;
    for (const EmbeddedFile* f : headers) {
      contents.push_back(f->content);
      names.push_back(f->name);
    }
    std::string file = kernel.family + ".cu";
    nvrtcResult r = api_.nvrtcCreateProgram(&prog_, kernel.source.c_str(), file.c_str(),
                                            static_cast<int>(headers.size()), contents.data(), names.data());
    if (r != NVRTC_SUCCESS)
      throw Error(Status::internal, "nvrtc", fmt::format("nvrtcCreateProgram: {}", api_.nvrtcGetErrorString(r)));
  }
  ~Program() {
    if (prog_) api_.nvrtcDestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return prog_; }

  std::string log() const {
    size_t size = 0;
    if (api_.nvrtcGetProgramLogSize(prog_, &size) != NVRTC_SUCCESS || size <= 1) return {};
    std::string text(size, '\0');
    api_.nvrtcGetProgramLog(prog_, text.data());
    text.resize(size - 1);
    return text;
  }

 private:
  const NvrtcApi& api_;
  nvrtcProgram prog_ = nullptr;
};

}  // namespace

std::vector<std::string> nvrtc_options(const GeneratedKernel& kernel, const Arch& arch) {
  if (arch.host)
    throw Error(Status::invalid_argument, "compiler", "the host target is compiled by the LLVM plugin, not NVRTC");
  std::vector<std::string> opts = {
      fmt::format("--gpu-architecture={}", arch.str()),  // sm_XY => CUBIN, not PTX
      "--std=c++17",
      "--device-as-default-execution-space",
      "-DKTUNE_NVRTC=1",
  };
  for (const auto& o : kernel.options) opts.push_back(o);
  return opts;
}

std::vector<std::string> nvrtc_speed_options(const std::string& nvrtc_version) {
  if (nvrtc_takes_minimal(nvrtc_version)) return {"--minimal"};
  return {};
}

CompiledBinary compile_with_nvrtc(const GeneratedKernel& kernel, const Arch& arch,
                                  const std::vector<std::string>& key_options, SpeedOptions speed) {
  const NvrtcApi& api = nvrtc();
  std::vector<std::string> options = key_options;
  if (speed == SpeedOptions::on)
    for (auto& o : nvrtc_speed_options(api.version)) options.push_back(std::move(o));
  auto t0 = std::chrono::steady_clock::now();
  Program prog(api, kernel);
  for (const auto& e : kernel.entry_points) {
    nvrtcResult r = api.nvrtcAddNameExpression(prog.get(), e.c_str());
    if (r != NVRTC_SUCCESS)
      throw Error(Status::internal, "nvrtc", fmt::format("nvrtcAddNameExpression({}): {}", e, api.nvrtcGetErrorString(r)));
  }
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  std::string name = fmt::format("{}/{}/{}/{}", kernel.family, arch.str(), kernel.problem_key, kernel.config_key);
  std::string joined = fmt::format("{}", fmt::join(options, " "));

  nvrtcResult r = api.nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  std::string log = prog.log();
  if (r != NVRTC_SUCCESS) {
    throw CompileError(name, log, joined,
                       fmt::format("NVRTC failed to compile {} ({}) with options [{}]:\n{}", name,
                                   api.nvrtcGetErrorString(r), joined, log));
  }

  CompiledBinary out;
  out.log = std::move(log);
  size_t size = 0;
  r = api.nvrtcGetCUBINSize(prog.get(), &size);
  if (r != NVRTC_SUCCESS || size == 0)
    throw Error(Status::internal, "nvrtc", fmt::format("{}: no CUBIN produced (options [{}])", name, joined));
  out.cubin.resize(size);
  api.nvrtcGetCUBIN(prog.get(), reinterpret_cast<char*>(out.cubin.data()));
  for (const auto& e : kernel.entry_points) {
    const char* lowered = nullptr;
    r = api.nvrtcGetLoweredName(prog.get(), e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || !lowered)
      throw Error(Status::internal, "nvrtc", fmt::format("{}: no lowered name for entry point {}", name, e));
    out.lowered_names.emplace_back(lowered);
  }
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace ktune::detail
