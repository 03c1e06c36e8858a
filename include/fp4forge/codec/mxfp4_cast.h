#pragma once
/**
 * The closed-form MXFP4 -> NVFP4 cast (docs/fp8-sources.md "The lossless cast"; NVIDIA Model-Optimizer a2fbac7b
 * ships the same for gpt-oss and DeepSeek-V4 experts). A packed E2M1 source (two codes per byte, one E8M0 scale
 * 2^k_j per 32 elements of a row) is written as NVFP4 without touching a code:
 *
 *   m = k_max - 8                          k_max: the largest block exponent of the fused set
 *   weight_global_scale = 2^-m             (compressed-tensors stores the divisor)
 *   weight_scale of each 16-block = E4M3 2^(k_j - m)   (both halves of a 32-block alike)
 *   weight_packed = the source's bytes     (NVFP4 packs element 2j in the low nibble too)
 *
 * Dequantized, E2M1(code) x fl32(2^(k_j - m) / 2^-m) = E2M1(code) x 2^k_j exactly: the source's own expansion.
 * It exists when every k_j - m is a power of two E4M3 holds, 2^-9 (subnormal) to 2^8, i.e. k_max - k_j <= 17,
 * and 2^-m is a finite normal float32. Scales must be E8M0 (F8_E8M0, U8 exponents) or exact powers of two in F32.
 *
 * Into compressed-tensors' MXFP4A16 (`mxfp4-pack-quantized`: the same packing, a U8 biased exponent per 32) the cast
 * is a copy: the codes, and each scale as its E8M0 byte (every exponent from 2^-127 to 2^127 is one).
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fp4forge/core/dtype.h"

namespace fp4forge::mxcast {

/** What a scheme takes a packed E2M1 source as (SchemeTraits::e2m1_cast). */
enum class Target : std::uint8_t {
  NONE,   ///< re-encoded from the expansion
  NVFP4,  ///< codes kept, scales folded into E4M3 under a power-of-two global scale
  MXFP4,  ///< codes and E8M0 scale bytes kept
};

/** The exponents a fused set's scales span; `why` says what rules the cast out (empty: nothing yet). */
struct Range {
  int kmin = 1 << 20, kmax = -(1 << 20);
  std::string why;
};

/** Adds `count` scale elements stored as `dtype` (F8_E8M0, U8, F32) to `r`: a NaN byte (0xFF), a float that is not
 * a power of two, or another dtype sets `why`. */
void add_scales(Range& r, const std::byte* scales, std::uint64_t count, DType dtype);

/** NVFP4: m = k_max - 8 when the cast is exact for every block of the range; MXFP4: 0 when every exponent is an E8M0
 * byte; nullopt with `r.why` set otherwise. */
std::optional<int> shift(Range& r, Target t = Target::NVFP4);

/** The NVFP4 global scale of shift m: 2^-m (exact). */
float global_scale(int m) noexcept;

/** The E4M3 byte of 2^t for t in [-9, 8]. */
std::uint8_t e4m3_pow2(int t) noexcept;

/**
 * Rows [0, rows) of an [rows, cols] packed E2M1 source with its scales ([rows, ceil(cols / 32)] as `dtype`) cast
 * into `t` under shift m: the payload copied (rows * cols / 2 bytes) and the scales written (NVFP4: rows * cols / 16
 * E4M3 bytes; MXFP4: rows * cols / 32 E8M0 bytes). cols is a multiple of the target's group; shift() accepted the
 * scales.
 */
void cast_rows(const std::byte* packed, const std::byte* scales, DType dtype, std::uint64_t rows, std::uint64_t cols,
               Target t, int m, std::byte* payload_out, std::byte* scales_out) noexcept;

}  // namespace fp4forge::mxcast
