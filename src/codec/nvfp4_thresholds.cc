// ThresholdTable: the reference's FP4 decisions turned into integer thresholds on the source bits
// (see nvfp4_internal.h). Plain scalar code; the Highway kernels only read the table.
#include <algorithm>
#include <bit>

#include "codec/magnitude_bounds.h"
#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/util/thread_owned.h"

namespace fp4forge::nvfp4::detail {
namespace {

using codec_detail::mag_value;

// Boundary b of the reference decision for a weight of magnitude bits m: b < 7 -> "its FP4 index
// is >= b + 1"; b == 7 -> "its quotient is not zero". Exactly the reference's arithmetic:
// q = fl32(w / eff), clamp to [-6, 6], Appendix A thresholds.
bool decision(DType dt, float eff, std::int64_t m, std::size_t b) {
  float q = mag_value(dt, m) / eff;
  if (b == 7) return q > 0.0f;
  q = std::min(std::max(q, -6.0f), 6.0f);
  return (ref_fp4_code(q) & 7u) >= b + 1;
}

}  // namespace

std::int64_t ThresholdTable::compute_bound(DType dt, float gs, std::uint8_t code, std::size_t b) {
  const float s = e4m3_to_float(code);
  const float eff = s / gs;  // eff = fl32(s / gs), as the reference
  return codec_detail::bound_of(dt, [&](std::int64_t m) { return decision(dt, eff, m, b); });  // monotone in m
}

void ThresholdTable::reset(DType dt, float gs) {
  dt_ = dt;
  gs_ = gs;
  built_lo_ = kCodes;
  built_hi_ = -1;
}

void ThresholdTable::extend(std::uint8_t lo, std::uint8_t hi) {
  lo &= 0x7F;
  hi &= 0x7F;
  const int new_lo = built_lo_ > built_hi_ ? lo : std::min<int>(lo, built_lo_);
  const int new_hi = built_lo_ > built_hi_ ? hi : std::max<int>(hi, built_hi_);
  for (int c = new_lo; c <= new_hi; ++c)
    if (c < built_lo_ || c > built_hi_) build(static_cast<std::uint8_t>(c));
  built_lo_ = new_lo;
  built_hi_ = new_hi;
}

void ThresholdTable::build(std::uint8_t c) {
  c &= 0x7F;
  for (std::size_t b = 0; b < kBounds; ++b) {
    const std::int64_t g = compute_bound(dt_, gs_, c, b);
    if (dt_ == DType::F32) {
      std::int32_t* v = reinterpret_cast<std::int32_t*>(storage_) + (std::size_t{c} * kBounds + b) * kLanes;
      std::fill(v, v + kLanes, static_cast<std::int32_t>(g));
    } else {
      std::int16_t* v = reinterpret_cast<std::int16_t*>(storage_) + (std::size_t{c} * kBounds + b) * kLanes;
      std::fill(v, v + kLanes, static_cast<std::int16_t>(g));
    }
  }
}

ThresholdTable& ThresholdTable::thread_table(DType dt, float gs) {
  static ThreadOwned<ThresholdTable> tables;  // not a thread_local with a destructor: see thread_owned.h
  ThresholdTable& table = tables.get();  // a fresh table is in reset's state (no code built)
  if (table.dt_ != dt || std::bit_cast<std::uint32_t>(table.gs_) != std::bit_cast<std::uint32_t>(gs)) table.reset(dt, gs);
  return table;
}

}  // namespace fp4forge::nvfp4::detail
