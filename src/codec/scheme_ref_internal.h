#pragma once
// Shared pieces of the scalar reference encoders for the FP8_DYNAMIC, FP8_BLOCK, W4A16 and MXFP4A16
// presets (fp8_ref.cc, w4a16_ref.cc, mxfp4_ref.cc): argument checks with one-line errors, element
// load/store in the source dtype D, and the few torch semantics every scheme relies on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/error.h"

namespace fp4forge::scheme_ref {

using nvfp4::detail::elem_size;
using nvfp4::detail::load_elem;

inline Error tensor_error(std::string_view name, std::string msg) {
  return Error{Errc::BAD_INPUT, fmt::format("tensor '{}': {}", name, msg), {}, std::string(name)};
}

// flD(x): a float32 result rounded to the weight dtype D (RNE), which is what torch does for every
// elementwise op on a BF16/F16 tensor on the CPU (the op runs in float32, the result is stored in D).
inline float round_d(float x, DType dt) noexcept {
  switch (dt) {
    case DType::BF16: return half::round_to_bf16(x);
    case DType::F16: return half::round_to_f16(x);
    default: return x;
  }
}

// torch.finfo(D).eps: compressed-tensors' replacement for a zero scale when scale_dtype is None
// (quantization/utils/helpers.py::_get_dtype_eps).
inline float eps_d(DType dt) noexcept {
  switch (dt) {
    case DType::BF16: return 0x1p-7f;
    case DType::F16: return 0x1p-10f;
    default: return 0x1p-23f;
  }
}

// Stores v (already a value of D) as element i of a D buffer, little-endian.
inline void store_elem(std::byte* out, DType dt, std::uint64_t i, float v) noexcept {
  if (dt == DType::F32) {
    std::memcpy(out + 4 * i, &v, 4);
    return;
  }
  const std::uint16_t h = dt == DType::BF16 ? half::float_to_bf16(v) : half::float_to_f16(v);
  std::memcpy(out + 2 * i, &h, 2);
}

// Checks every scheme shares: a source dtype, a non-empty 2-D tensor with data, finite values.
// Upstream has no answer for NaN/Inf (the scales become NaN/Inf and the codes garbage), so fp4forge
// refuses them, as NVFP4 does (R4).
inline Status check_weight(const nvfp4::WeightView& w, std::string_view name, std::string_view scheme) {
  if (!is_source_dtype(w.dtype))
    return tensor_error(name, fmt::format("dtype {} cannot be {}-encoded; expected BF16, F16 or F32",
                                          dtype_name(w.dtype), scheme));
  if (w.rows == 0 || w.cols == 0)
    return tensor_error(name, fmt::format("shape [{}, {}] is empty; {} expects a 2-D weight with N, K >= 1",
                                          w.rows, w.cols, scheme));
  if (w.data == nullptr) return tensor_error(name, "no data (null pointer) for a non-empty tensor");
  for (std::uint64_t i = 0; i < w.rows * w.cols; ++i) {
    const float v = load_elem(w.data, w.dtype, i);
    if (!std::isfinite(v))
      return tensor_error(name, fmt::format("non-finite value {} at row {}, column {}; {} refuses to encode it",
                                            std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"), i / w.cols,
                                            i % w.cols, scheme));
  }
  return {};
}

// Rows [r0, r1) of w as a view of their own: the row-range functions' range check, one message.
inline Result<nvfp4::WeightView> rows_of(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
                                         std::string_view name) {
  if (r1 < r0 || r1 > w.rows)
    return tensor_error(name, fmt::format("row range [{}, {}) is outside the tensor's {} rows", r0, r1, w.rows));
  return nvfp4::WeightView{w.data == nullptr ? nullptr : w.data + r0 * w.cols * elem_size(w.dtype), w.dtype, r1 - r0,
                           w.cols};
}

inline Status check_outputs(std::string_view name, const std::byte* a, const std::byte* b) {
  if (a == nullptr || b == nullptr)
    return Error{Errc::INTERNAL, fmt::format("tensor '{}': null output buffer passed to an encoder", name), {},
                 std::string(name)};
  return {};
}

}  // namespace fp4forge::scheme_ref
