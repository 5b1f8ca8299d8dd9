// ktune: offline warmup, compile and cache maintenance. Uses the public API only.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "args.hpp"
#include "commands.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"

namespace {

const char* kUsage = R"(usage: ktune <command> [options]

commands:
  info      driver, NVRTC, devices, arches and cache layers
  compile   compile kernels for one or more arches into the cache
  warmup    compile + tune every kernel a model preset needs (resumable)
  tune      tune one key on this GPU and print the candidate table
  replay    run a preset's request buckets from the cache: compiles, tunings, first vs steady call
  presets   list the embedded model presets
  cache     ls | stats | show | check | verify | prune | export | merge | keygen | sign
  prepack   reorder an MXFP4 weight into the mxfp4_gemm kernel layout (records its layout version)
  report    write a self-contained HTML tuning report (charts, rooflines, cache contents) of a cache

Every command takes --help. Commands that touch a cache take --cache PATH (default: $KTUNE_CACHE, else
$XDG_CACHE_HOME/ktune/ktune.db, else ~/.cache/ktune/ktune.db); --json prints one JSON object. Exit status 0 on success, 1 on failure, 2 on a
usage error. ktune --version prints the version.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "-V" || args[0] == "version") {
    if (args.size() > 1) {
      fmt::print(stderr, "ktune --version: unexpected argument '{}'\n", args[1]);
      return 2;
    }
    fmt::print("ktune {}\n", ktune::version());
    return 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  // `-j N` is the one short option (make's spelling for parallel jobs), of the commands that take --jobs.
  if (command == "compile" || command == "warmup")
    for (auto& a : args)
      if (a == "-j") a = "--jobs";
  // --help anywhere after the command (`ktune info --json --help`) asks for that command's help.
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end())
    args = {"--help"};
  try {
    if (command == "info") return ktune::cli::cmd_info(args);
    if (command == "compile") return ktune::cli::cmd_compile(args);
    if (command == "cache") return ktune::cli::cmd_cache(args);
    if (command == "warmup") return ktune::cli::cmd_warmup(args);
    if (command == "warmup-worker") return ktune::cli::cmd_warmup_worker(args);
    if (command == "replay") return ktune::cli::cmd_replay(args);
    if (command == "presets") return ktune::cli::cmd_presets(args);
    if (command == "tune") return ktune::cli::cmd_tune(args);
    if (command == "prepack") return ktune::cli::cmd_prepack(args);
    if (command == "report") return ktune::cli::cmd_report(args);
    fmt::print(stderr, "ktune: unknown command '{}' (see ktune --help)\n", command);
    return 2;
  } catch (const ktune::cli::UsageError& e) {
    fmt::print(stderr, "ktune {}: {}\n", command, e.what());
    return 2;
  } catch (const ktune::Error& e) {
    std::string msg = e.what();
    fmt::print(stderr, "{}\n", msg);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ktune {}: {}\n", command, e.what());
    return 1;
  }
}
