#include "fp4forge/codec/mxfp4_cast.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace fp4forge::mxcast {
namespace {

/** The exponent of scale element i, or nullopt (why set) when it is no power of two. */
std::optional<int> exponent(const std::byte* scales, std::uint64_t i, DType dtype, std::string& why) {
  if (dtype == DType::F8_E8M0 || dtype == DType::U8) {
    const auto b = static_cast<std::uint8_t>(scales[i]);
    if (b == 0xFF) {
      why = fmt::format("scale element {} is the E8M0 NaN (0xFF)", i);
      return std::nullopt;
    }
    return static_cast<int>(b) - 127;
  }
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, scales + i * 4, 4);
    int e = 0;
    if (!(f > 0.0f) || !std::isfinite(f) || std::frexp(f, &e) != 0.5f) {
      why = fmt::format("scale element {} is {}, not a power of two", i, f);
      return std::nullopt;
    }
    return e - 1;
  }
  why = fmt::format("scales are {}, not E8M0", dtype_name(dtype));
  return std::nullopt;
}

}  // namespace

void add_scales(Range& r, const std::byte* scales, std::uint64_t count, DType dtype) {
  for (std::uint64_t i = 0; i < count && r.why.empty(); ++i) {
    const auto k = exponent(scales, i, dtype, r.why);
    if (!k) return;
    r.kmin = std::min(r.kmin, *k);
    r.kmax = std::max(r.kmax, *k);
  }
}

std::optional<int> shift(Range& r, Target t) {
  if (!r.why.empty()) return std::nullopt;
  if (r.kmax < r.kmin) {
    r.why = "no scales";
    return std::nullopt;
  }
  if (t == Target::MXFP4) {
    if (r.kmin < -127 || r.kmax > 127) {
      r.why = fmt::format("block exponents 2^{} to 2^{} reach past E8M0's 2^-127 to 2^127", r.kmin, r.kmax);
      return std::nullopt;
    }
    return 0;
  }
  if (r.kmax - r.kmin > 17) {
    r.why = fmt::format("block exponents span 2^{} to 2^{}, more than the 2^17 an E4M3 block scale covers under one "
                        "global scale",
                        r.kmin, r.kmax);
    return std::nullopt;
  }
  const int m = r.kmax - 8;
  if (-m > 127 || -m < -126) {
    r.why = fmt::format("the global scale 2^{} is not a normal float32", -m);
    return std::nullopt;
  }
  return m;
}

float global_scale(int m) noexcept { return std::ldexp(1.0f, -m); }

std::uint8_t e4m3_pow2(int t) noexcept {
  if (t >= -6) return static_cast<std::uint8_t>((t + 7) << 3);  // normal: exponent field t + 7, mantissa 0
  return static_cast<std::uint8_t>(1u << (t + 9));              // subnormal: 2^-9 x {1, 2, 4}
}

void cast_rows(const std::byte* packed, const std::byte* scales, DType dtype, std::uint64_t rows, std::uint64_t cols,
               Target t, int m, std::byte* payload_out, std::byte* scales_out) noexcept {
  std::memcpy(payload_out, packed, static_cast<std::size_t>(rows * cols / 2));
  const std::uint64_t src_cols = (cols + 31) / 32;
  std::string why;
  if (t == Target::MXFP4) {  // one E8M0 byte per 32, as the source's
    for (std::uint64_t i = 0; i < rows * src_cols; ++i)
      scales_out[i] = static_cast<std::byte>(exponent(scales, i, dtype, why).value_or(0) + 127);
    return;
  }
  // Each source scale covers two 16-blocks: its exponent is read once and written twice (the last block of a
  // row whose width is an odd number of 16s stands alone).
  const std::uint64_t out_cols = cols / 16;
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t b = 0; b < out_cols; b += 2) {
      const int k = exponent(scales, r * src_cols + b / 2, dtype, why).value_or(m);
      const auto code = static_cast<std::byte>(e4m3_pow2(k - m));
      scales_out[r * out_cols + b] = code;
      if (b + 1 < out_cols) scales_out[r * out_cols + b + 1] = code;
    }
}

}  // namespace fp4forge::mxcast
