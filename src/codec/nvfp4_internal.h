#pragma once
// Internal interface between the public codec API (nvfp4.cc), the scalar reference (nvfp4_ref.cc) and
// the Highway kernels (nvfp4_simd.cc). Kernels assume validated arguments (dtype is a source dtype,
// cols % 16 == 0, gs finite and > 0) and work on a contiguous block of whole rows.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::nvfp4::detail {

/** Bytes per element of a source dtype (2 or 4). */
inline std::size_t elem_size(DType t) noexcept { return t == DType::F32 ? 4 : 2; }

/**
 * Max over `count` elements of the magnitude bits of each value widened to float32
 * (bits & 0x7FFFFFFF). A result >= 0x7F800000 means a NaN or Inf is present.
 */
using AmaxBitsFn = std::uint32_t (*)(const std::byte* data, DType dt, std::uint64_t count);
/**
 * Encodes `rows` rows of `cols` elements starting at `data`. Returns false if a non-finite value was
 * met (outputs then unspecified); the caller locates it.
 */
using EncodeFn = bool (*)(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                          float gs, std::byte* packed, std::byte* scale);

struct Kernels {
  std::string name;
  AmaxBitsFn amax_bits;
  EncodeFn encode;
};

/** The scalar reference (a transcription of spec §2 / Appendix A). */
std::uint32_t ref_amax_bits(const std::byte* data, DType dt, std::uint64_t count);
bool ref_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                std::byte* packed, std::byte* scale);
std::uint8_t ref_group_scale_code(float group_amax, DType dt, float gs);
float ref_global_scale(float amax, DType dt);

/** Highway targets compiled in and supported by this CPU, best first. */
const std::vector<Kernels>& simd_kernels();
/** Runtime-dispatched (HWY_DYNAMIC_DISPATCH) kernels. */
std::uint32_t simd_amax_bits(const std::byte* data, DType dt, std::uint64_t count);
bool simd_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                 std::byte* packed, std::byte* scale);

/** Element (row-major index i) of a source buffer, widened to float (exact). */
float load_elem(const std::byte* data, DType dt, std::uint64_t i) noexcept;

}  // namespace fp4forge::nvfp4::detail
