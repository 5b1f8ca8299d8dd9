// Weight prepack: canonical OCP MXFP4 (w_packed [E, N, K/2], low nibble = even k; w_scale [E, N, K/32]) to the
// kernel's fragment-ordered layout (templates/mxfp4_gemm/params.h, kLayoutVersion), and back. N is padded to a
// multiple of 16 and K to a multiple of 64 with zero codes and scale 127 (1.0), so padding adds exact zeros
// even next to a NaN scale.
#include <cstring>
#include <fstream>
#include <cstdio>
#include <string>

#include "ktune/error.hpp"
#include "mxfp4_gemm/params.h"
#include "mxfp4_gemm/spec.hpp"

namespace ktune::mxfp4 {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw Error(Status::invalid_argument, "mxfp4_gemm prepack", field + ": " + what);
}

// The limits of Problem::validate, so every size below fits easily in 64 bits.
void check_dims(int n, int k, int num_experts) {
  if (n < 1 || n > kMaxN) fail("n", "expected 1.." + std::to_string(kMaxN) + ", got " + std::to_string(n));
  if (k < 32 || k > kMaxK || k % 32 != 0)
    fail("k", "expected a positive multiple of 32 up to " + std::to_string(kMaxK) + ", got " + std::to_string(k));
  if (num_experts < 1 || num_experts > kMaxExperts)
    fail("num_experts", "expected 1.." + std::to_string(kMaxExperts) + ", got " + std::to_string(num_experts));
}

struct Dims {
  int64_t n16, kc, groups;
  int64_t w_words() const { return n16 * kc * 128; }          // per expert
  int64_t s_words() const { return n16 * groups * 32; }       // per expert
};
Dims dims(int n, int k) { return Dims{(n + 15) / 16, (k + 63) / 64, ((k + 63) / 64 + 3) / 4}; }

// Position of the code for (row r in 0..15, column kk in 0..63) inside one lane's 16-byte chunk:
// lane = (r % 8) * 4 + (kk % 8) / 2, word s = kk / 16, code j = (r / 8) + 2 * ((kk % 16) / 8), +4 for odd kk.
inline void place(int r, int kk, int* lane, int* word, int* nib) {
  *lane = (r % 8) * 4 + (kk % 8) / 2;
  *word = kk / 16;
  *nib = (r / 8) + 2 * ((kk % 16) / 8) + 4 * (kk % 2);
}

}  // namespace

int packed_layout_version() { return ktune_mxfp4::kLayoutVersion; }

size_t packed_weight_bytes(int n, int k, int num_experts) {
  check_dims(n, k, num_experts);
  return size_t(dims(n, k).w_words()) * 4 * size_t(num_experts);
}
size_t packed_scale_bytes(int n, int k, int num_experts) {
  check_dims(n, k, num_experts);
  return size_t(dims(n, k).s_words()) * 4 * size_t(num_experts);
}

void prepack_host(const uint8_t* w_packed, const uint8_t* w_scale, int n, int k, int num_experts, uint8_t* out_weight,
                  uint8_t* out_scale) {
  check_dims(n, k, num_experts);
  if (!w_packed) fail("w_packed", "expected a host pointer, got null");
  if (!w_scale) fail("w_scale", "expected a host pointer, got null");
  if (!out_weight) fail("out_weight", "expected a host pointer, got null");
  if (!out_scale) fail("out_scale", "expected a host pointer, got null");
  const Dims d = dims(n, k);
  const int64_t kb = k / 32;
  for (int e = 0; e < num_experts; ++e) {
    const uint8_t* wsrc = w_packed + int64_t(e) * n * (k / 2);
    const uint8_t* ssrc = w_scale + int64_t(e) * n * kb;
    uint32_t* wdst = reinterpret_cast<uint32_t*>(out_weight) + e * d.w_words();
    uint32_t* sdst = reinterpret_cast<uint32_t*>(out_scale) + e * d.s_words();
    std::memset(wdst, 0, size_t(d.w_words()) * 4);
    for (int64_t nt = 0; nt < d.n16; ++nt)
      for (int64_t c = 0; c < d.kc; ++c) {
        uint32_t* chunk = wdst + (c * d.n16 + nt) * 128;  // chunk-major
        for (int r = 0; r < 16; ++r) {
          const int64_t row = nt * 16 + r;
          if (row >= n) continue;
          for (int kk = 0; kk < 64; ++kk) {
            const int64_t col = c * 64 + kk;
            if (col >= k) break;
            const unsigned code = (wsrc[row * (k / 2) + col / 2] >> (4 * (col % 2))) & 0xFu;
            int lane, word, nib;
            place(r, kk, &lane, &word, &nib);
            chunk[lane * 4 + word] |= code << (4 * nib);
          }
        }
      }
    for (int64_t nt = 0; nt < d.n16; ++nt)
      for (int64_t g = 0; g < d.groups; ++g)
        for (int lane = 0; lane < 32; ++lane) {
          const int64_t c = 4 * g + lane % 4;
          uint32_t v = 0;
          for (int b = 0; b < 4; ++b) {  // (r0, 2c), (r1, 2c), (r0, 2c+1), (r1, 2c+1)
            const int64_t row = nt * 16 + lane / 4 + 8 * (b & 1);
            const int64_t blk = 2 * c + (b >> 1);
            const uint32_t byte = (row < n && blk < kb) ? ssrc[row * kb + blk] : 127u;
            v |= byte << (8 * b);
          }
          sdst[(nt * d.groups + g) * 32 + lane] = v;
        }
  }
}

void unpack_host(const uint8_t* packed_weight, const uint8_t* packed_scale, int n, int k, int num_experts,
                 uint8_t* w_packed, uint8_t* w_scale) {
  check_dims(n, k, num_experts);
  if (!packed_weight) fail("packed_weight", "expected a host pointer, got null");
  if (!packed_scale) fail("packed_scale", "expected a host pointer, got null");
  if (!w_packed) fail("w_packed", "expected a host pointer, got null");
  if (!w_scale) fail("w_scale", "expected a host pointer, got null");
  const Dims d = dims(n, k);
  const int64_t kb = k / 32;
  for (int e = 0; e < num_experts; ++e) {
    const uint32_t* wsrc = reinterpret_cast<const uint32_t*>(packed_weight) + e * d.w_words();
    const uint32_t* ssrc = reinterpret_cast<const uint32_t*>(packed_scale) + e * d.s_words();
    uint8_t* wdst = w_packed + int64_t(e) * n * (k / 2);
    uint8_t* sdst = w_scale + int64_t(e) * n * kb;
    std::memset(wdst, 0, size_t(n) * (k / 2));
    for (int64_t row = 0; row < n; ++row)
      for (int64_t col = 0; col < k; ++col) {
        int lane, word, nib;
        place(int(row % 16), int(col % 64), &lane, &word, &nib);
        const uint32_t w = wsrc[((col / 64) * d.n16 + row / 16) * 128 + lane * 4 + word];
        wdst[row * (k / 2) + col / 2] |= uint8_t(((w >> (4 * nib)) & 0xFu) << (4 * (col % 2)));
      }
    for (int64_t row = 0; row < n; ++row)
      for (int64_t blk = 0; blk < kb; ++blk) {
        const int64_t c = blk / 2, g = c / 4;
        const int lane = int((row % 8) * 4 + c % 4);
        const int b = int((row % 16) / 8 + 2 * (blk % 2));
        sdst[row * kb + blk] = uint8_t(ssrc[((row / 16) * d.groups + g) * 32 + lane] >> (8 * b));
      }
  }
}

namespace {
constexpr char kMagic[8] = {'K', 'T', 'M', 'X', 'F', 'P', '4', '\0'};
template <class T>
void put(std::ofstream& o, T v) {
  o.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
bool get(std::ifstream& i, T* v) {
  return bool(i.read(reinterpret_cast<char*>(v), sizeof *v));
}
}  // namespace

void write_packed_file(const std::string& path, const PackedFile& f) {
  if (f.layout_version != packed_layout_version())
    fail("layout_version", "expected " + std::to_string(packed_layout_version()) + ", got " + std::to_string(f.layout_version));
  if (f.weight.size() != packed_weight_bytes(f.n, f.k, f.num_experts))
    fail("weight", "expected " + std::to_string(packed_weight_bytes(f.n, f.k, f.num_experts)) + " bytes, got " +
                       std::to_string(f.weight.size()));
  if (f.scales.size() != packed_scale_bytes(f.n, f.k, f.num_experts))
    fail("scales", "expected " + std::to_string(packed_scale_bytes(f.n, f.k, f.num_experts)) + " bytes, got " +
                       std::to_string(f.scales.size()));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    if (!o) fail("path", "cannot write '" + tmp + "'");
    o.write(kMagic, 8);
    put<int32_t>(o, f.layout_version);
    put<int32_t>(o, f.n);
    put<int32_t>(o, f.k);
    put<int32_t>(o, f.num_experts);
    put<int64_t>(o, int64_t(f.weight.size()));
    put<int64_t>(o, int64_t(f.scales.size()));
    o.write(reinterpret_cast<const char*>(f.weight.data()), std::streamsize(f.weight.size()));
    o.write(reinterpret_cast<const char*>(f.scales.data()), std::streamsize(f.scales.size()));
    if (!o.flush()) fail("path", "write to '" + tmp + "' failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("path", "cannot rename '" + tmp + "' to '" + path + "'");
}

PackedFile read_packed_file(const std::string& path) {
  std::ifstream i(path, std::ios::binary);
  if (!i) fail("path", "cannot open '" + path + "'");
  char magic[8] = {};
  if (!i.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0)
    fail("path", "'" + path + "' is not a ktune MXFP4 prepacked weight (bad magic)");
  PackedFile f;
  int32_t v = 0, n = 0, k = 0, e = 0;
  int64_t wb = 0, sb = 0;
  if (!get(i, &v) || !get(i, &n) || !get(i, &k) || !get(i, &e) || !get(i, &wb) || !get(i, &sb))
    fail("path", "'" + path + "': truncated header");
  if (v != packed_layout_version())
    fail("layout_version", "expected " + std::to_string(packed_layout_version()) + " (this ktune's packed layout), got " +
                               std::to_string(v) + " in '" + path + "': repack the canonical weight with this ktune");
  f.layout_version = v;
  f.n = n;
  f.k = k;
  f.num_experts = e;
  check_dims(n, k, e);
  if (wb != int64_t(packed_weight_bytes(n, k, e)) || sb != int64_t(packed_scale_bytes(n, k, e)))
    fail("path", "'" + path + "': blob sizes do not match n, k, num_experts");
  f.weight.resize(size_t(wb));
  f.scales.resize(size_t(sb));
  if (!i.read(reinterpret_cast<char*>(f.weight.data()), wb) || !i.read(reinterpret_cast<char*>(f.scales.data()), sb))
    fail("path", "'" + path + "': truncated data");
  return f;
}

}  // namespace ktune::mxfp4
