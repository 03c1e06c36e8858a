#pragma once
/**
 * FP8 E4M3 and packed E2M1 (MXFP4) source weights expanded to bf16: the reference every low-bit source
 * dialect is read with (docs/fp8-sources.md).
 *
 * A stored FP8 weight is [outer..., rows, cols] F8_E4M3 codes plus a scale tensor covering each
 * [rows, cols] matrix in one of three layouts (ScaleGrid). One element dequantizes as
 *
 *   p = fl32(e4m3(code) * scale)          float32 product (exact when the scale is BF16/F16)
 *   p = fl16(p)                           only when the scale is F16 (compressed-tensors multiplies in
 *                                         the scale's dtype, then casts)
 *   out = bf16_rne(p)                     the model dtype, round to nearest even
 *
 * which is transformers' and DeepSeek's `weight_dequant` (float32 product with the F32
 * `weight_scale_inv`, cast to bf16), compressed-tensors' `dequantize` (x_q.to(scale.dtype) * scale,
 * then .to(bf16)) and ModelOpt's per-tensor `weight.float() * weight_scale`. A NaN code (0x7F, 0xFF)
 * or a non-finite product is reported, never written silently.
 *
 * E2M1 payloads (DeepSeek-V4's FP4 experts: two codes per byte, the low nibble first) take E8M0 scales
 * (F8_E8M0, or U8 exponent bytes: 2^(b - 127), 0xFF NaN) or F32 ones, one per 32 elements of a row:
 *
 *   out = bf16_rne(fl32(e2m1(nibble) * scale))
 *
 * transformers 5.17's `Fp8Dequantize._dequantize_one` (its FP4 path) and `convert_moe_packed_tensors`
 * (gpt-oss) both compute exactly this (tests/data/mxfp4/golden_e8m0_e2m1.json holds their outputs).
 *
 * Speed: F32/BF16 scales go through a branch-free loop the compiler vectorizes, compiled for the
 * baseline and for AVX2 / AVX-512 (picked at run time); F16 scales take the table path.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/dtype.h"

namespace fp4forge::fp8 {

/** How a scale tensor covers its weight. */
enum class ScaleLayout : std::uint8_t {
  TENSOR,   ///< one scale per [rows, cols] matrix
  CHANNEL,  ///< one scale per row (output channel)
  BLOCK,    ///< one scale per block_rows x block_cols block; edge blocks may be partial
};
const char* scale_layout_name(ScaleLayout l) noexcept;  ///< "tensor", "channel", "block"

/** What one stored byte holds. */
enum class Payload : std::uint8_t {
  E4M3,  ///< one FP8 E4M3 (fn) code per byte
  E2M1,  ///< two FP4 E2M1 codes per byte, element 2j in the low nibble (the expansion is twice as wide)
};

struct ScaleGrid {
  ScaleLayout layout = ScaleLayout::TENSOR;
  Payload payload = Payload::E4M3;
  std::uint64_t rows = 0, cols = 0;                  ///< the weight's last two dimensions
  std::uint64_t block_rows = 128, block_cols = 128;  ///< BLOCK only
  DType scale_dtype = DType::F32;                    ///< F32, BF16, F16, F8_E8M0 or U8 (E8M0 exponent bytes)

  std::uint64_t scale_rows() const noexcept;  ///< 1, rows, ceil(rows / block_rows)
  std::uint64_t scale_cols() const noexcept;  ///< 1, 1, ceil(cols / block_cols)
  /** Scale elements per [rows, cols] matrix. */
  std::uint64_t scales_per_matrix() const noexcept { return scale_rows() * scale_cols(); }
  /** The scale element of weight element `flat` (row-major over the whole weight). */
  std::uint64_t scale_index(std::uint64_t flat) const noexcept;
};

/** An E8M0 scale dtype: F8_E8M0, or U8 exponent bytes (where the source declares E8M0 scales). */
inline bool is_e8m0_scale(DType d) noexcept { return d == DType::F8_E8M0 || d == DType::U8; }

/** One element: the formula above. */
std::uint16_t dequant_bf16(std::uint8_t code, float scale, DType scale_dtype) noexcept;

/** One E2M1 element: bf16_rne(fl32(e2m1(nibble) * scale)), e2m1 being nvfp4::fp4_to_float. */
std::uint16_t dequant_e2m1_bf16(std::uint8_t nibble, float scale) noexcept;

/** Scale element `i` of a scale tensor stored as `dtype`, as float (exact; F8_E8M0 and U8 bytes b are 2^(b - 127),
 * 0xFF NaN). */
float scale_value(const std::byte* scales, std::uint64_t i, DType dtype) noexcept;

/** No non-finite element found. */
inline constexpr std::uint64_t kAllFinite = ~std::uint64_t{0};

/**
 * Elements [begin, begin + count) of the weight (row-major, in expanded elements: an E2M1 payload's element i is
 * nibble i % 2 of byte i / 2) as bf16 bit patterns into `out`. Returns
 * the flat index of the first element whose code is NaN or whose product is not finite (the rest is
 * still written), or kAllFinite. Runs on the best path of dequant_paths().
 */
std::uint64_t dequant_range(const std::byte* payload, const std::byte* scales, const ScaleGrid& g,
                            std::uint64_t begin, std::uint64_t count, std::uint16_t* out) noexcept;

/** The expansion loops this CPU runs, by Highway target name ("EMU128" ... "AVX2", "AVX3", "AVX3_DL"), worst first,
 * best last: one loop compiled per target and chosen at run time, the dispatch of every codec kernel. Every path
 * writes the same bits (tested on each). */
std::vector<std::string_view> dequant_paths();
/** dequant_range on the named path; nullopt when this CPU has no such path. */
std::optional<std::uint64_t> dequant_range_with(std::string_view path, const std::byte* payload,
                                                const std::byte* scales, const ScaleGrid& g, std::uint64_t begin,
                                                std::uint64_t count, std::uint16_t* out) noexcept;

/** One path's self-check: every element of the check against the element formula (dequant_bf16). */
struct DequantCheck {
  std::string path;
  std::uint64_t elements = 0;
  std::uint64_t mismatches = 0;  ///< differing bf16 results or non-finite reports
  std::string first;             ///< the first mismatch, one line ("" when none)
};
/** Every E4M3 code under scales that make products subnormal, overflow, round at bf16 boundaries, zero or
 * negative, with F32, BF16 and F16 scales, in runs long enough for every vector width and its tail, on
 * every path of dequant_paths() (`fp4forge selftest`). */
std::vector<DequantCheck> dequant_selfcheck();

}  // namespace fp4forge::fp8
