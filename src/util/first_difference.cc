#include "fp4forge/util/first_difference.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "fp4forge/util/thread_pool.h"

namespace fp4forge {

namespace {
// The first differing offset within [lo, hi) of two equally long ranges, or nullopt.
std::optional<std::uint64_t> scan(const std::byte* a, const std::byte* b, std::uint64_t lo, std::uint64_t hi) {
  constexpr std::uint64_t kStep = 4096;  // memcmp a page at a time, then bytes within the differing page
  for (std::uint64_t i = lo; i < hi; i += kStep) {
    const std::uint64_t n = std::min(kStep, hi - i);
    if (std::memcmp(a + i, b + i, n) == 0) continue;
    for (std::uint64_t j = i;; ++j)
      if (a[j] != b[j]) return j;
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::uint64_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b,
                                              ThreadPool* pool) {
  const std::uint64_t n = std::min(a.size(), b.size());
  constexpr std::uint64_t kRange = std::uint64_t{8} << 20;
  std::optional<std::uint64_t> first;
  if (pool == nullptr || pool->size() <= 1 || n <= kRange) {
    first = scan(a.data(), b.data(), 0, n);
  } else {
    const std::size_t tasks = static_cast<std::size_t>((n + kRange - 1) / kRange);
    std::vector<std::optional<std::uint64_t>> found(tasks);
    parallel_for(*pool, tasks, [&](std::size_t k) {
      const std::uint64_t lo = k * kRange;
      found[k] = scan(a.data(), b.data(), lo, std::min(n, lo + kRange));
    });
    for (const auto& f : found)
      if (f) {
        first = f;
        break;
      }
  }
  if (first) return first;
  if (a.size() != b.size()) return n;
  return std::nullopt;
}

}  // namespace fp4forge
