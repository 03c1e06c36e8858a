// What each scheme quantizes (scheme_policy.h).
#include "fp4forge/model/scheme_policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace fp4forge {

ShapeRule shape_rule(QuantScheme s) noexcept {
  switch (s) {
    case QuantScheme::NVFP4A16: return {16, 1, "NVFP4 groups are 16 columns"};
    case QuantScheme::MXFP4A16: return {32, 1, "MXFP4 groups are 32 columns"};
    case QuantScheme::FP8_DYNAMIC: return {1, 1, "any shape"};
    case QuantScheme::FP8_BLOCK: return {128, 128, "vLLM serves block FP8 in whole 128 x 128 blocks"};
    case QuantScheme::W4A16: return {128, 1, "W4A16 groups are 128 columns"};
  }
  return {};
}

namespace {
bool mixer_allowed(Role r, const FamilySpec& f, QuantScheme s, std::string_view leaf) {
  if (r != Role::LINEAR_ATTN || f.mixer_quant_bits <= 0 || weight_bits(s) < f.mixer_quant_bits) return false;
  if (s == QuantScheme::FP8_BLOCK &&
      std::find(f.no_block_quant.begin(), f.no_block_quant.end(), leaf) != f.no_block_quant.end())
    return false;
  return true;
}
}  // namespace

bool policy_quantizes(Role r, const FamilySpec& family, QuantScheme s, std::string_view leaf) noexcept {
  return role_is_quantizable(r) || mixer_allowed(r, family, s, leaf);
}

std::string scheme_keep_reason(Role r, const FamilySpec& family, QuantScheme s, std::string_view leaf) {
  if (r != Role::LINEAR_ATTN || family.mixer_quant_bits <= 0 || policy_quantizes(r, family, s, leaf)) return {};
  if (weight_bits(s) < family.mixer_quant_bits)
    return fmt::format("linear attention: kept at {} bits (quantized from {} bits; architectures.md 5.3)",
                       weight_bits(s), family.mixer_quant_bits);
  return fmt::format("{}: kept under fp8-block (vLLM has no blockwise FP8 for in_proj_ba)", leaf);
}

}  // namespace fp4forge
