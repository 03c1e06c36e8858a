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
 *
 * Fast path: encode_rows (the best Highway target, runtime dispatch) and encode_rows_with (a named
 * path; "scalar" is `encode` above) encode a row range with the same bytes and the same errors (rows
 * in messages count from row 0 of the tensor); rows are independent, so a caller may split a tensor
 * into any row ranges, one per thread.
 */
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

/**
 * The reference encoder on rows [r0, r1) with each group's scale computed from `group_max` (a searched
 * observer's maxima, (r1 - r0) * K/G values for these rows, G the group) instead of its max |w|: what
 * calculate_qparams gives for the searched min/max. Outputs are the rows' own bytes (as encode_rows). With
 * every group_max equal to the group's max |w| this is encode's output byte for byte.
 */
Status encode_rows_maxima(const nvfp4::WeightView& w, const float* group_max, std::uint64_t r0, std::uint64_t r1,
                          std::byte* packed_out, std::byte* scale_out, std::string_view name);

// ---- the fast path (Highway SIMD, runtime dispatch) and the path choice ------------------------

/**
 * "scalar" (the reference above) first, then every Highway target compiled in and supported by this
 * CPU, best first ("AVX3_DL", "AVX3", "AVX2", "SSE4", "SSSE3", "EMU128" or "SCALAR"): the same names
 * as nvfp4::available_paths(). Every path writes the same bytes and returns the same errors.
 */
std::vector<std::string> available_paths();
/** The path the unsuffixed *_rows functions use (the best Highway target this CPU supports). */
std::string best_path();

/**
 * Encodes rows [r0, r1) of W on the best path: writes (r1 - r0) * K/2 bytes to packed_out (the int32
 * words of those rows) and scale_bytes(r1 - r0, K, D) bytes to scale_out (the range's rows only: pass
 * the outputs' row r0). The bytes and errors of `encode`, plus BAD_INPUT for a row range outside the
 * tensor. r0 == r1 writes nothing.
 */
Status encode_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* packed_out,
                   std::byte* scale_out, std::string_view name);
/** encode_rows on a named path of available_paths() (empty: the best); any other name is Errc::USAGE. */
Status encode_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
                        std::byte* packed_out, std::byte* scale_out, std::string_view name);

}  // namespace fp4forge::w4a16
