// first_difference (util/first_difference.h): the first differing byte, for any pool, across range edges.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/util/first_difference.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

std::vector<std::byte> pattern(std::uint64_t n) {
  std::vector<std::byte> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  return v;
}

TEST(FirstDifference, TheFirstDifferingByteForAnyPool) {
  const std::uint64_t n = 20 * kMiB + 13;  // three 8 MiB ranges, the last one short
  const auto a = pattern(n);
  ThreadPool p1(1), p3(3), p8(8);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &p1, &p3, &p8}) {
    EXPECT_EQ(first_difference(a, a, pool), std::nullopt);
    for (std::uint64_t at : {std::uint64_t{0}, std::uint64_t{4095}, std::uint64_t{4096}, 8 * kMiB - 1, 8 * kMiB,
                             8 * kMiB + 1, 16 * kMiB + 7, n - 1}) {
      auto b = a;
      b[at] ^= std::byte{0x40};
      EXPECT_EQ(first_difference(a, b, pool), at) << at;
      EXPECT_EQ(first_difference(b, a, pool), at) << at;
      // A later difference, in another range, does not hide the first.
      if (at + 9 * kMiB < n) {
        b[at + 9 * kMiB] ^= std::byte{1};
        EXPECT_EQ(first_difference(a, b, pool), at) << at;
      }
    }
    // One a prefix of the other: the shorter size.
    const std::span<const std::byte> whole(a), head = whole.first(12 * kMiB);
    EXPECT_EQ(first_difference(whole, head, pool), 12 * kMiB);
    EXPECT_EQ(first_difference(head, whole, pool), 12 * kMiB);
    // Empty ranges.
    EXPECT_EQ(first_difference({}, {}, pool), std::nullopt);
    EXPECT_EQ(first_difference(whole.first(3), {}, pool), 0u);
  }
}

}  // namespace
}  // namespace fp4forge
