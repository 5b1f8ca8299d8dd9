// Minimal leveled logging to stderr, controlled by KTUNE_LOG=debug|info|warn|error (default warn).
#pragma once

#include <string>

#include <fmt/format.h>

namespace ktune::detail {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

template <class... A>
void log(LogLevel level, fmt::format_string<A...> f, A&&... args) {
  if (level >= log_level()) log_line(level, fmt::format(f, std::forward<A>(args)...));
}

}  // namespace ktune::detail
