#pragma once
/**
 * The NVFP4A16 codec (compressed-tensors `nvfp4-pack-quantized`, weight-only), byte-exact to
 * llm-compressor / compressed-tensors 0.18 (spec: nvfp4a16-format.md §1, §2, §9, Appendix A).
 *
 * For a 2-D weight W [N, K] in BF16, F16 or F32 (row-major, little-endian):
 * - `weight_packed` U8 [N, K/2]: FP4 E2M1 codes; byte j of a row = code[2j] | code[2j+1] << 4.
 * - `weight_scale` F8_E4M3 [N, K/16]: one E4M3 scale per group of 16 columns.
 * - `weight_global_scale` F32 [1]: `global_scale(amax over the fused set, dtype)`.
 *
 * Typical use (one fused set, possibly split across threads by row ranges):
 *   float amax = max over members of amax_rows(member, 0, rows, name)   // R4 check happens here
 *   float gs = global_scale(amax, dtype);
 *   encode_rows(member, gs, r0, r1, packed + r0*K/2, scale + r0*K/16, name)  // any row split
 * `encode_fused` does all of that for a whole set on the calling thread.
 *
 * Paths: "scalar" is the reference transcription of the spec (src/codec/nvfp4_ref.cc); every other
 * path is a Highway target compiled into the binary and supported by this CPU ("AVX3_DL", "AVX3",
 * "AVX2", "SSE4", "SSSE3", "EMU128"). All paths produce identical bytes. The unsuffixed functions use
 * the best path (Highway runtime dispatch). All functions are thread-safe and allocation-free except
 * where they return containers.
 */
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge {
class ThreadPool;
}

namespace fp4forge::nvfp4 {

inline constexpr std::uint64_t kGroupSize = 16;  ///< columns per E4M3 scale
inline constexpr float kFp4Max = 6.0f;           ///< largest E2M1 magnitude
inline constexpr float kE4m3Max = 448.0f;        ///< largest finite float8_e4m3fn
/** The global scale's numerator: weight_global_scale = 2688 / amax (nvfp4a16-format.md §2.2), so 2688 / gs is the
 * largest weight a global scale is made for. */
inline constexpr float kGlobalScaleNumerator = kE4m3Max * kFp4Max;
static_assert(kGlobalScaleNumerator == 2688.0f);
inline constexpr std::uint8_t kZeroScaleCode = 0x20;  ///< E4M3 0.125: stored for groups whose scale rounds to 0

/** A read-only 2-D weight: `rows` x `cols` elements of `dtype` (BF16, F16 or F32), row-major, LE. */
struct WeightView {
  const std::byte* data = nullptr;
  DType dtype = DType::BF16;
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
};

/** Element i (row-major) of a BF16, F16 or F32 buffer, widened to float (exact): the one reader of source
 * elements (verify's double reader adds F64 on top of it). */
float load_source_elem(const std::byte* data, DType dt, std::uint64_t i) noexcept;

/**
 * Exact max|w| over rows [r0, r1) (0 for an empty range), returned as float (exact for every source
 * dtype). NaN or ±Inf anywhere in the range is Errc::BAD_INPUT naming the first offending element:
 * "tensor 'NAME': non-finite value nan at row R, column C; NVFP4 refuses to encode it (R4)".
 * Other errors (BAD_INPUT): unsupported dtype, r0 > r1 or r1 > rows, null data with rows*cols > 0.
 */
Result<float> amax_rows(const WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name);
/** amax_rows over the whole tensor. */
Result<float> amax(const WeightView& w, std::string_view name);
/** amax over the whole tensor in row ranges on `pool` (none, or one worker: amax): the same value and, for a
 * non-finite element, the same error (the first offending element's), for any pool size. Call it from outside
 * the pool's workers. */
Result<float> amax(const WeightView& w, std::string_view name, ThreadPool* pool);

/**
 * Global scale `gs` (§2.2), computed in the source dtype: m = max(amax, tiny_D); r = flD(1/m);
 * g = flD(r * 2688); inf/NaN -> 1.0. Always finite and > 0. For BF16, amax 0.10009765625 -> 26880.0.
 * `dtype` must be a source dtype (anything else is treated as F32).
 */
float global_scale(float amax, DType dtype) noexcept;

/**
 * E4M3 scale code of one group (§2.3): a = group max|w| (exact in D), sD = flD(a/6),
 * p = min(fl32(gs*sD), 448), RNE to float8_e4m3fn; a zero result is stored as 0x20 (0.125).
 */
std::uint8_t group_scale_code(float group_amax, DType dtype, float gs) noexcept;

/**
 * Encodes rows [r0, r1) of `w` with global scale `gs`: writes (r1-r0)*cols/2 bytes to packed_out and
 * (r1-r0)*cols/16 bytes to scale_out (both for the row range only, row stride cols/2 and cols/16).
 * Errors (BAD_INPUT, naming the tensor): cols % 16 != 0, unsupported dtype, bad row range, gs not
 * finite and > 0, a non-finite weight (same message as amax_rows). On error the outputs are
 * unspecified. Uses the best dispatched path.
 */
Status encode_rows(const WeightView& w, float gs, std::uint64_t r0, std::uint64_t r1,
                   std::byte* packed_out, std::byte* scale_out, std::string_view name);

/**
 * Decodes `rows` x `cols` codes to float32 the way the CT decompressor does: out = E2M1(code) *
 * fl32(s / gs) (no cast to the model dtype). `cols` must be a multiple of 16. `path` "scalar" runs the
 * reference loop; any other value the best Highway target, which gives the same floats bit for bit.
 */
void decode_rows(const std::byte* packed, const std::byte* scales, float gs, std::uint64_t rows,
                 std::uint64_t cols, float* out, std::string_view path = {});

/** Value of a float8_e4m3fn byte (0x7F / 0xFF -> NaN). */
float e4m3_to_float(std::uint8_t code) noexcept;
/** Value of an FP4 E2M1 code (low 4 bits; bit 3 = sign; code 8 -> -0.0). */
float fp4_to_float(std::uint8_t code) noexcept;

// ---- path control (selftest, tests, benchmarks) -------------------------------------------------

/** "scalar" first, then every Highway target compiled in and supported by this CPU, best first. */
std::vector<std::string> available_paths();
/** The path the unsuffixed functions use (the best Highway target this CPU supports). */
std::string best_path();

/** encode_rows on a named path; an unknown or unsupported path is Errc::USAGE listing the valid ones. */
Status encode_rows_with(std::string_view path, const WeightView& w, float gs, std::uint64_t r0,
                        std::uint64_t r1, std::byte* packed_out, std::byte* scale_out,
                        std::string_view name);
/** amax_rows on a named path (same results on every path). */
Result<float> amax_rows_with(std::string_view path, const WeightView& w, std::uint64_t r0,
                             std::uint64_t r1, std::string_view name);

// ---- whole fused set ----------------------------------------------------------------------------

/** The three tensors of one quantized member. */
struct EncodedWeight {
  std::vector<std::byte> packed;  ///< U8 [rows, cols/2]
  std::vector<std::byte> scale;   ///< F8_E4M3 [rows, cols/16]
};

/** A fused set encoded with one shared global scale. */
struct EncodedSet {
  float amax = 0.0f;          ///< max|w| over every member
  float global_scale = 1.0f;  ///< weight_global_scale of every member
  std::vector<EncodedWeight> members;  ///< same order as the input
};

/**
 * Encodes a fused set (one or more members sharing dtype and a global scale) on the calling thread:
 * amax over all members (R4 check first, before anything is encoded), global_scale, then every
 * member. `names` has one entry per member (used in errors). `path` empty = best path.
 * Members of different dtypes are BAD_INPUT.
 */
Result<EncodedSet> encode_fused(std::span<const WeightView> members,
                                std::span<const std::string> names, std::string_view path = {});

}  // namespace fp4forge::nvfp4
