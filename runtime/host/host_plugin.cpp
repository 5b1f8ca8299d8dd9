// libktune_host.so: ktune's host (CPU) backend. The only code in ktune that links LLVM.
//
//   compile: C++ source + in-memory headers --clang -cc1 (in process)--> LLVM IR --O3 pipeline for the host
//            triple / CPU / features--> relocatable object (what the runtime caches)
//   load:    object --ORC LLJIT (JITLink), one JITDylib per object--> symbols resolved in this process
//
// The C ABI it exports is runtime/host/ktune_host_plugin.h. No exception leaves an entry point.
#include "ktune_host_plugin.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

namespace {

// Where in-memory files live. Exists only in the compiler's in-memory file system: nothing on disk is visible.
constexpr const char* kRoot = "/ktune-src";

char* dup_buffer(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

void set_text(char** out, const std::string& s) {
  if (out) *out = dup_buffer(s);
}

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// The running CPU as LLVM names it, computed once.
struct HostTarget {
  std::string triple, cpu;
  std::vector<std::string> features;  // "+avx2", "-avx512f", ... sorted by name (what -march=native passes)
  std::string tm_features;            // the same, comma-joined, for the TargetMachine
  std::string llvm_version = LLVM_VERSION_STRING;
  std::string target_id;              // "<triple>/<cpu>/<+enabled,...>;llvm <version>"
};

const HostTarget& host_target() {
  static const HostTarget t = [] {
    HostTarget h;
    h.triple = llvm::sys::getProcessTriple();
    h.cpu = llvm::sys::getHostCPUName().str();
    if (h.cpu.empty()) h.cpu = "generic";
    std::vector<std::pair<std::string, bool>> feats;
    for (const auto& f : llvm::sys::getHostCPUFeatures()) feats.emplace_back(f.getKey().str(), f.getValue());
    std::sort(feats.begin(), feats.end());
    std::string enabled;
    for (const auto& [name, on] : feats) {
      h.features.push_back((on ? "+" : "-") + name);
      if (!h.tm_features.empty()) h.tm_features += ",";
      h.tm_features += h.features.back();
      if (on) {
        if (!enabled.empty()) enabled += ",";
        enabled += "+" + name;
      }
    }
    h.target_id = h.triple + "/" + h.cpu + "/" + enabled + ";llvm " + h.llvm_version;
    return h;
  }();
  return t;
}

const char* target_id() { return host_target().target_id.c_str(); }
const char* llvm_version() { return host_target().llvm_version.c_str(); }
const char* cpu_name() { return host_target().cpu.c_str(); }

std::string sanitize_name(const char* name) {
  std::string s = name && *name ? name : "kernel";
  for (char& c : s)
    if (c == '/' || c == ' ' || c == '\n') c = '_';
  return s;
}

// C++ source -> optimized object for the host.
int compile(const ktune_host_file* source, const ktune_host_file* headers, size_t num_headers,
            const char* const* options, size_t num_options, void** object, size_t* object_size, char** log) {
  if (object) *object = nullptr;
  if (object_size) *object_size = 0;
  if (log) *log = nullptr;
  std::string text;
  try {
    init_llvm();
    const HostTarget& ht = host_target();
    if (!source || !source->data || !object || !object_size) {
      set_text(log, "ktune_host: compile: null source or output pointer");
      return 1;
    }

    // In-memory file system holding the source and every header; it is the compiler's only file system.
    auto vfs = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    const std::string main_name = std::string(kRoot) + "/" + sanitize_name(source->name) + ".cpp";
    vfs->addFile(main_name, 0,
                 llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(source->data, source->size), main_name));
    for (size_t i = 0; i < num_headers; ++i) {
      const ktune_host_file& h = headers[i];
      if (!h.name || !h.data) continue;
      const std::string path = std::string(kRoot) + "/" + h.name;
      vfs->addFile(path, 0, llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(h.data, h.size), path));
    }
    vfs->setCurrentWorkingDirectory(kRoot);

    // -cc1 arguments: the host target exactly as -march=native would give it, no system or builtin headers,
    // IR at O3 quality but with LLVM's passes left to us (so they run with this TargetMachine's cost model).
    std::vector<std::string> args = {"-triple", ht.triple, "-target-cpu", ht.cpu};
    for (const auto& f : ht.features) {
      args.push_back("-target-feature");
      args.push_back(f);
    }
    const std::string include_dir = std::string("-I") + kRoot;
    for (const char* a : {"-O3", "-disable-llvm-passes", "-mrelocation-model", "pic", "-pic-level", "2",
                          "-fno-rtti", "-ffp-contract=on", "-nostdsysteminc", "-nobuiltininc", "-x", "c++"})
      args.emplace_back(a);
    args.push_back(include_dir);
    for (size_t i = 0; i < num_options; ++i)
      if (options[i]) args.emplace_back(options[i]);
    args.push_back(main_name);
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());

    llvm::raw_string_ostream log_os(text);
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_opts(new clang::DiagnosticOptions());
    diag_opts->ShowColors = false;
    clang::TextDiagnosticPrinter printer(log_os, diag_opts.get());
    llvm::IntrusiveRefCntPtr<clang::DiagnosticIDs> diag_ids(new clang::DiagnosticIDs());
    clang::DiagnosticsEngine arg_diags(diag_ids, diag_opts, &printer, /*ShouldOwnClient=*/false);

    auto invocation = std::make_shared<clang::CompilerInvocation>();
    if (!clang::CompilerInvocation::CreateFromArgs(*invocation, argv, arg_diags)) {
      log_os.flush();
      set_text(log, "ktune_host: bad compiler options:\n" + text);
      return 1;
    }
    clang::CompilerInstance ci;
    ci.setInvocation(std::move(invocation));
    ci.setVerboseOutputStream(log_os);  // "N errors generated." goes to the log, not to stderr
    ci.createDiagnostics(&printer, /*ShouldOwnClient=*/false);
    ci.createFileManager(vfs);
    ci.createSourceManager(ci.getFileManager());

    llvm::LLVMContext context;
    clang::EmitLLVMOnlyAction action(&context);
    const bool ok = ci.ExecuteAction(action);
    std::unique_ptr<llvm::Module> module = ok ? action.takeModule() : nullptr;
    log_os.flush();
    if (!module) {
      set_text(log, text.empty() ? std::string("ktune_host: the front end failed without a diagnostic") : text);
      return 1;
    }

    std::string err;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(ht.triple, err);
    if (!target) {
      set_text(log, "ktune_host: no LLVM target for " + ht.triple + ": " + err);
      return 1;
    }
    llvm::TargetOptions topts;
    std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
        ht.triple, ht.cpu, ht.tm_features, topts, llvm::Reloc::PIC_, llvm::CodeModel::Small,
        llvm::CodeGenOptLevel::Aggressive));
    if (!tm) {
      set_text(log, "ktune_host: cannot create a target machine for " + ht.triple + "/" + ht.cpu);
      return 1;
    }
    module->setTargetTriple(ht.triple);
    module->setDataLayout(tm->createDataLayout());

    // O3, as clang -O3 -march=native runs it (loop + SLP vectorization, unrolling, interleaving).
    {
      llvm::PipelineTuningOptions pto;
      pto.LoopUnrolling = true;
      pto.LoopInterleaving = true;
      pto.LoopVectorization = true;
      pto.SLPVectorization = true;
      llvm::PassBuilder pb(tm.get(), pto);
      llvm::LoopAnalysisManager lam;
      llvm::FunctionAnalysisManager fam;
      llvm::CGSCCAnalysisManager cgam;
      llvm::ModuleAnalysisManager mam;
      pb.registerModuleAnalyses(mam);
      pb.registerCGSCCAnalyses(cgam);
      pb.registerFunctionAnalyses(fam);
      pb.registerLoopAnalyses(lam);
      pb.crossRegisterProxies(lam, fam, cgam, mam);
      llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
      mpm.run(*module, mam);
    }
    std::string verify_msg;
    llvm::raw_string_ostream verify_os(verify_msg);
    if (llvm::verifyModule(*module, &verify_os)) {
      verify_os.flush();
      set_text(log, "ktune_host: invalid IR after optimization:\n" + verify_msg);
      return 1;
    }

    llvm::SmallVector<char, 0> obj;
    {
      llvm::raw_svector_ostream os(obj);
      llvm::legacy::PassManager codegen;
      if (tm->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
        set_text(log, "ktune_host: the target cannot emit object files");
        return 1;
      }
      codegen.run(*module);
    }
    void* mem = std::malloc(obj.size() ? obj.size() : 1);
    if (!mem) {
      set_text(log, "ktune_host: out of memory");
      return 1;
    }
    std::memcpy(mem, obj.data(), obj.size());
    *object = mem;
    *object_size = obj.size();
    set_text(log, text);
    return 0;
  } catch (const std::exception& e) {
    set_text(log, std::string("ktune_host: ") + e.what() + (text.empty() ? "" : "\n" + text));
    return 1;
  } catch (...) {
    set_text(log, "ktune_host: unknown exception while compiling");
    return 1;
  }
}

// ---- loading: one LLJIT for the process, one JITDylib per object ----

// Errors the JIT reports while it links an object (an unresolved symbol, a relocation it cannot apply, memory
// it cannot make executable), on the thread whose lookup links it: lookup() returns them with its own error, so
// the caller can tell an object's fault from the environment's, and nothing is printed to stderr.
thread_local std::string t_session_errors;

struct Jit {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string error;
  std::mutex mutex;
  std::atomic<unsigned long long> counter{0};
};

Jit& the_jit() {
  // Never destroyed: loaded code may be referenced until the process ends.
  static Jit* j = [] {
    init_llvm();
    auto* x = new Jit;
    auto built = llvm::orc::LLJITBuilder().create();
    if (built) x->jit = std::move(*built);
    else x->error = llvm::toString(built.takeError());
    if (x->jit)
      x->jit->getExecutionSession().setErrorReporter([](llvm::Error e) {
        if (!t_session_errors.empty()) t_session_errors += "; ";
        t_session_errors += llvm::toString(std::move(e));
      });
    // Objects call into libm and libc (log2f, memset, ...). The process symbols resolve through the global
    // scope only, which holds neither when libktune was loaded dlopen(RTLD_LOCAL) by a program that does not
    // link libm itself: the two libraries are searched by their own handles as well.
    if (x->jit) {
      if (llvm::orc::JITDylibSP process = x->jit->getProcessSymbolsJITDylib()) {
        for (const char* lib : {"libm.so.6", "libc.so.6"}) {
          auto generator = llvm::orc::DynamicLibrarySearchGenerator::Load(
              lib, x->jit->getDataLayout().getGlobalPrefix());
          if (generator) process->addGenerator(std::move(*generator));
          else llvm::consumeError(generator.takeError());  // not this C library: the global scope still serves
        }
      }
    }
    return x;
  }();
  return *j;
}

struct Loaded {
  llvm::orc::JITDylib* dylib = nullptr;
};

int load(const void* object, size_t object_size, const char* name, void** handle, char** error) {
  if (handle) *handle = nullptr;
  if (error) *error = nullptr;
  try {
    Jit& j = the_jit();
    if (!j.jit) {
      set_text(error, "ktune_host: cannot create the ORC LLJIT: " + j.error);
      return 1;
    }
    if (!object || !object_size || !handle) {
      set_text(error, "ktune_host: load: empty object or null handle");
      return 1;
    }
    std::lock_guard<std::mutex> lock(j.mutex);
    const std::string label = sanitize_name(name) + "#" + std::to_string(j.counter++);
    auto jd = j.jit->createJITDylib(label);
    if (!jd) {
      set_text(error, "ktune_host: createJITDylib: " + llvm::toString(jd.takeError()));
      return 1;
    }
    auto buf = llvm::MemoryBuffer::getMemBufferCopy(
        llvm::StringRef(static_cast<const char*>(object), object_size), label);
    if (auto err = j.jit->addObjectFile(*jd, std::move(buf))) {
      std::string msg = llvm::toString(std::move(err));
      if (auto e2 = j.jit->getExecutionSession().removeJITDylib(*jd)) llvm::consumeError(std::move(e2));
      set_text(error, "ktune_host: cannot add the object of " + label + ": " + msg);
      return 2;  // the object itself is refused
    }
    *handle = new Loaded{&*jd};
    return 0;
  } catch (const std::exception& e) {
    set_text(error, std::string("ktune_host: ") + e.what());
    return 1;
  }
}

void* lookup(void* handle, const char* symbol, char** error) {
  if (error) *error = nullptr;
  try {
    Jit& j = the_jit();
    auto* l = static_cast<Loaded*>(handle);
    if (!l || !j.jit || !symbol) {
      set_text(error, "ktune_host: lookup: no such loaded object or symbol");
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(j.mutex);
    t_session_errors.clear();
    auto addr = j.jit->lookup(*l->dylib, symbol);  // links (materializes) the object on first lookup
    if (!addr) {
      std::string text = "ktune_host: symbol '" + std::string(symbol) + "': " + llvm::toString(addr.takeError());
      if (!t_session_errors.empty()) text += " (" + t_session_errors + ")";
      set_text(error, text);
      return nullptr;
    }
    return addr->toPtr<void*>();
  } catch (const std::exception& e) {
    set_text(error, std::string("ktune_host: ") + e.what());
    return nullptr;
  }
}

void unload(void* handle) {
  auto* l = static_cast<Loaded*>(handle);
  if (!l) return;
  try {
    Jit& j = the_jit();
    if (j.jit) {
      std::lock_guard<std::mutex> lock(j.mutex);
      if (auto err = j.jit->getExecutionSession().removeJITDylib(*l->dylib)) llvm::consumeError(std::move(err));
    }
  } catch (...) {
  }
  delete l;
}

void free_buffer(void* p) { std::free(p); }

const ktune_host_plugin_v1_t kPlugin = {
    KTUNE_HOST_PLUGIN_ABI_VERSION,
    static_cast<uint32_t>(sizeof(ktune_host_plugin_v1_t)),
    target_id,
    llvm_version,
    cpu_name,
    compile,
    load,
    lookup,
    unload,
    free_buffer,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ktune_host_plugin_v1_t* ktune_host_plugin_v1(void) {
  return &kPlugin;
}
