// Scalar reference MXFP4A16 encoder: a literal transcription of what compressed-tensors 0.18 runs
// under llm-compressor's model_free_ptq, step by step, in the dtype torch uses for each step.
// Obvious, not fast.
//
// Pipeline (upstream files under src/compressed_tensors unless said otherwise):
//  0. llm-compressor model_free validate_weight_for_quantization runs observers/helpers.py::
//     _flatten_weight, value.unflatten(-1, (-1, 32)), on the meta tensor: K % 32 != 0 is refused.
//  1. observers/min_max.py::_get_min_max: amin / amax per group of 32. Exact in D.
//  2. quantization/utils/helpers.py::calculate_qparams, symmetric and should_generate_mx_scales
//     (num_bits 4, float, group 32, scale_dtype uint8):
//     a = max(|min(amin, 0)|, |max(amax, 0)|) in D;
//     quantization/utils/mxfp_utils.py::generate_mx_scales: round_to_power_2(a) = (bits_D(a) +
//       (1 << (mantissa_D - 2))) & sign_exponent_mask_D, then 127 + floor(log2(p2)) - 2 (offset
//       floor(log2(6))), all in D and exact (log2(0) = -inf);
//     quant_args.py::round_to_quantized_type_dtype(uint8): clamp(0, 255), round, to uint8, back to D;
//     mxfp_utils.py::maybe_convert_from_mx_exp: 2.0 ** (e - 127) in float32, then .to(D);
//     zeros -> _get_dtype_eps(uint8) = 1 (only reachable in F16, where 2^(e-127) underflows).
//     lifecycle/initialize.py::initialize_qparams made weight_scale a D parameter [N, K/32].
//  3. compressors/nvfp4/base.py::NVFP4PackedCompressor.compress (MXFP4PackedCompressor inherits it):
//     lifecycle/forward.py::quantize -> forward_helpers.py::_process_group -> _quantize: x / scale
//     (D / D: float32 division rounded to D), quant_args.py::round_to_quantized_type_args: clamp
//     (-6, 6), quantization/utils/fp4_utils.py::cast_to_fp4 (threshold bins, times sign(x));
//     compressors/nvfp4/helpers.py::pack_fp4_to_uint8: index from |2x|, bit 3 = signbit, low nibble
//     = even column. Both are the same steps NVFP4 uses: nvfp4::detail::ref_fp4_code.
//  4. compressors/mxfp4/base.py::_compress_scale -> compressors/mx_utils.py::compress_mx_scale:
//     127 + floor(log2(scale)) as int32, then uint8.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/mxfp4.h"

namespace fp4forge::mxfp4 {
namespace {

using scheme_ref::load_elem;
using scheme_ref::round_d;

// mxfp_utils.py::round_to_power_2 on the bit pattern of `a` in D; returns the power of two as float
// (0 or +inf possible). VAL_TO_ADD = 1 << (mantissa_D - FP4 mantissa (1) - 1).
float round_to_power_2(float a, DType dt) {
  switch (dt) {
    case DType::BF16: {  // 7 mantissa bits: add 1 << 5, keep sign + 8 exponent bits
      const std::uint32_t b = half::float_to_bf16(a);  // exact: a is a bf16 value
      return half::bf16_to_float(static_cast<std::uint16_t>((b + (1u << 5)) & 0xFF80u));
    }
    case DType::F16: {  // 10 mantissa bits: add 1 << 8, keep sign + 5 exponent bits
      const std::uint32_t b = half::float_to_f16(a);  // exact: a is an f16 value
      return half::f16_to_float(static_cast<std::uint16_t>((b + (1u << 8)) & 0xFC00u));
    }
    default: {  // F32, 23 mantissa bits: add 1 << 21, keep sign + 8 exponent bits
      const std::uint32_t b = std::bit_cast<std::uint32_t>(a);
      return std::bit_cast<float>((b + (1u << 21)) & 0xFF800000u);
    }
  }
}

}  // namespace

bool group_scale(float a, DType dt, std::uint8_t* code, float* scale) noexcept {
  const float p2 = round_to_power_2(a, dt);
  if (std::isinf(p2)) return false;
  // 127 + floor(log2(p2)) - 2 in D (small integers: exact), log2(0) = -inf; then clamp(0, 255) and
  // round (round_to_quantized_type_dtype to uint8).
  const float e_d = p2 == 0.0f ? -INFINITY : 127.0f + std::floor(std::log2(p2)) - 2.0f;
  const int e = static_cast<int>(std::nearbyint(std::min(std::max(e_d, 0.0f), 255.0f)));
  // maybe_convert_from_mx_exp: 2.0 ** float32(e - 127), then .to(D).
  float s = round_d(std::ldexp(1.0f, e - 127), dt);
  if (s == 0.0f) s = 1.0f;  // torch.where(scales == 0, eps(uint8) = 1, scales)
  // compress_mx_scale: 127 + floor(log2(s)) (s is a power of two: exact), as int32 then uint8.
  *code = static_cast<std::uint8_t>(127 + static_cast<int>(std::floor(std::log2(s))));
  *scale = s;
  return true;
}

namespace {

// The reference on a whole view; group_max (rows * K/32 values) replaces each group's max |w| when given (a
// searched observer's maxima: calculate_qparams then runs on the searched min/max).
Status encode_impl(const nvfp4::WeightView& w, const float* group_max, std::byte* packed_out, std::byte* scale_out,
                   std::string_view name) {
  FP4FORGE_TRY(scheme_ref::check_weight(w, name, "MXFP4A16"));
  if (w.cols % kGroupSize != 0)
    return scheme_ref::tensor_error(
        name, fmt::format("shape [{}, {}]: K = {} is not a multiple of 32 (K % 32 = {}); MXFP4 needs whole "
                          "groups of 32 columns (compressed-tensors refuses it too); leave it unquantized",
                          w.rows, w.cols, w.cols, w.cols % kGroupSize));
  FP4FORGE_TRY(scheme_ref::check_outputs(name, packed_out, scale_out));
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    for (std::uint64_t g = 0; g < scale_cols(w.cols); ++g) {
      const std::uint64_t base = r * w.cols + g * kGroupSize;
      // max |w| over the group, exact in D, or the searched max
      float a = group_max != nullptr ? group_max[r * scale_cols(w.cols) + g] : 0.0f;
      if (group_max == nullptr)
        for (std::uint64_t k = 0; k < kGroupSize; ++k) a = std::max(a, std::fabs(load_elem(w.data, w.dtype, base + k)));
      std::uint8_t e = 0;
      float s = 1.0f;
      if (!group_scale(a, w.dtype, &e, &s))
        return scheme_ref::tensor_error(
            name, fmt::format("row {}, group {} (columns {}..{}): max |w| = {} rounds to a power of two past the "
                              "largest finite {} value, so the E8M0 scale is undefined upstream; MXFP4 refuses it",
                              r, g, g * kGroupSize, g * kGroupSize + kGroupSize - 1, a, dtype_name(w.dtype)));
      scale_out[r * scale_cols(w.cols) + g] = static_cast<std::byte>(e);
      std::uint8_t codes[kGroupSize];
      for (std::uint64_t k = 0; k < kGroupSize; ++k) {
        float q = round_d(load_elem(w.data, w.dtype, base + k) / s, w.dtype);  // x / scale in D
        q = std::min(std::max(q, -6.0f), 6.0f);                               // clamp(-6, 6)
        codes[k] = nvfp4::detail::ref_fp4_code(q);  // cast_to_fp4 + pack_fp4_to_uint8's index and sign
      }
      for (std::uint64_t j = 0; j < kGroupSize; j += 2)  // low nibble = even column
        packed_out[(base + j) / 2] = static_cast<std::byte>(codes[j] | (codes[j + 1] << 4));
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

}  // namespace fp4forge::mxfp4
