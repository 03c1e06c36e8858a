// Scalar reference W4A16 encoder: a literal transcription of what compressed-tensors 0.18 runs under
// llm-compressor's model_free_ptq, step by step, in the dtype torch uses for each step. Obvious, not
// fast.
//
// Pipeline (upstream files under src/compressed_tensors unless said otherwise):
//  0. llm-compressor entrypoints/model_free (validate_weight_for_quantization) runs the observer's
//     reshape observers/helpers.py::_flatten_weight, value.unflatten(-1, (-1, 128)), on the meta
//     tensor first: a K that is not a multiple of 128 (K < 128 included) is refused there.
//  1. observers/min_max.py::_get_min_max: amin / amax per group of 128 columns. Exact in D.
//  2. quantization/utils/helpers.py::calculate_qparams: min = min(amin, 0), max = max(amax, 0),
//     a = max(|min|, |max|); calculate_range gives q_min = -8, q_max = 7, so scale =
//     a / (float(15) / 2): a D tensor divided by the Python float 7.5 (float32 division, rounded to
//     D). scale_dtype is None: no further rounding; zeros -> finfo(D).eps (_get_dtype_eps).
//     lifecycle/initialize.py::initialize_qparams made weight_scale a D parameter [N, K/128].
//  3. compressors/pack_quantized/base.py::PackedQuantizationCompressor.compress -> lifecycle/
//     forward.py::quantize(dtype=int8) -> forward_helpers.py::_process_group -> _quantize:
//     scaled = x / scale (D / D: float32 division rounded to D); quant_args.py::
//     round_to_quantized_type_args: clamp(scaled, -8, 7) in D, then torch.round (half to even),
//     back to D (exact), then .to(int8).
//  4. compressors/pack_quantized/helpers.py::pack_to_int32(num_bits=4): value + 8 (offset
//     1 << (num_bits - 1)), then element i of each run of 32 goes to bits (4 i) % 32 of word 4 i / 32
//     (scatter_add of disjoint nibbles = OR): 8 nibbles per word, lowest column in the lowest nibble.
//     weight_shape = torch.tensor(weight.shape), int64.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/w4a16.h"

namespace fp4forge::w4a16 {

using scheme_ref::load_elem;
using scheme_ref::round_d;

namespace {

// The reference on a whole view; group_max (rows * K/128 values) replaces each group's max |w| when given (a
// searched observer's maxima: calculate_qparams then runs on the searched min/max).
Status encode_impl(const nvfp4::WeightView& w, const float* group_max, std::byte* packed_out, std::byte* scale_out,
                   std::string_view name) {
  FP4FORGE_TRY(scheme_ref::check_weight(w, name, "W4A16"));
  if (w.cols % kGroupSize != 0)
    return scheme_ref::tensor_error(
        name, fmt::format("shape [{}, {}]: K = {} is not a multiple of 128 (K % 128 = {}); W4A16 needs whole "
                          "groups of 128 columns (compressed-tensors refuses it too); leave it unquantized",
                          w.rows, w.cols, w.cols, w.cols % kGroupSize));
  FP4FORGE_TRY(scheme_ref::check_outputs(name, packed_out, scale_out));
  const float half_range = static_cast<float>(kQMax - kQMin) / 2.0f;  // float(bit_range) / 2 = 7.5
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    for (std::uint64_t g = 0; g < scale_cols(w.cols); ++g) {
      const std::uint64_t base = r * w.cols + g * kGroupSize;
      // max(|min(amin, 0)|, |max(amax, 0)|) = max |w| over the group, or the searched max
      float a = group_max != nullptr ? group_max[r * scale_cols(w.cols) + g] : 0.0f;
      if (group_max == nullptr)
        for (std::uint64_t k = 0; k < kGroupSize; ++k) a = std::max(a, std::fabs(load_elem(w.data, w.dtype, base + k)));
      float s = round_d(a / half_range, w.dtype);  // max_val_pos / 7.5 in D
      if (s == 0.0f) s = scheme_ref::eps_d(w.dtype);
      scheme_ref::store_elem(scale_out, w.dtype, r * scale_cols(w.cols) + g, s);
      for (std::uint64_t k0 = 0; k0 < kGroupSize; k0 += kValuesPerWord) {
        std::uint32_t word = 0;
        for (std::uint64_t j = 0; j < kValuesPerWord; ++j) {
          float q = round_d(load_elem(w.data, w.dtype, base + k0 + j) / s, w.dtype);  // x / scale in D
          q = std::min(std::max(q, static_cast<float>(kQMin)), static_cast<float>(kQMax));  // clamp
          const int v = static_cast<int>(std::nearbyint(q));  // torch.round: half to even (default FE_TONEAREST)
          word |= static_cast<std::uint32_t>(v - kQMin) << (4 * j);  // + offset 8, nibble j of the word
        }
        const std::uint64_t wi = (base + k0) / kValuesPerWord;  // = r * K/8 + word index in the row
        for (int b = 0; b < 4; ++b) packed_out[4 * wi + b] = static_cast<std::byte>((word >> (8 * b)) & 0xFF);
      }
    }
  }
  return {};
}

}  // namespace

Status encode(const nvfp4::WeightView& w, std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  return encode_impl(w, nullptr, packed_out, scale_out, name);
}

Status encode_rows_maxima(const nvfp4::WeightView& w, const float* group_max, std::uint64_t r0, std::uint64_t r1,
                          std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(const nvfp4::WeightView rows, scheme_ref::rows_of(w, r0, r1, name));
  return rows.rows == 0 ? Status{} : encode_impl(rows, group_max, packed_out, scale_out, name);
}

}  // namespace fp4forge::w4a16
