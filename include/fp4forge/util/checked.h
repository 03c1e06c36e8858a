#pragma once
/**
 * Checked unsigned arithmetic: the one home of every product and sum of sizes that user input can make
 * large (plan's per-request KV bytes, its overhead terms, the memory a concurrency needs). A result that
 * does not fit 64 bits saturates at kSaturated instead of wrapping, so an absurd seat reads as "more than
 * any GPU holds" and never as a small number that fits (reliability round 4, R4-B9: max_model_len = 2^62
 * once wrapped the per-request bytes to 0 and the seat "fit").
 */
#include <cstdint>
#include <initializer_list>
#include <limits>

namespace fp4forge::util {

/** The saturated value: every size at or above it is "too large to represent". */
inline constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

/** a + b, or kSaturated when the sum does not fit. */
constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}

/** a * b, or kSaturated when the product does not fit (a saturated factor stays saturated unless the
 * other is 0). */
constexpr std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

/** The product of every factor, saturating. */
constexpr std::uint64_t sat_mul(std::initializer_list<std::uint64_t> factors) noexcept {
  std::uint64_t r = 1;
  for (std::uint64_t f : factors) r = sat_mul(r, f);
  return r;
}

/** A non-negative double as bytes: truncated, or kSaturated at and above 2^64 (and for NaN). */
inline std::uint64_t sat_from_double(double x) noexcept {
  if (!(x >= 0.0)) return x == x ? 0 : kSaturated;  // negative -> 0, NaN -> saturated
  if (x >= 18446744073709551616.0) return kSaturated;
  return static_cast<std::uint64_t>(x);
}

}  // namespace fp4forge::util
