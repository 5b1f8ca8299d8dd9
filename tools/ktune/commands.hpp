// One function per subcommand; each returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace ktune::cli {

int cmd_info(const std::vector<std::string>& args);
int cmd_compile(const std::vector<std::string>& args);
int cmd_cache(const std::vector<std::string>& args);
int cmd_cache_check(const std::vector<std::string>& args);  // `ktune cache check`
int cmd_warmup(const std::vector<std::string>& args);
int cmd_warmup_worker(const std::vector<std::string>& args);  // a worker process of `warmup --devices`
int cmd_replay(const std::vector<std::string>& args);
int cmd_presets(const std::vector<std::string>& args);
int cmd_tune(const std::vector<std::string>& args);
int cmd_prepack(const std::vector<std::string>& args);  // mxfp4_gemm weights
int cmd_report(const std::vector<std::string>& args);

}  // namespace ktune::cli
