#pragma once
/**
 * Every safetensors dtype.
 *
 * The enumerator order must match the declaration order of huggingface/safetensors' `Dtype` enum
 * (release 0.8.0): the reference writer sorts tensors by this order, descending, then by name
 * (nvfp4a16-format.md §10). Never reorder; append only where upstream inserts.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <string_view>

namespace fp4forge {

enum class DType : std::uint8_t {
  BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
  I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64,
};
inline constexpr int kDTypeCount = 22;

/** The safetensors spelling, e.g. "BF16". */
std::string_view dtype_name(DType t) noexcept;
/** Parses the safetensors spelling; nullopt for unknown strings. */
std::optional<DType> parse_dtype(std::string_view s) noexcept;
/** Size in bits of one element (4 for F4, 6 for F6_*, 1 byte = 8 for BOOL). */
unsigned dtype_bits(DType t) noexcept;
/** True for floating-point dtypes (F4 ... F64, C64 excluded). */
bool dtype_is_float(DType t) noexcept;
/** True for the float dtypes fp4forge reads as source values (BF16, F16, F32): the unquantized weights every
 * scheme's encoder takes (and an MTP splice, the KV planner's quantizable weights), a float scale of an FP8
 * source. Scheme-neutral: the one home of this set. */
constexpr bool is_source_dtype(DType t) noexcept { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }
/** NaN/Inf elements of `d` read as dtype `t` (BF16, F16, F32, F64; none for another dtype): their count and the
 * first one's element index. Bit tests, no conversion: verify's nonfinite-kept-tensor and quantize's refusal to
 * copy such a tensor share it. */
std::pair<std::uint64_t, std::uint64_t> count_nonfinite(std::span<const std::byte> d, DType t) noexcept;
/** Position in the safetensors write order: lower sorts first (U64 first, BOOL last). */
inline int dtype_write_rank(DType t) noexcept { return kDTypeCount - 1 - static_cast<int>(t); }

}  // namespace fp4forge
