#pragma once
/**
 * Exact bf16 / fp16 <-> float32 conversions (header-only, no dependencies).
 *
 * - `*_to_float` are exact (every bf16/fp16 value, subnormals included, is a float32).
 * - `float_to_*` round to nearest, ties to even, like PyTorch's `.to(torch.bfloat16/float16)`:
 *   overflow gives ±inf, subnormal results are kept, NaN stays NaN (quiet).
 * - `round_to_bf16` / `round_to_f16` return the rounded value as float (flD in the spec).
 */
#include <bit>
#include <cstdint>

namespace fp4forge::half {

/** float32 of a bfloat16 bit pattern (exact). */
inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/** bfloat16 bits of x, RNE (NaN -> quiet NaN with the sign kept). */
inline std::uint16_t float_to_bf16(float x) noexcept {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/** x rounded to bfloat16 (RNE), as float. */
inline float round_to_bf16(float x) noexcept { return bf16_to_float(float_to_bf16(x)); }

/** float32 of an IEEE binary16 bit pattern (exact, subnormals included). */
inline float f16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  std::uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else if (man == 0) {
    u = sign;  // ±0
  } else {
    // subnormal: value = man * 2^-24, exactly representable as a normal float32
    const float v = static_cast<float>(man) * 0x1p-24f;
    u = sign | std::bit_cast<std::uint32_t>(v);
  }
  return std::bit_cast<float>(u);
}

/** IEEE binary16 bits of x, RNE (overflow -> ±inf, NaN -> quiet NaN). */
inline std::uint16_t float_to_f16(float x) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 -> inf
  if (a >= 0x38800000u) {  // normal binary16 range (>= 2^-14)
    std::uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
    r = (r >> 13) - (112u << 10);  // rebias exponent 127 -> 15 (a mantissa carry is fine)
    return static_cast<std::uint16_t>(sign | r);
  }
  // subnormal (or zero): multiples of 2^-24; the float addition rounds to nearest even exactly.
  const float f = std::bit_cast<float>(a);
  const float r = (f + 0.5f) - 0.5f;  // ulp(0.5) = 2^-24
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r * 0x1p24f));
}

/** x rounded to binary16 (RNE, overflow -> inf), as float. */
inline float round_to_f16(float x) noexcept { return f16_to_float(float_to_f16(x)); }

}  // namespace fp4forge::half
