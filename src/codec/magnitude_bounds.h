#pragma once
// Internal to the codec: the one home of "a reference decision turned into an integer bound on the source
// magnitude bits", shared by the NVFP4 threshold table (nvfp4_thresholds.cc) and the MXFP4A16 / W4A16 ones
// (scheme_thresholds.cc). Plain scalar code; the Highway kernels only read the tables built with it.
#include <bit>
#include <cstdint>

#include "fp4forge/codec/half.h"
#include "fp4forge/core/dtype.h"

namespace fp4forge::codec_detail {

/** Largest finite magnitude bit pattern of a source dtype (integer order = value order up to it). */
inline std::int64_t max_finite_mag(DType dt) {
  switch (dt) {
    case DType::BF16: return 0x7F7F;
    case DType::F16: return 0x7BFF;
    default: return 0x7F7FFFFF;
  }
}

/** The non-negative source value whose magnitude bits are m (exact in float). */
inline float mag_value(DType dt, std::int64_t m) {
  switch (dt) {
    case DType::BF16: return half::bf16_to_float(static_cast<std::uint16_t>(m));
    case DType::F16: return half::f16_to_float(static_cast<std::uint16_t>(m));
    default: return std::bit_cast<float>(static_cast<std::uint32_t>(m));
  }
}

/** The largest magnitude m for which decide(m) is false, for a decide that is monotone in m (false, then true),
 * by binary search; the largest finite magnitude when it is never true (then mag > bound never holds). */
template <class F>
std::int64_t bound_of(DType dt, F decide) {
  const std::int64_t top = max_finite_mag(dt);
  if (!decide(top)) return top;
  std::int64_t lo = 0, hi = top;  // smallest m with decide(m)
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (decide(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo - 1;  // mag > lo - 1  <=>  mag >= lo
}

}  // namespace fp4forge::codec_detail
