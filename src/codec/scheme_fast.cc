// The driver of the fast scheme encoders (scheme_fast.h): path lookup, argument checks and the errors
// of the scalar references (scheme_ref_internal.h, *_ref.cc), with rows counted from row 0 of the
// tensor when a row range is encoded.
#include "codec/scheme_fast.h"

#include <cmath>

#include <hwy/targets.h>

#include "codec/codec_paths.h"
#include "codec/scheme_ref_internal.h"

namespace fp4forge::scheme_fast {
namespace {

using scheme_ref::load_elem;

// The first NaN/Inf of rows [r0, r1) in row-major order, as the references report it; none: ok.
Status find_non_finite(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name,
                       std::string_view preset) {
  for (std::uint64_t i = r0 * w.cols; i < r1 * w.cols; ++i) {
    const float v = load_elem(w.data, w.dtype, i);
    if (!std::isfinite(v))
      return tensor_error(name, fmt::format("non-finite value {} at row {}, column {}; {} refuses to encode it",
                                            std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"), i / w.cols,
                                            i % w.cols, preset));
  }
  return {};
}

}  // namespace

Error tensor_error(std::string_view name, std::string msg) { return scheme_ref::tensor_error(name, std::move(msg)); }

std::vector<PathKernel> supported(std::initializer_list<TargetEntry> compiled) {
  std::vector<PathKernel> out;
  const std::int64_t have = hwy::SupportedTargets();
  for (const TargetEntry& e : compiled)
    if (have & e.target) out.push_back(PathKernel{hwy::TargetName(e.target), e.fn});
  return out;
}

std::vector<std::string> path_names(const SchemeSpec& spec) { return codec_paths::names(spec.simd()); }

std::string best_path_name(const SchemeSpec& spec) { return codec_paths::best(spec.simd()); }

Result<EncodeKernel> find_kernel(const SchemeSpec& spec, std::string_view path) {
  if (path.empty()) return spec.dispatched;
  if (path == "scalar") return spec.scalar;
  FP4FORGE_ASSIGN_OR_RETURN(const PathKernel* k, codec_paths::find_simd(spec.simd(), path));
  return k->fn;
}

Status run_rows(const SchemeSpec& spec, EncodeKernel k, const nvfp4::WeightView& w, std::uint64_t r0,
                std::uint64_t r1, std::byte* out0, std::byte* out1, std::string_view name) {
  // The references' order (scheme_ref::check_weight, then the K multiple, then the outputs); the NaN
  // scan covers the row range only.
  if (!is_source_dtype(w.dtype))
    return tensor_error(name, fmt::format("dtype {} cannot be {}-encoded; expected BF16, F16 or F32",
                                          dtype_name(w.dtype), spec.preset));
  if (w.rows == 0 || w.cols == 0)
    return tensor_error(name, fmt::format("shape [{}, {}] is empty; {} expects a 2-D weight with N, K >= 1", w.rows,
                                          w.cols, spec.preset));
  if (w.data == nullptr) return tensor_error(name, "no data (null pointer) for a non-empty tensor");
  if (r0 > r1 || r1 > w.rows)
    return tensor_error(name, fmt::format("row range [{}, {}) is outside the tensor's {} rows", r0, r1, w.rows));
  if (r0 % spec.row_block != 0 || (r1 % spec.row_block != 0 && r1 != w.rows))
    return tensor_error(name, fmt::format("row range [{}, {}) does not start and end on a multiple of {} rows (or "
                                          "the last row); {} encodes whole blocks of {} rows",
                                          r0, r1, spec.row_block, spec.preset, spec.row_block));
  if (w.cols % spec.k_multiple != 0) {
    FP4FORGE_TRY(find_non_finite(w, r0, r1, name, spec.preset));
    return tensor_error(name, fmt::format("shape [{}, {}]: K = {} is not a multiple of {} (K % {} = {}); {} needs "
                                          "whole groups of {} columns (compressed-tensors refuses it too); leave it "
                                          "unquantized",
                                          w.rows, w.cols, w.cols, spec.k_multiple, spec.k_multiple,
                                          w.cols % spec.k_multiple, spec.k_name, spec.k_multiple));
  }
  if (r0 == r1) return {};
  if (out0 == nullptr || out1 == nullptr) {
    FP4FORGE_TRY(find_non_finite(w, r0, r1, name, spec.preset));
    return Error{Errc::INTERNAL, fmt::format("tensor '{}': null output buffer passed to an encoder", name), {},
                 std::string(name)};
  }
  const std::uint64_t esz = w.dtype == DType::F32 ? 4 : 2;
  if (k(w.data + r0 * w.cols * esz, w.dtype, r1 - r0, w.cols, out0, out1) == kOk) return {};
  // A kernel stops at the first problem it meets; the reference reports a NaN/Inf anywhere first.
  FP4FORGE_TRY(find_non_finite(w, r0, r1, name, spec.preset));
  if (spec.overflow_error != nullptr) return spec.overflow_error(w, r0, r1, name);
  return Error{Errc::INTERNAL,
               fmt::format("tensor '{}': the {} encoder failed on rows [{}, {}) without a cause; this is a bug", name,
                           spec.preset, r0, r1),
               {}, std::string(name)};
}

}  // namespace fp4forge::scheme_fast
