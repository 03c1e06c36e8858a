#pragma once
/**
 * The W4A16 weight encoder (INT4 symmetric, group 128 along K; compressed-tensors format
 * `pack-quantized`), byte-exact to compressed-tensors 0.18 as llm-compressor 0.13's `model_free_ptq`
 * runs it. For a 2-D weight W [N, K] in D = BF16, F16 or F32:
 *   `weight_packed` I32 [N, K/8]: 8 values per int32, little-endian; value k of a row is the nibble
 *                   (q_k + 8) at bits 4*(k % 8) of word k / 8 (lowest nibble = lowest column).
 *   `weight_scale`  D [N, K/128]
 *   `weight_shape`  I64 [2] = {N, K}
 *
 * The math, in D unless said otherwise (flD = a float32 result rounded to D):
 *   a = max |w| over the group of 128                        (exact)
 *   s = flD(a / 7.5); s == 0 -> finfo(D).eps                 (7.5 = (7 - (-8)) / 2)
 *   q = round_half_even(clamp(flD(w / s), -8, 7))            (an int in [-8, 7])
 * This is the scalar reference ("a literal transcription", not fast).
 *
 * Refused (BAD_INPUT): K % 128 != 0 (upstream refuses it too, K < 128 included), a dtype other than
 * BF16/F16/F32, an empty tensor, a null data pointer, NaN/Inf anywhere. On error the outputs are
 * unspecified. Thread-safe, allocation-free.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::w4a16 {

inline constexpr std::uint64_t kGroupSize = 128;   ///< columns per scale
inline constexpr std::uint64_t kValuesPerWord = 8;  ///< 4-bit values per int32 of weight_packed
inline constexpr int kQMin = -8;                   ///< INT4 range
inline constexpr int kQMax = 7;

/** Columns of `weight_packed` (K / 8 int32 words); cols must be a multiple of 128. */
constexpr std::uint64_t packed_cols(std::uint64_t cols) { return cols / kValuesPerWord; }
/** Bytes of `weight_packed` (I32 [rows, cols/8]). */
constexpr std::uint64_t packed_bytes(std::uint64_t rows, std::uint64_t cols) { return rows * packed_cols(cols) * 4; }
/** Columns of `weight_scale` (K / 128). */
constexpr std::uint64_t scale_cols(std::uint64_t cols) { return cols / kGroupSize; }
/** Bytes of `weight_scale` (D [rows, cols/128]). */
constexpr std::uint64_t scale_bytes(std::uint64_t rows, std::uint64_t cols, DType src) {
  return rows * scale_cols(cols) * (src == DType::F32 ? 4 : 2);
}
/** `weight_shape` (I64 [2]); 16 bytes once written little-endian. */
constexpr std::array<std::int64_t, 2> weight_shape(std::uint64_t rows, std::uint64_t cols) {
  return {static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols)};
}
inline constexpr std::uint64_t kShapeBytes = 16;

/**
 * Encodes W: writes packed_bytes(N, K) bytes to packed_out and scale_bytes(N, K, D) bytes to
 * scale_out. `name` is used in error messages.
 */
Status encode(const nvfp4::WeightView& w, std::byte* packed_out, std::byte* scale_out, std::string_view name);

}  // namespace fp4forge::w4a16
