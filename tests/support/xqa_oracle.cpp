#include "support/xqa_oracle.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/dtype.h"

namespace ktune::test {

namespace kc = ::ktune_common;
using ktune::xqa::Layout;
using ktune::xqa::MaskKind;
using ktune::xqa::Problem;

namespace {

constexpr auto problem = make_xqa_problem;

constexpr char kMagic[8] = {'k', 't', 'o', 'r', 'c', 'l', '0', '1'};

template <class T>
void put(std::ofstream& f, const T& v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_str(std::ofstream& f, const std::string& s) {
  put<uint32_t>(f, uint32_t(s.size()));
  f.write(s.data(), std::streamsize(s.size()));
}

struct Reader {
  std::ifstream f;
  std::string path;
  template <class T>
  T get() {
    T v{};
    if (!f.read(reinterpret_cast<char*>(&v), sizeof(T))) throw std::runtime_error(path + ": truncated");
    return v;
  }
  std::string get_str(uint32_t max = 1u << 20) {
    const uint32_t n = get<uint32_t>();
    if (n > max) throw std::runtime_error(path + ": bad string length");
    std::string s(n, '\0');
    if (n && !f.read(&s[0], n)) throw std::runtime_error(path + ": truncated");
    return s;
  }
};

}  // namespace

std::vector<OracleCase> oracle_cases() {
  const kc::DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  const Layout H = Layout::Hnd, N = Layout::Nhd;
  std::vector<OracleCase> v;
  auto add = [&](const char* name, Problem p, int ragged, double zero, int window_left) {
    OracleCase c;
    c.name = name;
    c.problem = p;
    c.ragged = ragged;
    c.zero_fraction = zero;
    c.window_left = window_left;
    v.push_back(c);
  };
  add("bf16_q1", problem(128, 32, 8, 32, H, BF, BF, BF, 1, MaskKind::None, false, false, false, false), 0, 0, 64);
  add("fp16_nhd_q4_causal_lse", problem(128, 16, 4, 16, N, FP, FP, FP, 4, MaskKind::Causal, false, false, false, true), 0, 0, 64);
  add("e4m3kv_q1_sink", problem(128, 32, 8, 32, H, BF, E4, BF, 1, MaskKind::None, true, false, false, true), 0, 0, 64);
  add("e4m3kv_q7_mask_ragged", problem(64, 16, 2, 32, H, BF, E4, BF, 7, MaskKind::Explicit, false, false, false, true), 1, 0.3, 64);
  add("bf16_q4_window_softcap", problem(64, 8, 2, 16, N, BF, BF, BF, 4, MaskKind::Causal, true, true, true, true), 0, 0, 40);
  add("e4m3q_e4m3out_q1", problem(64, 8, 2, 32, H, E4, E4, E4, 1, MaskKind::None, false, false, false, false), 0, 0, 64);
  add("d256_bf16_q2_causal", problem(256, 8, 2, 64, H, BF, BF, BF, 2, MaskKind::Causal, false, false, false, true), 0, 0, 64);
  return v;
}

XqaRandomCase make_oracle_case(const OracleCase& oc, uint64_t seed) {
  XqaRandomOptions o;
  o.batch = oc.batch;
  o.max_seq_len = oc.max_seq_len;
  o.ragged = oc.ragged == 1;
  o.zero_fraction = oc.zero_fraction;
  o.window_left = oc.window_left;
  o.seed = seed;
  return make_xqa_case(oc.problem, o);
}

uint64_t oracle_input_digest(const XqaRandomCase& c) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  mix(c.q.data(), c.q.size());
  mix(c.kv.data(), c.kv.size());
  mix(c.block_tables.data(), c.block_tables.size() * sizeof(int));
  mix(c.seq_lens.data(), c.seq_lens.size() * sizeof(int));
  mix(c.q_cu.data(), c.q_cu.size() * sizeof(int));
  mix(c.mask.data(), c.mask.size() * sizeof(unsigned short));
  mix(c.sinks.data(), c.sinks.size() * sizeof(float));
  const float scalars[] = {c.k_scale, c.v_scale, c.bmm1_scale, c.bmm2_scale, c.softcap};
  mix(scalars, sizeof(scalars));
  return h;
}

void write_oracle_file(const std::string& path, const OracleFile& file) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error(path + ": cannot write");
  f.write(kMagic, sizeof(kMagic));
  put_str(f, file.header);
  put<uint32_t>(f, uint32_t(file.records.size()));
  for (const OracleRecord& r : file.records) {
    put_str(f, r.name);
    put_str(f, r.problem_key);
    put_str(f, r.config);
    put<uint64_t>(f, r.seed);
    put<uint64_t>(f, r.input_digest);
    put<uint64_t>(f, r.out.size());
    f.write(reinterpret_cast<const char*>(r.out.data()), std::streamsize(r.out.size()));
    put<uint64_t>(f, r.lse.size());
    f.write(reinterpret_cast<const char*>(r.lse.data()), std::streamsize(r.lse.size() * sizeof(float)));
  }
  if (!f) throw std::runtime_error(path + ": write failed");
}

OracleFile read_oracle_file(const std::string& path) {
  Reader r{std::ifstream(path, std::ios::binary), path};
  if (!r.f) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!r.f.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) throw std::runtime_error(path + ": not an oracle file");
  OracleFile file;
  file.header = r.get_str();
  const uint32_t n = r.get<uint32_t>();
  if (n > 1000) throw std::runtime_error(path + ": bad record count");
  for (uint32_t i = 0; i < n; ++i) {
    OracleRecord rec;
    rec.name = r.get_str(256);
    rec.problem_key = r.get_str(256);
    rec.config = r.get_str(256);
    rec.seed = r.get<uint64_t>();
    rec.input_digest = r.get<uint64_t>();
    const uint64_t nout = r.get<uint64_t>();
    if (nout > (64u << 20)) throw std::runtime_error(path + ": bad output size");
    rec.out.resize(nout);
    if (nout && !r.f.read(reinterpret_cast<char*>(rec.out.data()), std::streamsize(nout)))
      throw std::runtime_error(path + ": truncated");
    const uint64_t nlse = r.get<uint64_t>();
    if (nlse > (16u << 20)) throw std::runtime_error(path + ": bad lse size");
    rec.lse.resize(nlse);
    if (nlse && !r.f.read(reinterpret_cast<char*>(rec.lse.data()), std::streamsize(nlse * sizeof(float))))
      throw std::runtime_error(path + ": truncated");
    file.records.push_back(std::move(rec));
  }
  return file;
}

}  // namespace ktune::test
