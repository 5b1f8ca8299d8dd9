// Command-line lookup shared by every bench: `--name value` options and `--name` flags.
#pragma once

#include <string>

namespace bench_args {

// The value after `--name` on the command line, else `fallback`.
inline std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

// Whether `--name` is on the command line.
inline bool flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == "--" + name) return true;
  return false;
}

}  // namespace bench_args
