// What every family's engine call (templates/<family>/launch.cpp) needs besides its own kernel: argument
// errors in one format ("<field>: expected <what>, got <value>", Error(invalid_argument) from the family), and
// the arch and limits of the device the calling thread's context runs on, queried once per device.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <string>

#include "ktune/error.hpp"

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/context.hpp"

namespace ktune::launch_support {

[[noreturn]] void bad_arg(const char* family, const std::string& field, const std::string& expected,
                          const std::string& got);
// "0x7f..." or "null".
std::string ptr_text(const void* p);
// Non-null and `align`-byte aligned, else bad_arg naming `field`.
void need_device_ptr(const char* family, const void* p, const char* field, size_t align);

using internal::DeviceFacts;
// The current context's device. Throws Error(cuda_error) without a current context (saying how to make one).
// After the first call per device and thread: one driver call (the current context).
inline const DeviceFacts& current_device(const char* family) {
  return internal::device_facts(internal::current_context(), family);
}

// The split-KV partials of a host launch: the caller's `workspace` when given (>= need bytes, else bad_arg on
// workspace_bytes), else a thread-local scratch buffer reused across calls. Null when unsplit.
float* host_split_workspace(const char* family, int splits, size_t need, void* workspace, size_t workspace_bytes);

// Logs (warn), once per process for each (family, tuning key, config), that a tuned config from the cache cannot
// be used and the default runs instead.
void warn_unusable_tuned(const char* family, const std::string& tuning_key, const std::string& tuned,
                         const std::string& why);

// A forced config key through the family's Config::from_key; a key that does not parse is a bad_arg on
// "config": expected `expected` (and the parser's reason), got the key.
template <class Config>
Config parse_forced_config(const char* family, const char* key, const std::string& expected) {
  try {
    return Config::from_key(key);
  } catch (const Error& e) {
    bad_arg(family, "config", expected + " (" + e.what() + ")", std::string("'") + key + "'");
  }
}

// The config a call runs when none is forced: the tuned one (`tuned`, the cache's winner for the call's tuning
// key, "" when there is none) if it parses and `usable(config)` returns "" (else the reason), otherwise
// `fallback()`. *source is set to "tuned" or "default". An unusable tuned row is reported by
// warn_unusable_tuned and never launched. Shared by every family's GPU and host launch.
template <class Config, class Usable, class Fallback>
Config tuned_or_default(const char* family, const std::string& tuning_key, const std::string& tuned, Usable&& usable,
                        Fallback&& fallback, std::string* source) {
  if (!tuned.empty()) {
    std::string why;
    try {
      Config c = Config::from_key(tuned);
      why = usable(c);
      if (why.empty()) {
        *source = "tuned";
        return c;
      }
    } catch (const Error& e) {
      why = e.what();
    }
    warn_unusable_tuned(family, tuning_key, tuned, why);
  }
  *source = "default";
  return fallback();
}

// Starts finding (or, where JIT is allowed, compiling) the binary of `generate()` for `arch` on a thread of its
// own (Runtime::ensure_binary: single-flight, so a caller that needs the module meanwhile waits for the same
// compile instead of starting another). The future's get() rethrows that thread's error. An invalid future
// when no thread can be started: the caller then finds the binary itself, in turn.
std::future<void> start_binary(Runtime& rt, std::function<GeneratedKernel()> generate, const Arch& arch);

// The host kernel of (problem, host config), linked in process (Runtime::get_host). A config the problem cannot
// run on the host is a bad_arg on "config". can_implement and generate are the family's (argument-dependent
// lookup on the problem type).
template <class Problem, class Config>
const LoadedKernel& host_kernel(Runtime& rt, const char* family, const Problem& p, const Config& c) {
  const Arch host = Arch::host_cpu();
  const std::string key = c.key();
  const std::string why = can_implement(p, c, host, DeviceLimits{});
  if (!why.empty())
    bad_arg(family, "config", "a host config that can run " + p.key(), "'" + key + "' (" + why + ")");
  return rt.get_host(std::string(family) + "/host/" + p.key() + "/" + key, [&] { return generate(p, c, host); });
}

}  // namespace ktune::launch_support
