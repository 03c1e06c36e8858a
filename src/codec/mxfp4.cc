// Public MXFP4A16 fast path (mxfp4.h): row ranges on a named or the dispatched path, and the
// reference's overflow error. The arithmetic is in mxfp4_ref.cc (the
// reference, path "scalar") and mxfp4_simd.cc (Highway).
#include <cmath>
#include <vector>

#include "codec/scheme_fast.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/mxfp4.h"

namespace fp4forge::mxfp4 {
namespace {

int scalar_kernel(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                  std::byte* scale) {
  return encode(nvfp4::WeightView{data, dt, rows, cols}, packed, scale, "").ok() ? scheme_fast::kOk
                                                                                 : scheme_fast::kNonFinite;
}

// The reference's refusal (mxfp4_ref.cc names the row and group, with its message) for a fast-path overflow in
// rows [r0, r1): the reference run on rows [0, r1), so the row numbers are the tensor's. An error path only.
Error overflow_error(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name) {
  const nvfp4::WeightView head{w.data, w.dtype, r1, w.cols};
  std::vector<std::byte> packed(r1 * w.cols / 2), scale(r1 * scale_cols(w.cols));
  if (Status st = encode(head, packed.data(), scale.data(), name); !st) return std::move(st).error();
  return Error{Errc::INTERNAL,
               fmt::format("tensor '{}': the MXFP4A16 encoder reported a scale overflow in rows [{}, {}) but none "
                           "was found; this is a bug",
                           name, r0, r1),
               {}, std::string(name)};
}

const scheme_fast::SchemeSpec& spec() {
  static const scheme_fast::SchemeSpec s{.preset = "MXFP4A16",
                                         .k_multiple = kGroupSize,
                                         .k_name = "MXFP4",
                                         .row_block = 1,
                                         .scalar = &scalar_kernel,
                                         .simd = &scheme_simd::mxfp4_kernels,
                                         .dispatched = &scheme_simd::mxfp4_dispatched,
                                         .overflow_error = &overflow_error};
  return s;
}

}  // namespace

Status encode_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* packed_out,
                   std::byte* scale_out, std::string_view name) {
  return scheme_fast::run_rows(spec(), spec().dispatched, w, r0, r1, packed_out, scale_out, name);
}

Status encode_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
                        std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(scheme_fast::EncodeKernel k, scheme_fast::find_kernel(spec(), path));
  return scheme_fast::run_rows(spec(), k, w, r0, r1, packed_out, scale_out, name);
}

std::vector<std::string> available_paths() { return scheme_fast::path_names(spec()); }

std::string best_path() { return scheme_fast::best_path_name(spec()); }

}  // namespace fp4forge::mxfp4
