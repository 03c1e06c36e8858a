// What each scheme quantizes (scheme_policy.h).
#include "fp4forge/model/scheme_policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace fp4forge {

ShapeRule shape_rule(QuantScheme s) noexcept {
  const SchemeTraits& t = scheme_traits(s);
  return {t.shape_k, t.shape_n, t.shape_why};
}

namespace {
bool mixer_allowed(Role r, const FamilySpec& f, QuantScheme s, std::string_view leaf) {
  if (r != Role::LINEAR_ATTN || f.mixer_quant_bits <= 0 || weight_bits(s) < f.mixer_quant_bits) return false;
  if (scheme_traits(s).block_scales &&  // vLLM has no blockwise path for the listed leaves
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
    return fmt::format(
        "linear attention: kept in 16 bits under a {}-bit scheme (quantized only by schemes of {} bits "
        "or more; architectures.md 5.3)",
        weight_bits(s), family.mixer_quant_bits);
  return fmt::format("{}: kept under {} (vLLM has no blockwise FP8 for in_proj_ba)", leaf, quant_scheme_name(s));
}

}  // namespace fp4forge
