// ktune warmup-worker: one tuning worker process of a multi-device warmup, started by the warmup coordinator
// (autotune/worker_pool.hpp) with its socket on fd 3; not for direct use.
#include <sys/prctl.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <memory>

#include <fmt/format.h>

#include "args.hpp"
#include "autotune/tune_worker.hpp"
#include "commands.hpp"
#include "ktune/runtime.hpp"
#include "offline_store.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune warmup-worker (--device N | --host-worker N) [--cache PATH] [--parent PID]
  Internal: a tuning worker of `ktune warmup --devices` / `--workers`, started by the warmup with a socket
  on fd 3. It tunes on GPU N (or on the host CPU as host worker N) each key the warmup sends and stores each
  row in the cache before answering. With --parent (the warmup's pid) it is killed when the warmup ends, however
  that ends, instead of tuning on as an orphan.
)";

}  // namespace

int cmd_warmup_worker(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kHelp), 0;
  Args args(argv, {"device", "host-worker", "cache", "parent"}, {});
  if (args.has("device") == args.has("host-worker")) throw UsageError("give one of --device N or --host-worker N");
  if (args.has("parent")) {
    // SIGKILL when the warmup dies (killed, crashed, interrupted): a hung worker must not outlive it. If it is
    // already gone (this process now has another parent), stop here.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != static_cast<pid_t>(args.get_int("parent", 0, 1, INT_MAX))) return 1;
  }
  autotune::TuneWorkerOptions w;
  w.host = args.has("host-worker");
  w.index = w.host ? args.get_int("host-worker", 0, 0, 4096) : args.get_int("device", 0, 0, 4096);
  std::unique_ptr<Runtime> rt;
  try {
    if (!w.host) use_device(w.index);  // this worker's own context, on its own GPU
    rt = std::make_unique<Runtime>(offline_runtime_options("warmup-worker", args.get("cache")));
    require_writable_layer(*rt, "warmup-worker");
  } catch (const std::exception& e) {
    autotune::send_worker_fatal(w.fd, e.what());
    throw;
  }
  return autotune::run_tune_worker(*rt, w);
}

}  // namespace ktune::cli
