#include "autotune/workload_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/numerics.cuh"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/gpu.hpp"

namespace ktune::autotune::workload_support {

namespace kc = ::ktune_common;

std::map<std::string, int64_t> read_buckets(const TuningBuckets& buckets, const char* who,
                                            const std::vector<std::string>& dims, const char* tunes) {
  std::map<std::string, int64_t> out;
  for (const auto& [dim, value] : buckets) {
    if (std::find(dims.begin(), dims.end(), dim) == dims.end())
      throw Error(Status::invalid_argument, who, fmt::format("unknown bucket '{}' ({})", dim, tunes));
    out[dim] = value;
  }
  return out;
}

namespace {

void store(int dtype, float v, unsigned char* dst) {
  switch (dtype) {
    case kc::kBF16: { const unsigned short h = kc::float_to_bf16(v); std::memcpy(dst, &h, 2); break; }
    case kc::kFP16: { const unsigned short h = kc::float_to_fp16(v); std::memcpy(dst, &h, 2); break; }
    case kc::kE4M3: *dst = kc::float_to_e4m3(v); break;
    default: std::memcpy(dst, &v, 4); break;
  }
}

}  // namespace

std::vector<unsigned char> random_values(int dtype, size_t count, uint64_t seed) {
  const int es = kc::dtype_size(dtype);
  std::vector<unsigned char> out(count * es);
  // Fixed slices, each with its own generator, so the values depend on the seed only; a few threads fill them.
  constexpr size_t kSlices = 8;
  const auto fill = [&](size_t slice) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + slice);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (size_t i = count * slice / kSlices; i < count * (slice + 1) / kSlices; ++i) {
      const float v = normal(rng);
      unsigned char* dst = out.data() + i * es;
      store(dtype, v, dst);
      if (kc::to_float(dtype, dst, 0) == 0.f) store(dtype, v < 0 ? -0.5f : 0.5f, dst);  // rounded to zero
    }
  };
  const size_t threads = std::max<size_t>(1, std::min<size_t>(kSlices, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t s = t; s < kSlices; s += threads) fill(s);
    });
  for (size_t s = 0; s < kSlices; s += threads) fill(s);
  for (auto& th : pool) th.join();
  return out;
}

void tile_pool(size_t bytes, const std::vector<unsigned char>& pool, size_t granule, uint64_t salt,
               const std::function<void(size_t offset, const unsigned char* src, size_t n)>& write) {
  const size_t granules = pool.size() / granule;
  if (granule == 0 || granules < 2)
    throw Error(Status::internal, "autotune workload",
                fmt::format("tile_pool: a pool of {} bytes holds fewer than 2 granules of {}", pool.size(), granule));
  const size_t half = granules / 2;  // in granules: a piece's longest length and the span its start moves in
  size_t off = 0;
  for (uint64_t i = salt; off < bytes; ++i) {
    const size_t start = static_cast<size_t>((i * 7919u) % half) * granule;
    const size_t n = std::min(half * granule, bytes - off);
    write(off, pool.data() + start, n);
    off += n;
  }
}

void tile_pool(unsigned char* dst, size_t bytes, const std::vector<unsigned char>& pool, size_t granule, uint64_t salt) {
  tile_pool(bytes, pool, granule, salt,
            [dst](size_t off, const unsigned char* src, size_t n) { std::memcpy(dst + off, src, n); });
}

internal::DeviceBuffer device_tiled(size_t bytes, const std::vector<unsigned char>& pool, size_t granule,
                                    uint64_t salt, const char* what) {
  internal::DeviceBuffer d(bytes, what);
  tile_pool(bytes, pool, granule, salt, [&d](size_t off, const unsigned char* src, size_t n) { d.upload(src, n, off); });
  return d;
}

int gpu_copies(double copy_bytes, int max_copies, const char* who, const std::string& what) {
  const DeviceLimits lim = device_limits(internal::current_device_ordinal());
  const size_t free_bytes = internal::device_memory_info().free_bytes;
  const double usable = 0.85 * double(free_bytes);
  if (copy_bytes > usable)
    throw Error(Status::unsupported, who,
                fmt::format("{} needs {:.2f} GB of inputs, {:.2f} GB free", what, copy_bytes / 1e9, free_bytes / 1e9));
  const int for_l2 = static_cast<int>(2.0 * lim.l2_bytes / copy_bytes) + 1;
  return std::max(1, std::min({max_copies, for_l2, static_cast<int>(usable / copy_bytes)}));
}

namespace {

// Memory the kernel says a new allocation can have without swapping (MemAvailable), else the physical total.
size_t host_available_bytes() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    std::fclose(f);
    if (found) return size_t(kib) * 1024;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

}  // namespace

int host_copies(size_t copy_bytes, size_t other_bytes, int max_copies, const char* who, const std::string& what) {
  const size_t available = host_available_bytes();
  const double usable = 0.85 * double(available);
  if (double(copy_bytes) + double(other_bytes) > usable)
    throw Error(Status::unsupported, who,
                fmt::format("{} needs {:.2f} GB of host memory for its inputs and outputs, {:.2f} GB available", what,
                            (double(copy_bytes) + double(other_bytes)) / 1e9, available / 1e9));
  constexpr size_t kRotateBytes = size_t{64} << 20;
  const size_t for_llc = kRotateBytes / std::max<size_t>(copy_bytes, 1) + 1;
  const size_t fit = size_t((usable - double(other_bytes)) / std::max(double(copy_bytes), 1.0));
  return static_cast<int>(std::max<size_t>(1, std::min({size_t(max_copies), for_llc, fit})));
}

}  // namespace ktune::autotune::workload_support
