// Scheme names and per-Linear output sizes (scheme.h), from the encoders' own size helpers.
#include "fp4forge/codec/scheme.h"

#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/w4a16.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {

std::string_view quant_scheme_name(QuantScheme s) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return "nvfp4a16";
    case QuantScheme::MXFP4A16: return "mxfp4a16";
    case QuantScheme::FP8_DYNAMIC: return "fp8-dynamic";
    case QuantScheme::FP8_BLOCK: return "fp8-block";
    case QuantScheme::W4A16: return "w4a16";
  }
  return "?";
}

std::string_view quant_scheme_preset(QuantScheme s) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return "NVFP4A16";
    case QuantScheme::MXFP4A16: return "MXFP4A16";
    case QuantScheme::FP8_DYNAMIC: return "FP8_DYNAMIC";
    case QuantScheme::FP8_BLOCK: return "FP8_BLOCK";
    case QuantScheme::W4A16: return "W4A16";
  }
  return "?";
}

std::string_view quant_scheme_format(QuantScheme s) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return "nvfp4-pack-quantized";
    case QuantScheme::MXFP4A16: return "mxfp4-pack-quantized";
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: return "float-quantized";
    case QuantScheme::W4A16: return "pack-quantized";
  }
  return "?";
}

Result<QuantScheme> parse_quant_scheme(std::string_view text) {
  const std::string t = util::option_key(text);
  std::string names;
  for (QuantScheme s : kQuantSchemes) {
    if (t == quant_scheme_name(s) || t == util::option_key(quant_scheme_preset(s))) return s;
    names += (names.empty() ? "" : ", ") + std::string(quant_scheme_name(s));
  }
  return make_error(Errc::USAGE, "unknown scheme '{}'; expected one of: {}", text, names);
}

std::uint64_t k_multiple(QuantScheme s) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return nvfp4::kGroupSize;
    case QuantScheme::MXFP4A16: return mxfp4::kGroupSize;
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: return 1;
    case QuantScheme::W4A16: return w4a16::kGroupSize;
  }
  return 1;
}

int weight_bits(QuantScheme s) noexcept { return s == QuantScheme::FP8_DYNAMIC || s == QuantScheme::FP8_BLOCK ? 8 : 4; }

bool has_global_scale(QuantScheme s) noexcept { return s == QuantScheme::NVFP4A16; }

std::uint64_t LinearTensorSpec::bytes() const noexcept {
  std::uint64_t n = dtype_bits(dtype) / 8;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<LinearTensorSpec> linear_tensors(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) {
  using P = LinearPart;
  switch (s) {
    case QuantScheme::NVFP4A16:
      return {{P::PAYLOAD, "weight_packed", DType::U8, {n, k / 2}},
              {P::SCALE, "weight_scale", DType::F8_E4M3, {n, k / nvfp4::kGroupSize}},
              {P::GLOBAL_SCALE, "weight_global_scale", DType::F32, {1}}};
    case QuantScheme::MXFP4A16:
      return {{P::PAYLOAD, "weight_packed", DType::U8, {n, k / 2}},
              {P::SCALE, "weight_scale", DType::U8, {n, mxfp4::scale_cols(k)}}};
    case QuantScheme::FP8_DYNAMIC:
      return {{P::PAYLOAD, "weight", DType::F8_E4M3, {n, k}}, {P::SCALE, "weight_scale", src, {n, 1}}};
    case QuantScheme::FP8_BLOCK:
      return {{P::PAYLOAD, "weight", DType::F8_E4M3, {n, k}},
              {P::SCALE, "weight_scale", src, {fp8::block_scale_rows(n), fp8::block_scale_cols(k)}}};
    case QuantScheme::W4A16:
      return {{P::PAYLOAD, "weight_packed", DType::I32, {n, w4a16::packed_cols(k)}},
              {P::SCALE, "weight_scale", src, {n, w4a16::scale_cols(k)}},
              {P::SHAPE, "weight_shape", DType::I64, {2}}};
  }
  return {};
}

std::uint64_t linear_bytes(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) noexcept {
  std::uint64_t total = 0;
  for (const auto& t : linear_tensors(s, n, k, src)) total += t.bytes();
  return total;
}

std::vector<std::string> encode_paths(QuantScheme s) {
  switch (s) {
    case QuantScheme::NVFP4A16: return nvfp4::available_paths();
    case QuantScheme::MXFP4A16: return mxfp4::available_paths();
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: return fp8::available_paths();
    case QuantScheme::W4A16: return w4a16::available_paths();
  }
  return {"scalar"};
}

Result<std::vector<EncodedTensor>> encode_linear(QuantScheme s, const nvfp4::WeightView& w, std::string_view name,
                                                 std::string_view path) {
  std::vector<EncodedTensor> out;
  for (const auto& t : linear_tensors(s, w.rows, w.cols, w.dtype))
    out.push_back({std::string(t.suffix), t.dtype, t.shape, std::vector<std::byte>(static_cast<std::size_t>(t.bytes()))});
  // Every scheme on `path`: empty = the best (dispatched) path, "scalar" = the reference, or a target.
  const std::uint64_t n = w.rows;
  const bool best = path.empty();
  switch (s) {
    case QuantScheme::NVFP4A16: {
      const std::string nm(name);
      FP4FORGE_ASSIGN_OR_RETURN(nvfp4::EncodedSet set,
                                nvfp4::encode_fused(std::span(&w, 1), std::span(&nm, 1), path));
      out[0].bytes = std::move(set.members.front().packed);
      out[1].bytes = std::move(set.members.front().scale);
      std::memcpy(out[2].bytes.data(), &set.global_scale, 4);  // little-endian host
      return out;
    }
    case QuantScheme::MXFP4A16:
      FP4FORGE_TRY(best ? mxfp4::encode_rows(w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name)
                        : mxfp4::encode_rows_with(path, w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name));
      return out;
    case QuantScheme::FP8_DYNAMIC:
      FP4FORGE_TRY(best ? fp8::encode_channel_rows(w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name)
                        : fp8::encode_channel_rows_with(path, w, 0, n, out[0].bytes.data(), out[1].bytes.data(),
                                                        name));
      return out;
    case QuantScheme::FP8_BLOCK:
      FP4FORGE_TRY(best ? fp8::encode_block_rows(w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name)
                        : fp8::encode_block_rows_with(path, w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name));
      return out;
    case QuantScheme::W4A16: {
      const auto dims = w4a16::weight_shape(w.rows, w.cols);
      std::memcpy(out[2].bytes.data(), dims.data(), w4a16::kShapeBytes);  // little-endian host
      FP4FORGE_TRY(best ? w4a16::encode_rows(w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name)
                        : w4a16::encode_rows_with(path, w, 0, n, out[0].bytes.data(), out[1].bytes.data(), name));
      return out;
    }
  }
  return make_error(Errc::INTERNAL, "unknown scheme");
}

namespace {

/** Element `i` of a BF16 / F16 / F32 scale tensor as float (anything else: NaN). */
float scale_at(const std::byte* p, DType t, std::uint64_t i) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  if (t == DType::BF16) return half::bf16_to_float(h);
  if (t == DType::F16) return half::f16_to_float(h);
  return std::nanf("");
}

}  // namespace

void decode_linear_rows(QuantScheme s, const LinearData& d, std::uint64_t n, std::uint64_t k, std::uint64_t r0,
                        std::uint64_t r1, float* out) {
  (void)n;
  const auto u8 = [](const std::byte* p, std::uint64_t i) { return static_cast<std::uint8_t>(p[i]); };
  switch (s) {
    case QuantScheme::NVFP4A16:
      nvfp4::decode_rows(d.payload + r0 * (k / 2), d.scale + r0 * (k / nvfp4::kGroupSize), d.global_scale, r1 - r0, k,
                         out);
      return;
    case QuantScheme::MXFP4A16: {
      const std::uint64_t sc = mxfp4::scale_cols(k);
      for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t c = 0; c < k; ++c) {
          const std::uint8_t b = u8(d.payload, r * (k / 2) + c / 2);
          const std::uint8_t e = u8(d.scale, r * sc + c / mxfp4::kGroupSize);
          const float scale = e == 0xFF ? std::nanf("") : std::ldexp(1.0f, static_cast<int>(e) - 127);
          *out++ = nvfp4::fp4_to_float(c % 2 ? b >> 4 : b & 0x0F) * scale;
        }
      return;
    }
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: {
      const bool block = s == QuantScheme::FP8_BLOCK;
      const std::uint64_t bc = fp8::block_scale_cols(k);
      for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t c = 0; c < k; ++c) {
          const float scale =
              scale_at(d.scale, d.scale_dtype, block ? (r / fp8::kBlock) * bc + c / fp8::kBlock : r);
          *out++ = nvfp4::e4m3_to_float(u8(d.payload, r * k + c)) * scale;
        }
      return;
    }
    case QuantScheme::W4A16: {
      const std::uint64_t words = w4a16::packed_cols(k), sc = w4a16::scale_cols(k);
      for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t c = 0; c < k; ++c) {
          std::uint32_t w;
          std::memcpy(&w, d.payload + 4 * (r * words + c / w4a16::kValuesPerWord), 4);
          const int q = static_cast<int>((w >> (4 * (c % w4a16::kValuesPerWord))) & 0xF) + w4a16::kQMin;
          *out++ = static_cast<float>(q) * scale_at(d.scale, d.scale_dtype, r * sc + c / w4a16::kGroupSize);
        }
      return;
    }
  }
}

}  // namespace fp4forge
