#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "binary_key.hpp"
#include "ktune/arch.hpp"
#include "ktune/cache/sha256.hpp"
#include "ktune/error.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using detail::derive_binary_key;

TEST_CASE("a change in any key input changes the binary key", "[runtime][key]") {
  GeneratedKernel k = test::scale_kernel(3);
  Arch a90 = Arch::parse("sm_90a");
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a", "--std=c++17"};
  auto base = derive_binary_key(k, a90, "nvrtc", "13.0.88", opts);
  REQUIRE(base.digest.size() == 64);
  CHECK(derive_binary_key(k, a90, "nvrtc", "13.0.88", opts).digest == base.digest);  // deterministic

  GeneratedKernel other_source = test::scale_kernel(4);
  CHECK(derive_binary_key(other_source, a90, "nvrtc", "13.0.88", opts).digest != base.digest);
  CHECK(derive_binary_key(k, Arch::parse("sm_120a"), "nvrtc", "13.0.88", opts).digest != base.digest);
  CHECK(derive_binary_key(k, Arch::parse("sm_90"), "nvrtc", "13.0.88", opts).digest != base.digest);
  CHECK(derive_binary_key(k, a90, "nvrtc", "13.0.89", opts).digest != base.digest);
  CHECK(derive_binary_key(k, a90, "llvm", "13.0.88", opts).digest != base.digest);
  auto more_opts = opts;
  more_opts.push_back("-lineinfo");
  CHECK(derive_binary_key(k, a90, "nvrtc", "13.0.88", more_opts).digest != base.digest);
  GeneratedKernel other_entry = k;
  other_entry.entry_points.push_back("ktune_test::scale_kernel<ktune_test::Spec>");
  CHECK(derive_binary_key(other_entry, a90, "nvrtc", "13.0.88", opts).digest != base.digest);
  // Whitespace-only differences in options are normalized away.
  CHECK(derive_binary_key(k, a90, "nvrtc", "13.0.88", {" --gpu-architecture=sm_90a", "--std=c++17 ", ""}).digest ==
        base.digest);
}

TEST_CASE("a kernel option holding whitespace is refused: the key joins options with spaces", "[runtime][key]") {
  // {"-DA=1 -DB=2"} would key like {"-DA=1", "-DB=2"} and compile as one malformed option.
  const Arch a90 = Arch::parse("sm_90a");
  for (const char* bad : {"-DA=1 -DB=2", " -DA=1", "-DA=1\n"}) {
    GeneratedKernel k = test::scale_kernel(3);
    k.options = {"-DC=3", bad};
    try {
      derive_binary_key(k, a90, "nvrtc", "13.0.88", {"--gpu-architecture=sm_90a"});
      FAIL("accepted option '" << bad << "'");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("options[1]: expected one compiler option without whitespace"));
    }
  }
  GeneratedKernel two = test::scale_kernel(3);
  two.options = {"-DA=1", "-DB=2"};
  CHECK_NOTHROW(derive_binary_key(two, a90, "nvrtc", "13.0.88", {"--gpu-architecture=sm_90a"}));
}

TEST_CASE("the key hashes the content of every included template header", "[runtime][key]") {
  GeneratedKernel k = test::scale_kernel(3);
  GeneratedKernel with_header = k;
  with_header.source = "#include \"common/dtype.h\"\n" + k.source;
  CHECK(detail::source_digest(with_header.source) != detail::source_digest(k.source));
  // Computed here from the header file in the source tree (common/dtype.h includes nothing): the source, then the
  // header's name and bytes, each length-prefixed. A digest over the source text alone (or the names alone) differs.
  const std::string here = __FILE__;
  std::ifstream header(here.substr(0, here.rfind("/tests/")) + "/templates/common/dtype.h", std::ios::binary);
  REQUIRE(header);
  const std::string content((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
  REQUIRE(content.find("#include") == std::string::npos);
  cache::Sha256 h;
  for (const std::string& part : {with_header.source, std::string("common/dtype.h"), content}) {
    const std::string len = std::to_string(part.size()) + ":";
    h.update(len.data(), len.size());
    h.update(part.data(), part.size());
  }
  CHECK(detail::source_digest(with_header.source) == h.hex_digest());
  GeneratedKernel missing = k;
  missing.source = "#include \"common/no_such_header.cuh\"\n" + k.source;
  CHECK_THROWS_AS(detail::source_digest(missing.source), Error);
}

TEST_CASE("readable key fields stay readable", "[runtime][key]") {
  GeneratedKernel k = test::scale_kernel(3);
  auto key = derive_binary_key(k, Arch::parse("sm_90a"), "nvrtc", "13.0.88", {"--gpu-architecture=sm_90a"});
  CHECK(key.name == "test_scale/sm_90a/s3.o0/default");
  CHECK(key.arch == "sm_90a");
  CHECK(key.compiler_version == "13.0.88");
  CHECK(key.ktune_version == KTUNE_VERSION_STRING);
}

TEST_CASE("arch strings parse and print", "[runtime][arch]") {
  for (const auto& s : supported_cuda_arches()) CHECK(Arch::parse(s).str() == s);
  CHECK(Arch::parse("host").host);
  CHECK(Arch::parse("sm_90a").sm() == 90);
  CHECK(Arch::parse("sm_121a").sm() == 121);
  for (const char* bad : {"", "sm", "sm_", "sm_9", "sm_90x", "compute_90", "sm_90aa", "SM_90", "sm_6"}) {
    INFO(bad);
    CHECK_THROWS_AS(Arch::parse(bad), Error);
  }
  CHECK(arch_for_compute_capability(9, 0).str() == "sm_90a");
  CHECK(arch_for_compute_capability(8, 9).str() == "sm_89");
  CHECK(arch_for_compute_capability(12, 0).str() == "sm_120a");
}
