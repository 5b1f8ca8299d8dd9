// The host backend as a second oracle for the GPU kernel. LLVM is not on the GPU machine, so the
// check runs in two halves: on the GPU, `[.][xqa_oracle_dump]` runs a fixed list of cases (inputs regenerated
// from a recorded seed) and writes the kernel's raw output bytes to a fixture file; on any machine with the
// host backend, `[host][oracle]` regenerates the same inputs, runs the LLVM-compiled host kernel and compares
// it with the recorded GPU output (and both with the fp64 reference). tests/data/ holds the fixture made on
// the H200; its header names the date and device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/random_inputs.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune::test {

struct OracleCase {
  std::string name;
  ktune::xqa::Problem problem;
  int batch = 3, max_seq_len = 600, ragged = 0, window_left = 64;
  double zero_fraction = 0.0;
};

// Small, fixed: one case per numerics path (bf16/fp16/e4m3 KV, e4m3 Q and output, q_len 1/4/7, masks, sinks,
// window, softcap, LSE, ragged padding).
std::vector<OracleCase> oracle_cases();
XqaRandomCase make_oracle_case(const OracleCase& oc, uint64_t seed);
// FNV-1a over every input array of the case: the fixture records it so a changed input generator is reported
// as a stale fixture, not as a kernel mismatch.
uint64_t oracle_input_digest(const XqaRandomCase& c);

struct OracleRecord {
  std::string name, problem_key, config;  // config: what the GPU launch used
  uint64_t seed = 0, input_digest = 0;
  std::vector<unsigned char> out;         // raw output bytes (out dtype), poisoned with 0xFF before the launch
  std::vector<float> lse;                 // empty unless the problem writes LSE
};

struct OracleFile {
  std::string header;  // free text: date, device, driver, command
  std::vector<OracleRecord> records;
};

void write_oracle_file(const std::string& path, const OracleFile& f);
// Throws std::runtime_error naming the path and what is wrong.
OracleFile read_oracle_file(const std::string& path);

}  // namespace ktune::test
