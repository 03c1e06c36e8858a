// Scheme names and per-Linear output sizes (scheme.h), from the encoders' own size helpers.
#include "fp4forge/codec/scheme.h"

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

}  // namespace fp4forge
