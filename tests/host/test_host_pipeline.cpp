// host_pipeline::resolve, the host calls' one front end, with a spec of its own (no kernel): which config runs
// (forced, tuned on this host, default), how an unusable one is refused, the split count and its workspace.
#include <catch2/catch.hpp>

#include <string>

#include "support/error_of.hpp"
#include "host/host_support.hpp"
#include "host_pipeline.hpp"
#include "ktune/error.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

namespace fake_host {

// Configs t1..t8 run on the host; t9 and above parse but cannot run.
struct Config {
  int t = 1;
  std::string key() const { return "t" + std::to_string(t); }
  static Config from_key(const std::string& k) {
    if (k.size() < 2 || k[0] != 't' || k.find_first_not_of("0123456789", 1) != std::string::npos)
      throw Error(Status::invalid_argument, "fake_host", "config key: expected t<N>, got '" + k + "'");
    return Config{std::stoi(k.substr(1))};
  }
};

struct Problem {
  std::string key() const { return "p1"; }
};

std::string can_implement(const Problem&, const Config& c, const Arch& arch, const DeviceLimits&) {
  if (!arch.host) return "not the host";
  return c.t <= 8 ? "" : "t above 8";
}

// Splits: as many as the shape's rows over the threads; 100 workspace bytes a split.
struct Spec {
  using Problem = fake_host::Problem;
  using Config = fake_host::Config;
  static constexpr const char* kFamily = "fake_host";
  static constexpr const char* kConfigGrammar = "a host config key like t4";
  static constexpr int kMaxForcedSplits = 16;
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const pipeline::Shape& s) {
    return {{"m", s.a}};
  }
  static Config default_config(const Problem&, const Arch&, const pipeline::Shape&) { return Config{2}; }
  static int planned_splits(const Problem&, const Config&, const pipeline::Shape& s, int threads) {
    return static_cast<int>((s.a + threads - 1) / threads);
  }
  static size_t workspace_bytes(const Problem&, const Config&, const pipeline::Shape&, int splits) {
    return splits > 1 ? 100 * size_t(splits) : 0;
  }
};

// The same family without splits.
struct UnsplitSpec : Spec {
  static constexpr int kMaxForcedSplits = 0;
};

}  // namespace fake_host

namespace {

RuntimeOptions on_file(const std::string& path) {
  RuntimeOptions o;
  o.cache_path = path;
  return o;
}

using test::error_of;

}  // namespace

TEST_CASE("host_pipeline: forced, tuned or default config, then splits and workspace", "[host]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(on_file(dir.file("k.db")));
  const fake_host::Problem p;
  using fake_host::Spec;

  const auto d = host_pipeline::resolve<Spec>(rt, p, {8, 0}, 4, nullptr, 0);
  CHECK(d.config_key == "t2");
  CHECK(d.source == "default");
  CHECK(d.tuning_key == tuning_key("p1", {{"m", 8}}));
  CHECK(d.threads == 4);
  CHECK(d.splits == 2);
  CHECK(d.workspace_bytes == 200);

  const auto f = host_pipeline::resolve<Spec>(rt, p, {8, 0}, 8, "t5", 3);
  CHECK(f.config_key == "t5");
  CHECK(f.source == "forced");
  CHECK(f.splits == 3);
  CHECK(f.workspace_bytes == 300);

  rt.remember_host_tuned_config("fake_host", tuning_key("p1", {{"m", 8}}), "t7");
  const auto t = host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, nullptr, 0);
  CHECK(t.config_key == "t7");
  CHECK(t.source == "tuned");
  CHECK(t.splits == 8);
  // Another bucket has no tuned row.
  CHECK(host_pipeline::resolve<Spec>(rt, p, {16, 0}, 1, nullptr, 0).source == "default");

  SECTION("a tuned config the host cannot run is never used: the default runs") {
    rt.remember_host_tuned_config("fake_host", tuning_key("p1", {{"m", 8}}), "t9");
    const auto r = host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, nullptr, 0);
    CHECK(r.config_key == "t2");
    CHECK(r.source == "default");
  }
  SECTION("threads <= 0: every hardware thread") {
    CHECK(host_pipeline::resolve<Spec>(rt, p, {8, 0}, 0, nullptr, 0).threads == detail::HostPool::hardware_threads());
  }
  SECTION("a family without splits runs one, with no workspace, whatever the threads") {
    const auto u = host_pipeline::resolve<fake_host::UnsplitSpec>(rt, p, {64, 0}, 1, "t3", 0);
    CHECK(u.splits == 1);
    CHECK(u.workspace_bytes == 0);
  }
}

TEST_CASE("host_pipeline: bad forced configs and split counts are errors naming the field", "[host]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(on_file(dir.file("k.db")));
  const fake_host::Problem p;
  using fake_host::Spec;
  CHECK(error_of([&] { host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, "t9", 0); }) ==
        "ktune fake_host: config: expected a host config that can run p1, got 't9' (t above 8)");
  CHECK(error_of([&] { host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, "x4", 0); }) ==
        "ktune fake_host: config: expected a host config key like t4 (ktune fake_host: config key: expected t<N>, got 'x4'), got "
        "'x4'");
  CHECK(error_of([&] { host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, nullptr, 17); }) ==
        "ktune fake_host: num_splits: expected 0 (planned) or 1..16, got 17");
  CHECK(error_of([&] { host_pipeline::resolve<Spec>(rt, p, {8, 0}, 1, nullptr, -1); }) ==
        "ktune fake_host: num_splits: expected 0 (planned) or 1..16, got -1");
}
