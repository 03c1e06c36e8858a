#pragma once
// Internal interface between the public codec API (nvfp4.cc), the scalar reference (nvfp4_ref.cc) and
// the Highway kernels (nvfp4_simd.cc). Kernels assume validated arguments (dtype is a source dtype,
// cols % 16 == 0, gs finite and > 0) and work on a contiguous block of whole rows.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::nvfp4::detail {

/** flD(x): a float32 result rounded to the weight dtype D (RNE); identity for F32. */
inline float round_d(float x, DType dt) noexcept {
  switch (dt) {
    case DType::BF16: return half::round_to_bf16(x);
    case DType::F16: return half::round_to_f16(x);
    default: return x;
  }
}

/** "tensor 'NAME': MSG" with code `c` and the tensor set (the NVFP4 codec's errors). */
inline Error tensor_error(Errc c, std::string_view name, std::string msg) {
  return Error{c, fmt::format("tensor '{}': {}", name, msg), {}, std::string(name)};
}

/** Bytes per element of a source dtype (2 or 4). */
inline std::size_t elem_size(DType t) noexcept { return t == DType::F32 ? 4 : 2; }

/** One hex digit's value, or -1 (the golden files' hex fields). */
inline int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

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

/**
 * Encodes as EncodeFn with each group's E4M3 scale from group_max[g] (rows * cols / 16 values: a searched
 * max, a value of the source dtype) instead of its max|w|. The caller has checked the values finite. Returns
 * false (outputs then unspecified) when some group_max is not exactly a non-negative value of the source
 * dtype; the caller then runs the reference.
 */
using EncodeMaximaFn = bool (*)(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                                const float* group_max, std::byte* packed, std::byte* scale);

struct Kernels {
  std::string name;
  AmaxBitsFn amax_bits;
  EncodeFn encode;
  EncodeMaximaFn encode_maxima;
};

/** The scalar reference (a transcription of spec §2 / Appendix A). */
std::uint32_t ref_amax_bits(const std::byte* data, DType dt, std::uint64_t count);
bool ref_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                std::byte* packed, std::byte* scale);
bool ref_encode_maxima(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                       const float* group_max, std::byte* packed, std::byte* scale);
std::uint8_t ref_group_scale_code(float group_amax, DType dt, float gs);
float ref_global_scale(float amax, DType dt);

/** Appendix A `fp4_code`: the FP4 code (sign in bit 3) of a quotient q already clamped to [-6, 6]. */
std::uint8_t ref_fp4_code(float q) noexcept;

/**
 * Exact FP4 decision thresholds in the source domain, for one global scale and source dtype, so
 * that the SIMD kernels never divide. For a weight w of a group whose E4M3 scale code is c,
 * eff = fl32(e4m3(c) / gs) and the reference computes the code of fl32(w / eff) (clamped to 6).
 * That code is a non-decreasing function of |w| (IEEE division rounds monotonically), so it equals
 * the number of boundaries b in 0..6 with mag(w) > G[c][b], where mag(w) is the magnitude bit
 * pattern of w in its source dtype (bits & 0x7FFF, or & 0x7FFFFFFF for F32: integer order is value
 * order) and G[c][b] = (smallest magnitude whose code is >= b + 1) - 1. G[c][7] is the same for
 * "the quotient is not zero": the sign bit of the code is set iff w < 0 and mag(w) > G[c][7]
 * (a negative w whose quotient underflows to -0.0 gets code 0, as in the reference).
 * Each G is found by a binary search over the finite magnitudes with ref_fp4_code as the
 * predicate, so the table encodes the reference's decisions by construction.
 *
 * Entries are built lazily, as one growing range of scale codes (ensure_range), and stored as kGroupSize copies, so a kernel
 * loads one vector of up to 16 lanes per boundary. Lane type: int16 for BF16/F16, int32 for F32.
 * One table per thread (thread_table), rebuilt when the dtype or global scale changes.
 */
class ThresholdTable {
 public:
  static constexpr std::size_t kCodes = 128;
  static constexpr std::size_t kBounds = 8;
  static constexpr std::size_t kLanes = 16;

  /** The calling thread's table, reset if (dt, gs) differs from its last use. */
  static ThresholdTable& thread_table(DType dt, float gs);

  /** Builds the entries of every code in [lo, hi] not built yet (the built codes stay one range). */
  void ensure_range(std::uint8_t lo, std::uint8_t hi) {
    if (lo >= built_lo_ && hi <= built_hi_) return;
    extend(lo, hi);
  }
  /** Builds the entries of every code in codes[0, n). */
  void ensure(const std::uint8_t* codes, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) ensure_range(codes[i], codes[i]);
  }
  bool built(std::uint8_t c) const noexcept { return c >= built_lo_ && c <= built_hi_; }

  /** kBounds vectors of kLanes int16 (16-bit sources) for code c. */
  const std::int16_t* entry16(std::uint8_t c) const noexcept {
    return reinterpret_cast<const std::int16_t*>(storage_) + std::size_t{c} * kBounds * kLanes;
  }
  /** kBounds vectors of kLanes int32 (F32 sources) for code c. */
  const std::int32_t* entry32(std::uint8_t c) const noexcept {
    return reinterpret_cast<const std::int32_t*>(storage_) + std::size_t{c} * kBounds * kLanes;
  }

  /** G[c][b] as computed (exposed for tests). */
  static std::int64_t compute_bound(DType dt, float gs, std::uint8_t code, std::size_t b);

 private:
  void reset(DType dt, float gs);
  void extend(std::uint8_t lo, std::uint8_t hi);
  void build(std::uint8_t c);

  DType dt_ = DType::BF16;
  float gs_ = 0.0f;
  int built_lo_ = kCodes, built_hi_ = -1;  // built codes: [built_lo_, built_hi_] (empty when lo > hi)
  alignas(64) unsigned char storage_[kCodes * kBounds * kLanes * 4];
};

/** The kernels of a codec path: "" the runtime-dispatched best target, "scalar" the reference, or a target's
 * name (USAGE naming the paths this CPU runs for any other): encode_rows_maxima's lookup. */
Result<const Kernels*> kernels_for(std::string_view path);

/** Highway targets compiled in and supported by this CPU, best first. */
const std::vector<Kernels>& simd_kernels();
/** Runtime-dispatched (HWY_DYNAMIC_DISPATCH) kernels. */
std::uint32_t simd_amax_bits(const std::byte* data, DType dt, std::uint64_t count);
bool simd_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                 std::byte* packed, std::byte* scale);
bool simd_encode_maxima(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                        const float* group_max, std::byte* packed, std::byte* scale);
/** decode_rows' Highway kernel: out[16 g + j] = fp4_to_float(code j of group g) * eff[g], bit for bit the
 * reference's product. */
void simd_decode_groups(const std::byte* packed, const float* eff, std::uint64_t groups, float* out);

/** Element (row-major index i) of a source buffer, widened to float (exact): load_source_elem. */
inline float load_elem(const std::byte* data, DType dt, std::uint64_t i) noexcept { return load_source_elem(data, dt, i); }

/** The end of every fused-set encode: sizes each member's outputs in `set` and encodes member i with
 * fn(i, w, packed, scale) (set.global_scale is set). */
template <class F>
Status encode_members(std::span<const WeightView> members, EncodedSet& set, F&& fn) {
  set.members.resize(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    const WeightView& w = members[i];
    EncodedWeight& e = set.members[i];
    e.packed.resize(w.rows * w.cols / 2);
    e.scale.resize(w.rows * w.cols / kGroupSize);
    FP4FORGE_TRY(fn(i, w, e.packed.data(), e.scale.data()));
  }
  return {};
}

}  // namespace fp4forge::nvfp4::detail
