#pragma once
/**
 * FP8 E4M3 weight encoders, byte-exact to compressed-tensors 0.18 as llm-compressor 0.13's
 * `model_free_ptq` runs it (compressed-tensors format `float-quantized`), for two presets:
 *
 * - FP8_DYNAMIC (`encode_channel`): one scale per output row.
 *     `weight`       F8_E4M3 [N, K]
 *     `weight_scale` D [N, 1]                   (D = the source dtype: BF16, F16 or F32)
 *   Any N, K >= 1 is accepted (upstream needs no divisibility for channel scales).
 * - FP8_BLOCK (`encode_block`): one scale per 128 x 128 block; edge blocks may be partial.
 *     `weight`       F8_E4M3 [N, K]
 *     `weight_scale` D [ceil(N/128), ceil(K/128)]
 *   Any N, K >= 1 is accepted (upstream zero-pads to whole blocks; the pad never changes a block's
 *   max because the max is taken against 0 anyway, and the padded codes are sliced off).
 *
 * The math, in D unless said otherwise (flD = a float32 result rounded to D):
 *   a = max |w| over the row / block                         (exact)
 *   s = flD(a / 448); s == 0 -> finfo(D).eps                 (2^-7, 2^-10, 2^-23)
 *   code = e4m3fn_rne(clamp(flD(w / s), -448, 448))          (sign kept, so -0.0 -> 0x80)
 * These are the scalar references ("a literal transcription", not fast). Both refuse (BAD_INPUT):
 * a dtype other than BF16/F16/F32, an empty tensor, a null data pointer, NaN/Inf anywhere.
 * On error the outputs are unspecified. Thread-safe, allocation-free.
 *
 * Fast paths: encode_channel_rows / encode_block_rows (the best Highway target, runtime dispatch) and
 * their *_with variants (a named path; "scalar" is the reference above) encode a row range with the
 * same bytes and the same errors (rows in messages count from row 0 of the tensor). FP8_DYNAMIC rows
 * are independent; FP8_BLOCK ranges are whole 128-row strips (r0 a multiple of 128, r1 too or the
 * last row), so a caller splits a tensor into strips, one range per thread.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::fp8 {

using nvfp4::kE4m3Max;                        ///< largest finite float8_e4m3fn: one home, codec/nvfp4.h
inline constexpr std::uint64_t kBlock = 128;  ///< FP8_BLOCK block height and width

/** Bytes of `weight` (F8_E4M3 [rows, cols]) for either preset. */
constexpr std::uint64_t weight_bytes(std::uint64_t rows, std::uint64_t cols) { return rows * cols; }
/** Bytes of one scale element in the source dtype (4 for F32, else 2). */
constexpr std::uint64_t scale_elem_bytes(DType src) { return src == DType::F32 ? 4 : 2; }
/** Bytes of FP8_DYNAMIC's `weight_scale` (D [rows, 1]). */
constexpr std::uint64_t channel_scale_bytes(std::uint64_t rows, DType src) {
  return rows * scale_elem_bytes(src);
}
/** Scale rows / columns of FP8_BLOCK: ceil(rows / 128), ceil(cols / 128). */
constexpr std::uint64_t block_scale_rows(std::uint64_t rows) { return (rows + kBlock - 1) / kBlock; }
constexpr std::uint64_t block_scale_cols(std::uint64_t cols) { return (cols + kBlock - 1) / kBlock; }
/** Bytes of FP8_BLOCK's `weight_scale` (D [ceil(rows/128), ceil(cols/128)]). */
constexpr std::uint64_t block_scale_bytes(std::uint64_t rows, std::uint64_t cols, DType src) {
  return block_scale_rows(rows) * block_scale_cols(cols) * scale_elem_bytes(src);
}

/**
 * FP8_DYNAMIC: writes weight_bytes(N, K) bytes to weight_out and channel_scale_bytes(N, D) bytes to
 * scale_out. `name` is used in error messages.
 */
Status encode_channel(const nvfp4::WeightView& w, std::byte* weight_out, std::byte* scale_out,
                      std::string_view name);

/**
 * FP8_BLOCK: writes weight_bytes(N, K) bytes to weight_out and block_scale_bytes(N, K, D) bytes to
 * scale_out (row-major over blocks).
 */
Status encode_block(const nvfp4::WeightView& w, std::byte* weight_out, std::byte* scale_out,
                    std::string_view name);

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
 * FP8_DYNAMIC rows [r0, r1) on the best path: writes (r1 - r0) * K bytes to weight_out and
 * channel_scale_bytes(r1 - r0, D) bytes to scale_out (the range's rows only: pass the outputs' row
 * r0). The bytes and errors of encode_channel, plus BAD_INPUT for a row range outside the tensor.
 * r0 == r1 writes nothing.
 */
Status encode_channel_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* weight_out,
                           std::byte* scale_out, std::string_view name);
/** encode_channel_rows on a named path of available_paths() (empty: the best); else Errc::USAGE. */
Status encode_channel_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0,
                                std::uint64_t r1, std::byte* weight_out, std::byte* scale_out,
                                std::string_view name);

/**
 * FP8_BLOCK rows [r0, r1) on the best path, r0 a multiple of 128 and r1 a multiple of 128 or N:
 * writes (r1 - r0) * K bytes to weight_out and block_scale_bytes(r1 - r0, K, D) bytes to scale_out
 * (the range's block rows only: pass the scale output's block row r0 / 128). The bytes and errors of
 * encode_block, plus BAD_INPUT for a row range outside the tensor or off the 128-row boundaries.
 */
Status encode_block_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* weight_out,
                         std::byte* scale_out, std::string_view name);
/** encode_block_rows on a named path of available_paths() (empty: the best); else Errc::USAGE. */
Status encode_block_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0,
                              std::uint64_t r1, std::byte* weight_out, std::byte* scale_out, std::string_view name);

/** float8_e4m3fn code of x, RNE, sign kept; |x| must be <= 448 (upstream clamps first). */
std::uint8_t e4m3_rne(float x) noexcept;

}  // namespace fp4forge::fp8
