#include "ktune_internal/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ktune::detail {

LogLevel log_level() {
  static const LogLevel level = [] {
    const char* v = std::getenv("KTUNE_LOG");
    if (!v) return LogLevel::warn;
    if (!std::strcmp(v, "debug")) return LogLevel::debug;
    if (!std::strcmp(v, "info")) return LogLevel::info;
    if (!std::strcmp(v, "error")) return LogLevel::error;
    return LogLevel::warn;
  }();
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::fprintf(stderr, "[ktune %s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace ktune::detail
