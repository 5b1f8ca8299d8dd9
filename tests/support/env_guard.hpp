// Restores one environment variable (its value, or its absence) when the scope ends, for tests that set or
// unset it. The two-argument form also sets the variable to VALUE, or unsets it when VALUE is null.
#pragma once

#include <cstdlib>
#include <string>

namespace ktune::test {

class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) {
      had_ = true;
      old_ = v;
    }
  }
  EnvGuard(const char* name, const char* value) : EnvGuard(name) {
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~EnvGuard() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace ktune::test
