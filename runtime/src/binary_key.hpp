// The binary key: a digest over everything that changes a compiled binary, plus the same inputs kept as
// readable fields (they become columns in the cache so stale entries can be listed and pruned).
#pragma once

#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/error.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::detail {

// Bumped whenever what ktune stores for a binary changes meaning (entry-point encoding, blob format).
// 2: every binary carries its binding symbol, and the entry_points column ends with it.
constexpr int kBinaryFormatVersion = 2;

struct BinaryKey {
  std::string name;              // family/arch/problem_key/config_key
  std::string family;
  std::string arch;              // "sm_90a"
  std::string compiler;          // "nvrtc"
  std::string compiler_version;  // "13.0.88"; empty when the compiler is absent (lookup by other columns)
  std::string options;           // normalized, space-joined, arch option included
  std::string source_digest;     // sha256 of the generated source and every header it includes
  std::string ktune_version;
  std::string entry_points;      // the name expressions, '\n'-joined
  int format_version = kBinaryFormatVersion;
  std::string digest;            // sha256 over all of the above
  // "ktune_bind_<hex>": a symbol every binary of this key defines, named after a digest of every key input
  // but the compiler version (so the driver-only lookup, which does not know it, still knows the symbol).
  // Entry-point names are the same for every config of a family, so they cannot tell one config's binary
  // from another's; this symbol does: a blob filed under the wrong row does not define it.
  std::string binding_symbol;
};

// What every compile front compiles: the generated source with the binding symbol's definition appended
// (one place for every family and both targets).
GeneratedKernel bound_kernel(const GeneratedKernel& kernel, const BinaryKey& key, bool host);

// A row's entry_points column: the kernel symbols (lowered names, or the host entry symbols), then the
// binding symbol, '\n'-joined.
std::string entry_points_column(const std::vector<std::string>& kernel_symbols, const BinaryKey& key);

// The symbols a loaded binary must resolve, read back from a row's entry_points column.
struct BoundSymbols {
  std::vector<std::string> kernels;  // one per GeneratedKernel::entry_points
  std::string binding;
};
// Empty *why when the column lists `expected_kernels` kernel symbols (kAnyKernelCount: any number) followed
// by `expected_binding` (empty: whatever binding symbol the row names, for tools without the key); otherwise
// *why says what is wrong and the row must be treated as damaged.
constexpr size_t kAnyKernelCount = static_cast<size_t>(-1);
BoundSymbols parse_entry_points(const std::string& column, size_t expected_kernels,
                                const std::string& expected_binding, std::string* why);

// Options in the order the compiler receives them, with surrounding whitespace trimmed and empty ones dropped.
std::vector<std::string> normalize_options(const std::vector<std::string>& options);

std::string source_digest(const std::string& source);

BinaryKey derive_binary_key(const GeneratedKernel& kernel, const Arch& arch, const std::string& compiler,
                            const std::string& compiler_version, const std::vector<std::string>& options);

// Empty when `rec`'s entry_points column passes parse_entry_points and its blob's ELF symbol table defines
// every symbol it names (the binding symbol included); otherwise why not. Reads the bytes, loads nothing.
std::string binding_problem(const cache::BinaryRecord& rec, size_t expected_kernels,
                            const std::string& expected_binding);

// A binary that cannot be used for a reason of its own -- its bytes do not load, or it does not resolve the
// symbols of the key it is filed under. The runtime quarantines it (never tries it again) instead of failing
// every launch; load failures that are not the binary's fault (no memory, a dead context) are plain Errors.
class UnloadableBinary : public Error {
 public:
  explicit UnloadableBinary(const std::string& message) : Error(Status::cache_error, "runtime", message) {}
};

}  // namespace ktune::detail
