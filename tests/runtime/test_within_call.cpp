// pipeline::within_call: the stream a split call's second kernel (the combine) is launched on. From sm_90 on it
// is programmatically dependent on the call's first kernel whatever Op::set_pdl says (the combine waits for
// that kernel with griddepcontrol.wait); below sm_90 there is no griddepcontrol, so the attribute is never set.
#include <catch2/catch.hpp>

#include "ktune/device.hpp"
#include "pipeline.hpp"

using namespace ktune;

namespace {

LaunchStream combine_stream(const char* arch, bool op_pdl) {
  internal::DeviceFacts dev;
  dev.arch = Arch::parse(arch);
  int stream_tag = 0;
  const LaunchStream s = pipeline::within_call(LaunchStream{&stream_tag, op_pdl}, dev);
  CHECK(s.stream == &stream_tag);  // the call's own stream
  return s;
}

}  // namespace

TEST_CASE("within_call: the combine follows its decode programmatically from sm_90 on", "[pipeline]") {
  for (const char* arch : {"sm_90a", "sm_100a", "sm_120a"}) {
    INFO(arch);
    CHECK(combine_stream(arch, false).pdl);
    CHECK(combine_stream(arch, true).pdl);
  }
  for (const char* arch : {"sm_80", "sm_89"}) {
    INFO(arch);
    CHECK_FALSE(combine_stream(arch, false).pdl);
    CHECK_FALSE(combine_stream(arch, true).pdl);
  }
}
