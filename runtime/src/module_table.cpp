// Per-context module table: the hot path of every launch after the first is one shared-lock hash lookup.
#include <chrono>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "host_compiler.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/context.hpp"
#include "ktune_internal/log.hpp"
#include "runtime_impl.hpp"

namespace ktune {
using namespace detail;

namespace {

// The calling thread's context and its identity (what the module table keys on: a handle can outlive its
// context's modules); Error(cuda_error) saying how to make one current when there is none.
struct CurrentContext {
  CUcontext handle = nullptr;
  void* id = nullptr;
};

CurrentContext current_context() {
  CurrentContext c;
  c.id = reinterpret_cast<void*>(static_cast<uintptr_t>(current_context_id(&c.handle)));
  if (!c.id) internal::require_context("runtime");  // throws the error that says how to make one current
  return c;
}

Arch arch_of_current_context() {
  const DriverApi& cu = driver();
  CUdevice dev = 0;
  check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  return arch_for_compute_capability(major, minor);
}

// Load failures that say nothing about the binary (the process or the context is in trouble): a plain error,
// the entry stays. Every other failure of cuModuleLoadData means the bytes are not a loadable module.
bool not_the_binarys_fault(CUresult r) {
  return r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED ||
         r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r >= CUDA_ERROR_ILLEGAL_ADDRESS;
}

std::string cu_text(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  driver().cuGetErrorName(r, &name);
  driver().cuGetErrorString(r, &text);
  return fmt::format("{} ({})", name ? name : "?", text ? text : "?");
}

}  // namespace

std::unique_ptr<LoadedKernel> detail::load_gpu_module(const cache::BinaryRecord& rec, const BoundSymbols& symbols,
                                                      void* ctx) {
  const DriverApi& cu = driver();
  auto k = std::make_unique<LoadedKernel>();
  k->name = rec.name;
  k->digest = rec.digest;
  k->context = ctx;
  CUmodule mod = nullptr;
  if (CUresult r = cu.cuModuleLoadData(&mod, rec.blob.data()); r != CUDA_SUCCESS) {
    if (not_the_binarys_fault(r)) check_cu(r, ("cuModuleLoadData(" + rec.name + ")").c_str());
    throw UnloadableBinary(fmt::format("{}: cuModuleLoadData: {}", rec.name, cu_text(r)));
  }
  k->module = mod;
  // Unloaded on every way out but the return below, a driver call that throws included.
  struct UnloadUnlessKept {
    const DriverApi& cu;
    CUmodule mod;
    ~UnloadUnlessKept() {
      if (mod) cu.cuModuleUnload(mod);
    }
  } loaded{cu, mod};
  // The binding symbol first: a module of another key must not be used at all.
  CUdeviceptr bound = 0;
  size_t bound_bytes = 0;
  if (CUresult r = cu.cuModuleGetGlobal(&bound, &bound_bytes, mod, symbols.binding.c_str()); r != CUDA_SUCCESS) {
    if (not_the_binarys_fault(r))  // e.g. an earlier kernel's fault surfacing here: not a reason to quarantine
      check_cu(r, fmt::format("cuModuleGetGlobal({}, {})", rec.name, symbols.binding).c_str());
    throw UnloadableBinary(fmt::format("{}: binding symbol {} does not resolve: {}", rec.name, symbols.binding,
                                       cu_text(r)));
  }
  CUdevice dev = 0;
  check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  int optin = 0;
  check_cu(cu.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
           "cuDeviceGetAttribute(smem optin)");
  for (const std::string& sym : symbols.kernels) {
    CUfunction fn = nullptr;
    CUresult r = cu.cuModuleGetFunction(&fn, mod, sym.c_str());
    if (r != CUDA_SUCCESS) {
      if (not_the_binarys_fault(r)) check_cu(r, fmt::format("cuModuleGetFunction({}, {})", rec.name, sym).c_str());
      throw UnloadableBinary(fmt::format("{}: entry point {} does not resolve: {}", rec.name, sym, cu_text(r)));
    }
    // Raise the dynamic shared-memory limit once, at load, so launches never touch function attributes.
    int static_smem = 0;
    check_cu(cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute");
    check_cu(cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - static_smem),
             "cuFuncSetAttribute(max dynamic smem)");
    k->functions.push_back(fn);
  }
  loaded.mod = nullptr;  // kept: the runtime unloads it with its context's table
  return k;
}

void detail::unload_gpu_module(void* module) {
  if (const DriverApi* cu = try_driver(); cu && module) cu->cuModuleUnload(static_cast<CUmodule>(module));
}

namespace {

std::unique_ptr<LoadedKernel> load_host(const cache::BinaryRecord& rec, const BoundSymbols& symbols) {
  auto k = std::make_unique<LoadedKernel>();
  k->name = rec.name;
  k->digest = rec.digest;
  load_host_object(rec.blob, rec.name, symbols, k.get());
  return k;
}

// The binary of `kernel`, loaded by `load`. A binary that does not load, or does not resolve the symbols its
// key expects, is quarantined and obtained again: another layer's copy, an older compiler's (driver-only
// lookup), or one fresh compile. A freshly compiled binary that fails is an error, not a loop.
template <class Load>
std::unique_ptr<LoadedKernel> obtain_and_load(Runtime::Impl& im, const GeneratedKernel& kernel, const Arch& arch,
                                              Load&& load) {
  constexpr int kMaxCopiesTried = 8;  // each failure quarantines one copy, so this only bounds a huge cache
  for (int attempt = 1;; ++attempt) {
    bool compiled = false;
    BinaryKey key;
    BinaryPtr rec = im.obtain_binary(kernel, arch, &compiled, &key);
    auto t0 = std::chrono::steady_clock::now();
    try {
      std::string why;
      BoundSymbols symbols = parse_entry_points(rec->entry_points, kernel.entry_points.size(), key.binding_symbol,
                                                &why);
      if (!why.empty()) throw UnloadableBinary(fmt::format("{}: {}", rec->name, why));
      std::unique_ptr<LoadedKernel> k = load(*rec, symbols);
      im.stats.loads++;
      im.stats.load_us +=
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
      log(LogLevel::debug, "loaded {} ({})", rec->name, compiled ? "compiled" : "from cache");
      return k;
    } catch (const UnloadableBinary& e) {
      im.quarantine(*rec, e.what());
      if (compiled || attempt >= kMaxCopiesTried) throw;
    }
  }
}

// The slot of (context identity, fast_key), created empty on first use. ctx == nullptr is the host CPU.
std::shared_ptr<Runtime::Impl::Slot> slot_for(Runtime::Impl& im, void* ctx, const std::string& fast_key) {
  {
    std::shared_lock<std::shared_mutex> lock(im.modules_mutex);
    auto per_ctx = im.modules.find(ctx);
    if (per_ctx != im.modules.end()) {
      auto it = per_ctx->second.find(fast_key);
      if (it != per_ctx->second.end()) return it->second;
    }
  }
  std::unique_lock<std::shared_mutex> lock(im.modules_mutex);
  auto& s = im.modules[ctx][fast_key];
  if (!s) s = std::make_shared<Runtime::Impl::Slot>();
  return s;
}

}  // namespace

const LoadedKernel& Runtime::get(const std::string& fast_key, const std::function<GeneratedKernel()>& generate) {
  const CurrentContext ctx = current_context();
  Impl& im = *impl_;
  std::shared_ptr<Impl::Slot> slot = slot_for(im, ctx.id, fast_key);
  std::lock_guard<std::mutex> slot_lock(slot->mutex);  // uncontended once loaded
  if (slot->kernel) {
    im.stats.memory_hits++;
    return *slot->kernel;
  }
  GeneratedKernel kernel = generate();
  slot->kernel = obtain_and_load(im, kernel, arch_of_current_context(), [&](const cache::BinaryRecord& rec,
                                                                            const BoundSymbols& symbols) {
    return load_gpu_module(rec, symbols, ctx.handle);
  });
  return *slot->kernel;
}

// ---- host kernels: the same table under the null context, objects linked by the LLVM plugin ----
const LoadedKernel& Runtime::get_host(const std::string& fast_key, const std::function<GeneratedKernel()>& generate) {
  Impl& im = *impl_;
  std::shared_ptr<Impl::Slot> slot = slot_for(im, nullptr, fast_key);
  std::lock_guard<std::mutex> slot_lock(slot->mutex);
  if (slot->kernel) {
    im.stats.memory_hits++;
    return *slot->kernel;
  }
  GeneratedKernel kernel = generate();
  slot->kernel = obtain_and_load(im, kernel, Arch::host_cpu(), load_host);
  return *slot->kernel;
}

Arch Runtime::current_arch() {
  current_context();
  return arch_of_current_context();
}

Runtime::~Runtime() {
  if (auto host = impl_->modules.find(nullptr); host != impl_->modules.end()) {
    for (auto& [key, slot] : host->second)
      if (slot->kernel) unload_host_object(slot->kernel->module);
    impl_->modules.erase(host);
  }
  const DriverApi* cu = try_driver();
  if (!cu) return;
  impl_->free_reports();
  // Only the modules of contexts still alive: a destroyed context took its modules with it, and their handle
  // values may name another owner's modules by now.
  for (auto& [ctx, table] : impl_->modules)
    for (auto& [key, slot] : table)
      if (slot->kernel && slot->kernel->module &&
          reinterpret_cast<uintptr_t>(ctx) == context_id(static_cast<CUcontext>(slot->kernel->context)))
        cu->cuModuleUnload(static_cast<CUmodule>(slot->kernel->module));
}

namespace {
thread_local bool t_host_device = false;  // use_device(kHostDevice) on this thread
}  // namespace

bool host_device_current() { return t_host_device; }


namespace internal {

CallerDeviceScope::CallerDeviceScope() : host_(t_host_device) {
  std::string why;
  if (const detail::DriverApi* cu = detail::try_driver(&why)) {
    CUcontext c = nullptr;
    if (cu->cuCtxGetCurrent(&c) == CUDA_SUCCESS) {
      context_ = c;
      known_ = true;
    }
  }
}

CallerDeviceScope::~CallerDeviceScope() {
  // No throw from a destructor: a failed switch back leaves the call's device current, which is all it can do.
  if (known_) (void)detail::driver().cuCtxSetCurrent(static_cast<CUcontext>(context_));
  t_host_device = host_;
}

}  // namespace internal

void use_device(int ordinal) {
  if (ordinal == kHostDevice) {  // needs no driver: the host CPU
    t_host_device = true;
    return;
  }
  check_cu(driver().cuCtxSetCurrent(detail::retained_primary_context(ordinal)), "cuCtxSetCurrent");
  t_host_device = false;
}

namespace detail {
namespace {
struct PrimaryContext {
  CUdevice device = 0;
  CUcontext context = nullptr;  // null: not retained yet
};
std::mutex g_primary_mutex;
std::vector<PrimaryContext> g_primary;  // by ordinal

PrimaryContext known_primary(int ordinal) {
  std::lock_guard<std::mutex> lock(g_primary_mutex);
  return ordinal >= 0 && static_cast<size_t>(ordinal) < g_primary.size() ? g_primary[static_cast<size_t>(ordinal)]
                                                                         : PrimaryContext{};
}
}  // namespace

CUcontext known_primary_context(int ordinal) { return known_primary(ordinal).context; }

CUcontext retained_primary_context(int ordinal) {
  const DriverApi& cu = driver();
  // A primary context reset (cudaDeviceReset) leaves the retained context inactive.
  const auto active = [&](CUdevice dev) {
    unsigned flags = 0;
    int on = 0;
    return cu.cuDevicePrimaryCtxGetState(dev, &flags, &on) == CUDA_SUCCESS && on;
  };
  if (const PrimaryContext known = known_primary(ordinal); known.context && active(known.device)) return known.context;
  int count = 0;
  check_cu(cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw Error(Status::invalid_argument, "runtime",
                fmt::format("device ordinal {}: expected {} (the host CPU) or 0..{}", ordinal, kHostDevice, count - 1));
  CUdevice dev = 0;
  check_cu(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  std::lock_guard<std::mutex> lock(g_primary_mutex);
  if (g_primary.size() <= static_cast<size_t>(ordinal)) g_primary.resize(static_cast<size_t>(ordinal) + 1);
  PrimaryContext& slot = g_primary[static_cast<size_t>(ordinal)];
  // Not retained yet, or reset since: a retain (re-)creates it. Another thread may have done so while this one
  // waited for the lock, so the state is read again under it.
  if (!slot.context || !active(dev)) {
    CUcontext ctx = nullptr;
    check_cu(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    slot = PrimaryContext{dev, ctx};
  }
  return slot.context;
}

}  // namespace detail

}  // namespace ktune
