// `ktune cache export` run several times at once to one --out: each uses temporaries of its own, exactly one
// creates the file, the others fail saying it exists, and nothing is left behind, whoever wins.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hardening_util.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"

using namespace ktune;
using namespace ktune::cache;
using namespace ktune::hardening;
namespace fs = std::filesystem;

namespace {

// Files in dir whose name starts with `stem` + "." (temporaries of an export to dir/stem).
std::vector<std::string> leftovers(const TempDir& dir, const std::string& stem) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind(stem + ".", 0) == 0) out.push_back(e.path().string());
  return out;
}

}  // namespace

TEST_CASE("export: concurrent exports to one --out: one wins, the rest fail cleanly, nothing left behind",
          "[attack][export][hardening][concurrency]") {
  TempDir dir;
  const std::string src = dir.file("src.db");
  {
    auto db = CacheDb::open(src, {});
    for (int i = 0; i < 20; ++i) db->put_binary(sample_record(i));
  }
  constexpr int kRounds = 10, kExporters = 4;
  for (int round = 0; round < kRounds; ++round) {
    const std::string stem = "out" + std::to_string(round) + ".db", out = dir.file(stem);
    std::atomic<int> ok{0}, exists{0}, other{0};
    std::vector<std::string> other_errors(kExporters);
    std::vector<std::thread> threads;
    for (int t = 0; t < kExporters; ++t)
      threads.emplace_back([&, t] {
        try {
          cache_export(src + "?ro", out);
          ++ok;
        } catch (const Error& e) {
          const std::string what = e.what();
          if (what.find("exists") != std::string::npos) {
            ++exists;
          } else {
            other_errors[t] = what;
            ++other;
          }
        }
      });
    for (auto& th : threads) th.join();
    INFO("round " << round << ": " << other_errors[0] << other_errors[1] << other_errors[2] << other_errors[3]);
    CHECK(ok == 1);
    CHECK(exists == kExporters - 1);
    CHECK(other == 0);
    CHECK(leftovers(dir, stem).empty());
    OpenOptions frozen;
    frozen.read_only = true;
    CHECK(CacheDb::open(out, frozen)->counts().binaries == 20);
  }
}

TEST_CASE("export: a failed export leaves no temporary, and never touches another one's files",
          "[attack][export][hardening]") {
  TempDir dir;
  const std::string src = dir.file("src.db"), foreign = dir.file("foreign.db"), out = dir.file("out.db");
  CacheDb::open(src, {})->put_binary(sample_record(1));
  raw_exec(foreign, "CREATE TABLE notes(x)");
  // A file at the name the old fixed staging path used: someone else's, to be left alone.
  std::ofstream(out + ".staging") << "not yours";

  CHECK_THROWS_WITH(cache_export(src + "?ro:" + foreign + "?ro", out), Catch::Contains("not a ktune cache"));
  CHECK_FALSE(fs::exists(out));
  CHECK(leftovers(dir, "out.db") == std::vector<std::string>{out + ".staging"});

  cache_export(src + "?ro", out);
  CHECK(fs::exists(out));
  CHECK(leftovers(dir, "out.db") == std::vector<std::string>{out + ".staging"});
  std::string text;
  std::getline(std::ifstream(out + ".staging"), text);
  CHECK(text == "not yours");
}
