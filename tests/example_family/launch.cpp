// example_scale through the one pipeline (templates/pipeline.hpp): its OpSpec, the host variant, and the
// one-shot calls on top of prepared ops.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "example_family/scale.hpp"
#include "ktune/family.hpp"
#include "ktune/launch.hpp"
#include "ktune/tuning.hpp"
#include "ktune_internal/host_pool.hpp"
#include "host_pipeline.hpp"
#include "pipeline.hpp"

namespace ktune {
namespace {

using example::Config;
using example::Problem;

[[noreturn]] void fail_arg(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(example::kFamily, field, expected, got);
}

void check_args(const Problem& p, const example::Args& a, bool host) {
  if (a.rows < 0 || a.rows > (int64_t{1} << 31) / p.cols)
    fail_arg("rows", fmt::format("0..{} (rows * cols below 2^31)", (int64_t{1} << 31) / p.cols), std::to_string(a.rows));
  if (!std::isfinite(a.alpha)) fail_arg("alpha", "a finite value", fmt::format("{}", a.alpha));
  if (a.rows == 0) return;
  for (auto [ptr, field] : {std::pair<const void*, const char*>{a.x, "x"}, {a.out, "out"}}) {
    if (!ptr) fail_arg(field, host ? "a host pointer" : "a device pointer", "null");
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      fail_arg(field, "a 16-byte aligned pointer", launch_support::ptr_text(ptr));
  }
}

// rows -> the tuning bucket m (next power of two; 0 rows plan as 1).
int64_t row_bucket(int64_t rows) { return bucket_pow2_ceil(rows < 1 ? 1 : rows); }

// The host front end's view of the family (templates/host_pipeline.hpp). The shape is (rows, 0); no splits.
struct HostSpec {
  using Problem = example::Problem;
  using Config = example::Config;
  static constexpr const char* kFamily = example::kFamily;
  static constexpr const char* kConfigGrammar = "a host config key like t4.v4";
  static constexpr int kMaxForcedSplits = 0;
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const pipeline::Shape& s) {
    return {{"m", row_bucket(s.a)}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const pipeline::Shape&) {
    return example::default_config(p, arch);
  }
};

// The host call: resolve -> Runtime::get_host -> rows over the host pool, `t` rows per work item.
void run_on_host(Runtime& rt, const Problem& p, const example::Args& a) {
  p.validate();
  check_args(p, a, true);
  const Config c = host_pipeline::resolve<HostSpec>(rt, p, {a.rows, 0}, 0, a.config, 0).config;
  const LoadedKernel& k = host_pipeline::kernel<HostSpec>(rt, p, c.key(), 1);
  if (a.rows == 0) return;
  using Entry = void (*)(const void*, void*, float, int, int);
  const Entry fn = reinterpret_cast<Entry>(k.functions.at(0));
  const int rows = static_cast<int>(a.rows), grain = c.threads;
  detail::HostPool::instance().run(0, (rows + grain - 1) / grain, 1, [&](int begin, int end) {
    fn(a.x, a.out, a.alpha, begin * grain, std::min(rows, end * grain));
  });
}

}  // namespace

namespace pipeline {

template <>
struct OpSpec<example::Family> : SpecBase<OpSpec<example::Family>, example::Family> {
  using Config = example::Config;
  static constexpr const char* kConfigGrammar = "a config key t<threads>.v<vec>, e.g. t256.v4";
  static constexpr int kMaxForcedSplits = 0;

  static void validate_problem(const Problem& p) { p.validate(); }
  static void validate_shape(const Problem& p, const Args& a) {
    if (a.rows < 0) fail_arg("rows", ">= 0", std::to_string(a.rows));
    (void)p;
  }
  static void validate_args(const Problem& p, const Args& a) { check_args(p, a, false); }
  static bool empty(const Args& a) { return a.rows == 0; }
  static Shape shape(const Problem&, const Args& a) { return {row_bucket(a.rows), 0}; }
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem&, const Shape& s) {
    return {{"m", s.a}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const Shape&) {
    return example::default_config(p, arch);
  }
  static int planned_splits(const Problem&, const Config&, const Shape&, const DeviceLimits&) { return 1; }
  static size_t workspace_bytes(const Problem&, const Config&, const Shape&, int) { return 0; }
  static void run_host(Runtime& rt, const Problem& p, const Args& a) { run_on_host(rt, p, a); }
  static void launch(const LoadedKernel& kernel, const Problem& p, const Resolved<Config>& r, const Args& a,
                     const LaunchStream& stream, void*) {
    const long long n = a.rows * p.cols;
    ktune::launch(kernel, 0, example::launch_dims(p, r.config, a.rows), stream, a.x, a.out, n, a.alpha);
  }
};

}  // namespace pipeline

template class Op<example::Family>;

namespace example {

void scale(Runtime& rt, const Problem& p, const Args& a, void* stream) {
  if (host_device_current()) return run_on_host(rt, p, a);
  pipeline::cached_op<Family>(rt, p).run(a, stream);
}

void scale_host(Runtime& rt, const Problem& p, const Args& a) { run_on_host(rt, p, a); }

Plan scale_plan(Runtime& rt, const Problem& p, int64_t rows, const char* config) {
  Args a;
  a.rows = rows;
  a.config = config;
  return pipeline::cached_op<Family>(rt, p).plan(a);
}

Plan scale_host_plan(Runtime& rt, const Problem& p, int64_t rows, const char* config) {
  p.validate();
  if (rows < 0) fail_arg("rows", ">= 0", std::to_string(rows));
  const auto r = host_pipeline::resolve<HostSpec>(rt, p, {rows, 0}, 0, config, 0);
  Plan plan;
  plan.config = r.config.key();
  plan.source = r.source;
  return plan;
}

CArgs c_args_default() {
  const Args d;
  return CArgs{sizeof(CArgs), c_family_id(kFamily), d.x, d.out, d.rows, d.alpha, d.config};
}

}  // namespace example
}  // namespace ktune
