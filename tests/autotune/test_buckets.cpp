#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "autotune/buckets.hpp"
#include "ktune/error.hpp"

using namespace ktune::autotune;

TEST_CASE("autotune buckets: values round up to the next power of two and clamp", "[autotune]") {
  CHECK(bucket_pow2(1, 1, 256) == 1);
  CHECK(bucket_pow2(2, 1, 256) == 2);
  CHECK(bucket_pow2(3, 1, 256) == 4);
  CHECK(bucket_pow2(4, 1, 256) == 4);
  CHECK(bucket_pow2(5, 1, 256) == 8);
  CHECK(bucket_pow2(64, 1, 256) == 64);
  CHECK(bucket_pow2(65, 1, 256) == 128);
  CHECK(bucket_pow2(255, 1, 256) == 256);
  CHECK(bucket_pow2(256, 1, 256) == 256);
  // Above the largest bucket: the largest (configs are correct for any shape, only tuned for these).
  CHECK(bucket_pow2(257, 1, 256) == 256);
  CHECK(bucket_pow2(int64_t{1} << 40, 1, 256) == 256);
  CHECK(bucket_pow2(std::numeric_limits<int64_t>::max(), 1, 256) == 256);
  // Below the smallest: the smallest.
  CHECK(bucket_pow2(1, 512, 131072) == 512);
  CHECK(bucket_pow2(512, 512, 131072) == 512);
  CHECK(bucket_pow2(513, 512, 131072) == 1024);
  // A largest bucket that is not a power of two is a bucket of its own.
  CHECK(bucket_pow2(32768, 512, 40960) == 32768);
  CHECK(bucket_pow2(32769, 512, 40960) == 40960);
  CHECK(bucket_pow2(40961, 512, 40960) == 40960);
  // A smallest bucket that is not a power of two covers everything up to it.
  CHECK(bucket_pow2(3, 3, 10) == 3);
  CHECK(bucket_pow2(4, 3, 10) == 4);
  CHECK(bucket_pow2(9, 3, 10) == 10);
}

TEST_CASE("autotune buckets: non-positive values and empty ranges are errors naming the field", "[autotune]") {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    try {
      bucket_for(BucketSpec{"batch", 1, 256}, bad);
      FAIL("no error for " << bad);
    } catch (const ktune::Error& e) {
      CHECK(e.status() == ktune::Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("batch: expected a positive size, got " + std::to_string(bad)));
    }
  }
  CHECK_THROWS_WITH(bucket_pow2(0, 1, 8, "seq_len"), Catch::Contains("seq_len"));
  CHECK_THROWS_AS(bucket_pow2(4, 0, 8), ktune::Error);
  CHECK_THROWS_AS(bucket_pow2(4, 16, 8), ktune::Error);
  CHECK_THROWS_WITH(bucket_values(BucketSpec{"tokens", 8, 4}), Catch::Contains("tokens"));
  CHECK_THROWS_AS(bucket_values(BucketSpec{"", 1, 4}), ktune::Error);
}

TEST_CASE("autotune buckets: bucket_values lists every bucket warmup must tune", "[autotune]") {
  CHECK(bucket_values({"batch", 1, 256}) == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256});
  CHECK(bucket_values({"seq_len", 512, 40960}) ==
        std::vector<int>{512, 1024, 2048, 4096, 8192, 16384, 32768, 40960});
  CHECK(bucket_values({"batch", 3, 10}) == std::vector<int>{3, 4, 8, 10});
  CHECK(bucket_values({"batch", 7, 7}) == std::vector<int>{7});
  CHECK(bucket_values({"batch", 1, 1}) == std::vector<int>{1});
}

TEST_CASE("autotune buckets: every value maps to the smallest listed bucket that holds it", "[autotune]") {
  for (BucketSpec spec : {BucketSpec{"batch", 1, 256}, BucketSpec{"seq_len", 512, 40960}, BucketSpec{"b", 3, 100}}) {
    std::vector<int> buckets = bucket_values(spec);
    for (int64_t v = 1; v <= 50000; ++v) {
      int b = bucket_for(spec, v);
      auto it = std::lower_bound(buckets.begin(), buckets.end(), v);
      int want = it == buckets.end() ? buckets.back() : *it;
      if (b != want) FAIL(spec.dim << " value " << v << ": bucket " << b << ", expected " << want);
    }
  }
}
