// Scalar reference FP8 E4M3 encoders (FP8_DYNAMIC, FP8_BLOCK): a literal transcription of what
// compressed-tensors 0.18 runs under llm-compressor's model_free_ptq, step by step, in the dtype torch
// uses for each step. Obvious, not fast.
//
// Pipeline (upstream files under src/compressed_tensors unless said otherwise):
//  1. llm-compressor observers/min_max.py::_get_min_max over observers/helpers.py::_flatten_weight:
//     amin / amax per row (CHANNEL) or per 128x128 block (BLOCK: the weight is first zero-padded by
//     quantization/utils/helpers.py::maybe_pad_tensor_for_block_quant). Exact in D.
//  2. quantization/utils/helpers.py::calculate_qparams: min = min(amin, 0), max = max(amax, 0),
//     a = max(|min|, |max|); scale = a / (float(bit_range) / 2) with bit_range = 448 - (-448), i.e. a D
//     tensor divided by the Python float 448.0: float32 division, result rounded to D (on CUDA torch
//     multiplies by the reciprocal instead, which is why some F32 cases differ there). scale_dtype is
//     None: no rounding to another dtype; zeros -> finfo(scale.dtype).eps (_get_dtype_eps).
//     lifecycle/initialize.py::initialize_qparams made weight_scale a D parameter of shape [N, 1] or
//     [ceil(N/128), ceil(K/128)].
//  3. compressors/naive_quantized/base.py::NaiveQuantizationCompressor.compress -> lifecycle/forward.py
//     ::quantize -> forward_helpers.py::_quantize (CHANNEL) or _process_block (BLOCK, on the padded
//     weight, sliced back after): scaled = x / scale (D / D: float32 division rounded to D), then
//     quant_args.py::round_to_quantized_type_args: clamp(scaled, -448, 448) in D, .to(float8_e4m3fn)
//     (c10 RNE from float32), back to D (exact), .to(float8_e4m3fn) again (exact).
#include <algorithm>
#include <cmath>

#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/fp8.h"

namespace fp4forge::fp8 {
namespace {

using scheme_ref::load_elem;
using scheme_ref::round_d;

// e4m3(c) for the 127 finite non-negative codes 0x00..0x7E.
struct E4m3Table {
  double v[0x7F];
  E4m3Table() {
    for (int c = 0; c < 0x7F; ++c) v[c] = nvfp4::e4m3_to_float(static_cast<std::uint8_t>(c));
  }
};

// Step 2 for one row / block: the D scale of a group whose exact max |w| is `a`.
float scale_of(float a, DType dt) {
  float s = round_d(a / kE4m3Max, dt);   // max_val_pos / 448.0, float32 then rounded to D
  if (s == 0.0f) s = scheme_ref::eps_d(dt);  // torch.where(scales == 0, eps, scales)
  return s;
}

// Step 3 for one element.
std::uint8_t code_of(float x, float s, DType dt) {
  float q = round_d(x / s, dt);                 // x / scale in D
  q = std::min(std::max(q, -kE4m3Max), kE4m3Max);  // torch.clamp(scaled, q_min, q_max); keeps -0.0
  return e4m3_rne(q);
}

}  // namespace

// c10::detail::fp8e4m3fn_from_fp32_value for |x| <= 448: the nearest finite code, ties to the even
// code, written as the arg-min over every code; the sign bit is copied, so -0.0 and negative values
// that round to zero give 0x80.
std::uint8_t e4m3_rne(float x) noexcept {
  static const E4m3Table table;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_d = std::fabs(table.v[0] - a);
  for (int c = 1; c < 0x7F; ++c) {
    const double d = std::fabs(table.v[c] - a);
    if (d < best_d || (d == best_d && (c & 1) < (best & 1))) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

Status encode_channel(const nvfp4::WeightView& w, std::byte* weight_out, std::byte* scale_out,
                      std::string_view name) {
  FP4FORGE_TRY(scheme_ref::check_weight(w, name, "FP8_DYNAMIC"));
  FP4FORGE_TRY(scheme_ref::check_outputs(name, weight_out, scale_out));
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    float a = 0.0f;  // max(|min(amin, 0)|, |max(amax, 0)|) = max |w| over the row
    for (std::uint64_t k = 0; k < w.cols; ++k) a = std::max(a, std::fabs(load_elem(w.data, w.dtype, r * w.cols + k)));
    const float s = scale_of(a, w.dtype);
    scheme_ref::store_elem(scale_out, w.dtype, r, s);
    for (std::uint64_t k = 0; k < w.cols; ++k) {
      const std::uint64_t i = r * w.cols + k;
      weight_out[i] = static_cast<std::byte>(code_of(load_elem(w.data, w.dtype, i), s, w.dtype));
    }
  }
  return {};
}

Status encode_block(const nvfp4::WeightView& w, std::byte* weight_out, std::byte* scale_out,
                    std::string_view name) {
  FP4FORGE_TRY(scheme_ref::check_weight(w, name, "FP8_BLOCK"));
  FP4FORGE_TRY(scheme_ref::check_outputs(name, weight_out, scale_out));
  const std::uint64_t brows = block_scale_rows(w.rows), bcols = block_scale_cols(w.cols);
  for (std::uint64_t br = 0; br < brows; ++br) {
    const std::uint64_t r0 = br * kBlock, r1 = std::min(w.rows, r0 + kBlock);
    for (std::uint64_t bc = 0; bc < bcols; ++bc) {
      const std::uint64_t c0 = bc * kBlock, c1 = std::min(w.cols, c0 + kBlock);
      // The zero padding of a partial block only adds |0| to the max: leave it out.
      float a = 0.0f;
      for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t k = c0; k < c1; ++k) a = std::max(a, std::fabs(load_elem(w.data, w.dtype, r * w.cols + k)));
      const float s = scale_of(a, w.dtype);
      scheme_ref::store_elem(scale_out, w.dtype, br * bcols + bc, s);
      // The padded codes are sliced off by the compressor: only in-range elements are written.
      for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t k = c0; k < c1; ++k) {
          const std::uint64_t i = r * w.cols + k;
          weight_out[i] = static_cast<std::byte>(code_of(load_elem(w.data, w.dtype, i), s, w.dtype));
        }
    }
  }
  return {};
}

}  // namespace fp4forge::fp8
