// ktune prepack: canonical OCP MXFP4 weight files -> one prepacked file in the mxfp4_gemm kernel's layout.
// Needs no GPU. `--check FILE` reads a packed file back and verifies its layout version.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "args.hpp"
#include "json_writer.hpp"
#include "commands.hpp"
#include "ktune/error.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune::cli {
namespace {

// The file at `path`, which must be a regular file of exactly `want` bytes (a device such as /dev/zero, or a
// file of another size, is refused before it is read past the size asked for).
std::vector<uint8_t> read_exactly(const std::string& path, const char* what, size_t want, const char* formula) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UsageError(fmt::format("--{}: expected a regular file, got '{}'", what, path));
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw UsageError(fmt::format("--{}: cannot read the size of '{}': {}", what, path, ec.message()));
  if (size != want) throw UsageError(fmt::format("--{}: expected {} bytes ({}), got {}", what, want, formula, size));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(fmt::format("--{}: cannot open '{}'", what, path));
  std::vector<uint8_t> bytes(want);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(want)))
    throw UsageError(fmt::format("--{}: '{}' ended before {} bytes", what, path, want));
  return bytes;
}

// The packed file's header as one JSON object (--json), for --check and for a written file alike.
void print_json(const std::string& path, const mxfp4::PackedFile& f) {
  fmt::print("{}\n", JsonObject().str("path", path).num("layout_version", f.layout_version).num("n", f.n).num("k", f.k)
                         .num("experts", f.num_experts).num("weight_bytes", static_cast<int64_t>(f.weight.size()))
                         .num("scale_bytes", static_cast<int64_t>(f.scales.size())).dump());
}

}  // namespace

int cmd_prepack(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    fmt::print(
        "usage: ktune prepack --weight W.bin --scales S.bin --n N --k K [--experts E] --out FILE [--json]\n"
        "       ktune prepack --check FILE [--json]\n"
        "  Reorders an OCP MXFP4 weight (raw files: W.bin = uint8 [E, N, K/2], two e2m1 codes per byte, low\n"
        "  nibble = even k; S.bin = uint8 e8m0 [E, N, K/32]) into the mxfp4_gemm kernel's layout and writes one\n"
        "  file recording the layout version (docs/mxfp4_gemm.md). --check reads a packed file back: exit 1 when\n"
        "  its layout version is not this ktune's. Needs no GPU.\n");
    return 0;
  }
  Args args(argv, {"weight", "scales", "n", "k", "experts", "out", "check"}, {"json"});
  if (args.has("check")) {
    const mxfp4::PackedFile f = mxfp4::read_packed_file(args.get("check"));
    if (args.has("json")) return print_json(args.get("check"), f), 0;
    fmt::print("{}: mxfp4 packed weight, layout version {}, n {}, k {}, experts {}, {} + {} bytes: ok\n",
               args.get("check"), f.layout_version, f.n, f.k, f.num_experts, f.weight.size(), f.scales.size());
    return 0;
  }
  for (const char* need : {"weight", "scales", "n", "k", "out"})
    if (!args.has(need)) throw UsageError(fmt::format("--{} is required (see ktune prepack --help)", need));
  mxfp4::PackedFile f;
  f.layout_version = mxfp4::packed_layout_version();
  f.n = args.get_int("n", 0);
  f.k = args.get_int("k", 0);
  f.num_experts = args.get_int("experts", 1);
  const size_t wb = mxfp4::packed_weight_bytes(f.n, f.k, f.num_experts);  // validates n, k, experts
  const size_t want_w = size_t(f.num_experts) * f.n * (f.k / 2), want_s = size_t(f.num_experts) * f.n * (f.k / 32);
  const std::vector<uint8_t> w = read_exactly(args.get("weight"), "weight", want_w, "experts * n * k / 2");
  const std::vector<uint8_t> s = read_exactly(args.get("scales"), "scales", want_s, "experts * n * k / 32");
  f.weight.resize(wb);
  f.scales.resize(mxfp4::packed_scale_bytes(f.n, f.k, f.num_experts));
  mxfp4::prepack_host(w.data(), s.data(), f.n, f.k, f.num_experts, f.weight.data(), f.scales.data());
  mxfp4::write_packed_file(args.get("out"), f);
  if (args.has("json")) return print_json(args.get("out"), f), 0;
  fmt::print("wrote {}: layout version {}, n {}, k {}, experts {}, {} + {} bytes\n", args.get("out"), f.layout_version,
             f.n, f.k, f.num_experts, f.weight.size(), f.scales.size());
  return 0;
}

}  // namespace ktune::cli
