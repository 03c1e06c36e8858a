// Scheme names and per-Linear output sizes (scheme.h), from the encoders' own size helpers.
#include "fp4forge/codec/scheme.h"

#include <cstring>
#include <span>
#include <string>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/w4a16.h"

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
  auto norm = [](std::string_view v) {
    std::string out;
    for (char c : v) out += c == '_' ? '-' : static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return out;
  };
  const std::string t = norm(text);
  std::string names;
  for (QuantScheme s : kQuantSchemes) {
    if (t == quant_scheme_name(s) || t == norm(quant_scheme_preset(s))) return s;
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

std::uint64_t linear_bytes(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return n * k / 2 + n * (k / nvfp4::kGroupSize) + 4;  // packed, E4M3 scales, global
    case QuantScheme::MXFP4A16: return mxfp4::packed_bytes(n, k) + mxfp4::scale_bytes(n, k);
    case QuantScheme::FP8_DYNAMIC: return fp8::weight_bytes(n, k) + fp8::channel_scale_bytes(n, src);
    case QuantScheme::FP8_BLOCK: return fp8::weight_bytes(n, k) + fp8::block_scale_bytes(n, k, src);
    case QuantScheme::W4A16: return w4a16::packed_bytes(n, k) + w4a16::scale_bytes(n, k, src) + w4a16::kShapeBytes;
  }
  return 0;
}

namespace {
EncodedTensor tensor(std::string suffix, DType dtype, std::vector<std::uint64_t> shape, std::uint64_t bytes) {
  return {std::move(suffix), dtype, std::move(shape), std::vector<std::byte>(static_cast<std::size_t>(bytes))};
}
}  // namespace

Result<std::vector<EncodedTensor>> encode_linear(QuantScheme s, const nvfp4::WeightView& w, std::string_view name) {
  const std::uint64_t n = w.rows, k = w.cols;
  const DType sd = w.dtype;  // FP8 and W4A16 scales are stored in the weight's dtype
  std::vector<EncodedTensor> out;
  switch (s) {
    case QuantScheme::NVFP4A16: {
      const std::string nm(name);
      FP4FORGE_ASSIGN_OR_RETURN(nvfp4::EncodedSet set, nvfp4::encode_fused(std::span(&w, 1), std::span(&nm, 1)));
      auto& m = set.members.front();
      out.push_back({"weight_packed", DType::U8, {n, k / 2}, std::move(m.packed)});
      out.push_back({"weight_scale", DType::F8_E4M3, {n, k / nvfp4::kGroupSize}, std::move(m.scale)});
      EncodedTensor gs = tensor("weight_global_scale", DType::F32, {1}, 4);
      std::memcpy(gs.bytes.data(), &set.global_scale, 4);  // little-endian host
      out.push_back(std::move(gs));
      return out;
    }
    case QuantScheme::MXFP4A16: {
      out.push_back(tensor("weight_packed", DType::U8, {n, k / 2}, mxfp4::packed_bytes(n, k)));
      out.push_back(tensor("weight_scale", DType::U8, {n, mxfp4::scale_cols(k)}, mxfp4::scale_bytes(n, k)));
      FP4FORGE_TRY(mxfp4::encode(w, out[0].bytes.data(), out[1].bytes.data(), name));
      return out;
    }
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: {
      const bool block = s == QuantScheme::FP8_BLOCK;
      out.push_back(tensor("weight", DType::F8_E4M3, {n, k}, fp8::weight_bytes(n, k)));
      out.push_back(block ? tensor("weight_scale", sd, {fp8::block_scale_rows(n), fp8::block_scale_cols(k)},
                                   fp8::block_scale_bytes(n, k, sd))
                          : tensor("weight_scale", sd, {n, 1}, fp8::channel_scale_bytes(n, sd)));
      FP4FORGE_TRY(block ? fp8::encode_block(w, out[0].bytes.data(), out[1].bytes.data(), name)
                         : fp8::encode_channel(w, out[0].bytes.data(), out[1].bytes.data(), name));
      return out;
    }
    case QuantScheme::W4A16: {
      out.push_back(tensor("weight_packed", DType::I32, {n, w4a16::packed_cols(k)}, w4a16::packed_bytes(n, k)));
      out.push_back(tensor("weight_scale", sd, {n, w4a16::scale_cols(k)}, w4a16::scale_bytes(n, k, sd)));
      EncodedTensor shape = tensor("weight_shape", DType::I64, {2}, w4a16::kShapeBytes);
      const auto dims = w4a16::weight_shape(n, k);
      std::memcpy(shape.bytes.data(), dims.data(), w4a16::kShapeBytes);  // little-endian host
      FP4FORGE_TRY(w4a16::encode(w, out[0].bytes.data(), out[1].bytes.data(), name));
      out.push_back(std::move(shape));
      return out;
    }
  }
  return make_error(Errc::INTERNAL, "unknown scheme");
}

}  // namespace fp4forge
