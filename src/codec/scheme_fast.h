#pragma once
// The fast (Highway SIMD) encoders of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK and W4A16 behind their public
// row-range entry points (mxfp4.h, fp8.h, w4a16.h): the kernel type every path implements, the path
// tables, and the one driver (run_rows) that checks arguments, runs a kernel on a row range and turns
// a kernel's failure into the reference's error, with rows counted from row 0 of the tensor.
//
// The kernels (mxfp4_simd.cc, fp8_simd.cc, w4a16_simd.cc) assume validated arguments and whole rows
// (whole 128-row strips for FP8_BLOCK, except a last partial one); they return kOk, or kNonFinite /
// kOverflow at the first problem met (outputs then unspecified). The "scalar" path runs the reference
// encoder (mxfp4::encode, fp8::encode_channel / encode_block, w4a16::encode) on the row range.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::scheme_fast {

enum KernelResult : int { kOk = 0, kNonFinite = 1, kOverflow = 2 };

/** Encodes `rows` rows of `cols` elements at `data` into out0 (codes) and out1 (scales), both for these
 * rows only. Returns a KernelResult. */
using EncodeKernel = int (*)(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                             std::byte* out0, std::byte* out1);

struct PathKernel {
  std::string name;  ///< hwy::TargetName of the target
  EncodeKernel fn;
};

/** The Highway targets of one kernel that this CPU supports, best first (entries: target bit, kernel). */
struct TargetEntry {
  std::int64_t target;
  EncodeKernel fn;
};
std::vector<PathKernel> supported(std::initializer_list<TargetEntry> compiled);

/** What run_rows needs to know of one scheme. */
struct SchemeSpec {
  std::string_view preset;      ///< "MXFP4A16", "FP8_DYNAMIC", ... (in error messages)
  std::uint64_t k_multiple;     ///< 32, 1, 1, 128
  std::string_view k_name;      ///< the name the K refusal uses: "MXFP4", "W4A16" (empty: any K)
  std::uint64_t row_block;      ///< row ranges start (and end, unless at the last row) on a multiple: 1 or 128
  EncodeKernel scalar;          ///< the reference on a row range
  const std::vector<PathKernel>& (*simd)();  ///< the Highway targets, best first
  EncodeKernel dispatched;      ///< HWY_DYNAMIC_DISPATCH
  /** The first group of rows [r0, r1) whose scale overflows (MXFP4), as an error; nullptr elsewhere. */
  Error (*overflow_error)(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name);
};

/** The kernel of a path name: "scalar", a supported Highway target, or empty for the dispatched best.
 * Errc::USAGE listing the valid names for anything else. */
Result<EncodeKernel> find_kernel(const SchemeSpec& spec, std::string_view path);

/** "scalar" followed by the supported Highway targets of `spec`, best first. */
std::vector<std::string> path_names(const SchemeSpec& spec);

/** The path the dispatch runs for `spec`: its best supported Highway target, "scalar" when there is none. */
std::string best_path_name(const SchemeSpec& spec);

/**
 * Encodes rows [r0, r1) of w with kernel k: out0 / out1 point at the range's first row of codes /
 * scales. Errors as the reference encoder gives them for the whole tensor (BAD_INPUT naming the tensor:
 * dtype, empty tensor, null data, a non-finite value (the first one of the range in row-major order),
 * a K that is not a multiple of spec.k_multiple, an MXFP4 scale overflow; INTERNAL for null outputs),
 * plus BAD_INPUT for a row range outside the tensor or not on spec.row_block boundaries.
 */
Status run_rows(const SchemeSpec& spec, EncodeKernel k, const nvfp4::WeightView& w, std::uint64_t r0,
                std::uint64_t r1, std::byte* out0, std::byte* out1, std::string_view name);

/** BAD_INPUT "tensor 'NAME': MSG" with the tensor set (the references' tensor_error). */
Error tensor_error(std::string_view name, std::string msg);

// ---- decision thresholds (scheme_thresholds.cc) ---------------------------------------------------
//
// The SIMD kernels decide codes by comparing the magnitude bits of each weight (bits & 0x7FFF, or
// & 0x7FFFFFFF for F32: integer order is value order) with bounds where the reference's decision changes,
// found by binary search with the reference's own arithmetic (as nvfp4_thresholds.cc does for NVFP4): the
// code is a non-decreasing function of |w| for a fixed scale (IEEE division and RNE are monotone), so it
// is the number of bounds that |w| exceeds.

/**
 * MXFP4: everything about a group's scale depends only on the exponent field of round_to_power_2(max)
 * in D, so one entry per field (256 for BF16/F32, 32 for F16): the stored byte and the 8 bounds of the
 * FP4 decision for the scale s of mxfp4::group_scale. Bound b < 7: the E2M1 index is >= b + 1 iff
 * mag > bound; bound 7: q = flD(|w| / s) != 0 (the sign bit is set iff w < 0 and mag > bound 7).
 * Bounds are stored as 8 vectors of 64 bytes: 32 copies of an int16 (BF16, F16) or 16 of an int32 (F32).
 * ok == false: the power of two overflows (refused). Built once per dtype, thread-safe.
 */
struct MxEntry {
  alignas(64) unsigned char bounds[8 * 64];
  std::uint8_t code = 0;
  bool ok = false;
};
const MxEntry* mxfp4_entries(DType dt);

/**
 * W4A16 for BF16/F16: the 8 bounds of c = nearbyint(min(flD(|w| / s), 8)) (c >= b + 1 iff mag > bound b)
 * for the scale whose bits in D are s_bits; the stored value is 8 + min(c, 7) for w >= 0, 8 - c for
 * w < 0. A per-thread cache over every scale bit pattern, filled on first use of each.
 */
const std::int16_t* w4a16_bounds(DType dt, std::uint16_t s_bits);

}  // namespace fp4forge::scheme_fast

namespace fp4forge::scheme_simd {

// The Highway kernels: per scheme, the supported targets (best first) and the dispatched best one.
const std::vector<scheme_fast::PathKernel>& mxfp4_kernels();
const std::vector<scheme_fast::PathKernel>& fp8_channel_kernels();
const std::vector<scheme_fast::PathKernel>& fp8_block_kernels();
const std::vector<scheme_fast::PathKernel>& w4a16_kernels();
int mxfp4_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                     std::byte* scale);
int fp8_channel_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                           std::byte* wout, std::byte* sout);
int fp8_block_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                         std::byte* wout, std::byte* sout);
int w4a16_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                     std::byte* scale);

}  // namespace fp4forge::scheme_simd
