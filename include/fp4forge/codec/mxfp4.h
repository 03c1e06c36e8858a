#pragma once
/**
 * The MXFP4A16 weight encoder (FP4 E2M1 values, one E8M0 power-of-two scale per group of 32 columns;
 * compressed-tensors format `mxfp4-pack-quantized`), byte-exact to compressed-tensors 0.18 as
 * llm-compressor 0.13's `model_free_ptq` runs it. For a 2-D weight W [N, K] in D = BF16, F16 or F32:
 *   `weight_packed` U8 [N, K/2]: FP4 codes (sign in bit 3); byte j of a row = code[2j] | code[2j+1] << 4.
 *   `weight_scale`  U8 [N, K/32]: biased exponent e (scale 2^(e - 127)).
 * No global scale, no fusion (GROUP strategy, not TENSOR_GROUP).
 *
 * The math per group (flD = a float32 result rounded to D):
 *   a  = max |w|                                          (exact, in D)
 *   p2 = the bits of a in D, plus a quarter of its exponent step, mantissa cleared: a power of two
 *        (a >= 1.75 * 2^E rounds up to 2^(E+1)) or 0
 *   e  = clamp(127 + log2(p2) - 2, 0, 255); p2 == 0 -> e = 0
 *   s  = flD(2^(e - 127)); s == 0 -> 1.0                  (only F16: 2^(e-127) < 2^-24 underflows)
 *   weight_scale = 127 + log2(s)                          (= e, or 127 where s was replaced by 1)
 *   code = E2M1 code of clamp(flD(w / s), -6, 6)          (thresholds as NVFP4; sign bit iff < 0)
 * This is the scalar reference ("a literal transcription", not fast).
 *
 * Refused (BAD_INPUT): K % 32 != 0 (upstream refuses it too, K < 32 included), a group whose p2
 * overflows to infinity (a >= 1.75 * 2^127, or >= 57344 in F16: upstream then writes an undefined
 * scale byte), a dtype other than BF16/F16/F32, an empty tensor, a null data pointer, NaN/Inf.
 * On error the outputs are unspecified. Thread-safe, allocation-free.
 *
 * Fast path: encode_rows (the best Highway target, runtime dispatch) and encode_rows_with (a named
 * path; "scalar" is `encode` above) encode a row range with the same bytes and the same errors (rows
 * in messages count from row 0 of the tensor); rows are independent, so a caller may split a tensor
 * into any row ranges, one per thread.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::mxfp4 {

inline constexpr std::uint64_t kGroupSize = 32;  ///< columns per E8M0 scale

/** Bytes of `weight_packed` (U8 [rows, cols/2]). */
constexpr std::uint64_t packed_bytes(std::uint64_t rows, std::uint64_t cols) { return rows * (cols / 2); }
/** Columns of `weight_scale` (K / 32). */
constexpr std::uint64_t scale_cols(std::uint64_t cols) { return cols / kGroupSize; }
/** Bytes of `weight_scale` (U8 [rows, cols/32]). */
constexpr std::uint64_t scale_bytes(std::uint64_t rows, std::uint64_t cols) { return rows * scale_cols(cols); }

/**
 * Encodes W: writes packed_bytes(N, K) bytes to packed_out and scale_bytes(N, K) bytes to
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

/**
 * Step 2 for one group: writes the stored `weight_scale` byte to *code and the scale the values are
 * divided by (s above, a power of two) to *scale, for a group whose exact max |w| in `dtype` is
 * `group_amax`. Returns false (outputs untouched) when p2 overflows to infinity (refused above).
 */
bool group_scale(float group_amax, DType dtype, std::uint8_t* code, float* scale) noexcept;

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
 * Encodes rows [r0, r1) of W on the best path: writes (r1 - r0) * K/2 bytes to packed_out and
 * (r1 - r0) * K/32 bytes to scale_out (the range's rows only: pass the outputs' row r0). The bytes
 * and errors of `encode` (BAD_INPUT for what it refuses; the first NaN/Inf of the range), plus
 * BAD_INPUT for a row range outside the tensor. r0 == r1 writes nothing.
 */
Status encode_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* packed_out,
                   std::byte* scale_out, std::string_view name);
/** encode_rows on a named path of available_paths() (empty: the best); any other name is Errc::USAGE. */
Status encode_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
                        std::byte* packed_out, std::byte* scale_out, std::string_view name);

}  // namespace fp4forge::mxfp4
