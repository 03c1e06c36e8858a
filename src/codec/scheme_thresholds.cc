// Decision thresholds of the MXFP4A16 and W4A16 fast paths (scheme_fast.h): the references' decisions
// turned into integer bounds on the source magnitude bits, found by binary search with the references'
// own arithmetic (as nvfp4_thresholds.cc does for NVFP4). Plain scalar code; the Highway kernels only
// read the tables.
#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "codec/magnitude_bounds.h"
#include "codec/scheme_fast.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/util/thread_owned.h"

namespace fp4forge::scheme_fast {
namespace {

using codec_detail::bound_of;
using codec_detail::mag_value;

// mxfp4_ref.cc step 3 for a weight of magnitude bits m and scale s: bound b < 7 -> "its FP4 index is
// >= b + 1"; b == 7 -> "q != 0" (a negative weight gets the sign bit iff q < 0, i.e. q(|w|) > 0).
bool mx_decision(DType dt, float s, std::int64_t m, std::size_t b) {
  float q = scheme_ref::round_d(mag_value(dt, m) / s, dt);  // x / scale in D
  if (b == 7) return q > 0.0f;
  q = std::min(std::max(q, -6.0f), 6.0f);
  return (nvfp4::detail::ref_fp4_code(q) & 7u) >= b + 1;
}

std::vector<MxEntry> build_mx(DType dt) {
  const int fields = dt == DType::F16 ? 32 : 256;
  std::vector<MxEntry> t(static_cast<std::size_t>(fields));
  for (int e = 0; e < fields; ++e) {
    // The power of two (or 0, or inf) whose exponent field is e: round_to_power_2 gives it back, and
    // group_scale depends on round_to_power_2's result alone.
    const float p2 = dt == DType::F16 ? half::f16_to_float(static_cast<std::uint16_t>(e << 10))
                                      : std::bit_cast<float>(static_cast<std::uint32_t>(e) << 23);
    MxEntry& x = t[static_cast<std::size_t>(e)];
    float s = 1.0f;
    x.ok = mxfp4::group_scale(p2, dt, &x.code, &s);
    if (!x.ok) continue;
    for (std::size_t b = 0; b < 8; ++b) {
      const std::int64_t g = bound_of(dt, [&](std::int64_t m) { return mx_decision(dt, s, m, b); });
      if (dt == DType::F32) {
        std::fill_n(reinterpret_cast<std::int32_t*>(x.bounds) + b * 16, 16, static_cast<std::int32_t>(g));
      } else {
        std::fill_n(reinterpret_cast<std::int16_t*>(x.bounds) + b * 32, 32, static_cast<std::int16_t>(g));
      }
    }
  }
  return t;
}

// w4a16_ref.cc step 3 for a weight of magnitude bits m and scale s, without the sign: c = the rounded
// |q| clamped to 8, i.e. nearbyint(min(flD(|w| / s), 8)); "c >= b + 1" is monotone in m. The stored
// value is 8 + min(c, 7) for w >= 0 and 8 - c for w < 0 (the reference clamps q to [-8, 7] before the
// half-even rounding, which is symmetric).
bool w4_decision(DType dt, float s, std::int64_t m, std::size_t b) {
  float q = scheme_ref::round_d(mag_value(dt, m) / s, dt);  // x / scale in D
  q = std::min(q, 8.0f);
  return static_cast<std::size_t>(std::nearbyint(q)) >= b + 1;
}

}  // namespace

const MxEntry* mxfp4_entries(DType dt) {
  static std::once_flag once[3];
  static std::vector<MxEntry> tables[3];
  const int i = dt == DType::BF16 ? 0 : dt == DType::F16 ? 1 : 2;
  std::call_once(once[i], [&] { tables[i] = build_mx(dt == DType::BF16 || dt == DType::F16 ? dt : DType::F32); });
  return tables[i].data();
}

const std::int16_t* w4a16_bounds(DType dt, std::uint16_t s_bits) {
  struct Cache {
    std::vector<std::int16_t> bounds;  // 8 per scale pattern
    std::vector<std::uint8_t> built;
  };
  static ThreadOwned<Cache> caches[2];  // not a thread_local with a destructor: see thread_owned.h
  Cache& c = caches[dt == DType::F16 ? 1 : 0].get();
  if (c.built.empty()) {
    c.bounds.resize(65536 * 8);
    c.built.resize(65536);
  }
  std::int16_t* b = c.bounds.data() + std::size_t{s_bits} * 8;
  if (!c.built[s_bits]) {
    const float s = dt == DType::F16 ? half::f16_to_float(s_bits) : half::bf16_to_float(s_bits);
    for (std::size_t k = 0; k < 8; ++k)
      b[k] = static_cast<std::int16_t>(bound_of(dt, [&](std::int64_t m) { return w4_decision(dt, s, m, k); }));
    c.built[s_bits] = 1;
  }
  return b;
}

}  // namespace fp4forge::scheme_fast
