// `ktune cache verify --load`: every intact binary this machine can load is loaded the way the runtime loads
// it, so entries whose digests are right but whose bytes do not load (poison: every launch of every process
// would fail) are found before a serving process meets them.
#include <fmt/format.h>

#include "binary_key.hpp"
#include "driver_api.hpp"
#include "host_compiler.hpp"
#include "host_plugin_api.hpp"
#include "ktune/arch.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "runtime_impl.hpp"

namespace ktune {
using namespace detail;

namespace {

// The GPU arch loads are tried on (GPU 0's primary context made current), or "" and why not.
std::string gpu_arch(std::string* why) {
  if (!try_driver(why)) return {};
  try {
    use_device(0);
    const DriverApi& cu = driver();
    CUdevice dev = 0;
    int major = 0, minor = 0;
    check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
    check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "compute capability");
    check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "compute capability");
    return arch_for_compute_capability(major, minor).str();
  } catch (const Error& e) {
    *why = e.what();
    return {};
  }
}

}  // namespace

CacheLoadReport cache_verify_loads(const std::string& search_path) {
  CacheLoadReport report;
  std::string why_no_host, why_no_gpu;
  const HostPlugin* host = try_host_plugin(&why_no_host);
  const std::string arch = gpu_arch(&why_no_gpu);
  report.targets = fmt::format("{}; {}", host ? fmt::format("host {} (LLVM {})", host->cpu_name, host->llvm_version)
                                               : "no host backend",
                               arch.empty() ? "no GPU" : "GPU 0 " + arch);
  // The layers as a read-only runtime of this environment sees them: with KTUNE_TRUSTED_KEYS, a layer without a
  // valid signature is refused there, and so it is here (nothing of it is loaded into this process).
  RuntimeOptions options = RuntimeOptions::from_env();
  options.read_only = true;
  const cache::LayeredOptions layering = layered_options(options);
  try {
    cache::LayeredCache layered(search_path, layering);
    for (const auto& info : layered.layers()) {
      if (!info.present) continue;
      if (info.refused) {
        report.refused_layers.push_back(fmt::format("{}: {}", info.path, info.note));
        continue;
      }
      auto db = cache::detail::open_for_reading(info.path);
      for (const auto& b : db->list_binaries()) {
        const bool host_row = host && b.arch == "host" && b.compiler == "llvm" && b.compiler_version == host->target_id;
        const bool gpu_row = !arch.empty() && b.arch == arch;
        // Rows of another binary format are never served by this ktune: nothing to load them for.
        if ((!host_row && !gpu_row) || b.schema_version != kBinaryFormatVersion) {
          report.not_loadable_here++;
          continue;
        }
        cache::BinaryLookup l = db->get_binary(b.digest);
        if (l.status != cache::LookupStatus::hit) continue;  // damaged: cache_verify names it
        std::string why;
        BoundSymbols symbols = parse_entry_points(l.record.entry_points, kAnyKernelCount, "", &why);
        if (why.empty()) {
          try {
            LoadedKernel k;
            if (host_row) {
              load_host_object(l.record.blob, l.record.name, symbols, &k);
              unload_host_object(k.module);
            } else {
              void* ctx = nullptr;
              driver().cuCtxGetCurrent(reinterpret_cast<CUcontext*>(&ctx));
              unload_gpu_module(load_gpu_module(l.record, symbols, ctx)->module);
            }
          } catch (const UnloadableBinary& e) {
            why = e.what();
          } catch (const Error& e) {  // this machine cannot load it (e.g. executable memory refused): not checked
            why = e.what();
          }
        }
        if (why.empty()) {
          report.loaded++;
        } else {
          report.failed++;
          report.failures.push_back(CacheIssue{info.path, b.digest, b.name, why});
        }
      }
    }
  } catch (const cache::CacheError& e) {
    throw Error(Status::cache_error, "cache", e.what());
  }
  return report;
}

}  // namespace ktune
