#pragma once
/**
 * What each quantization scheme may quantize (docs/schemes.md, "What each scheme quantizes"): the one
 * statement quantize decides by, verify checks against and plan sizes with.
 *
 * - Roles: every scheme quantizes the roles role_is_quantizable() names (attention, dense MLP, routed and
 *   shared experts). A family's mixer projections (GatedDeltaNet `linear_attn.*`) are quantized by schemes
 *   of at least FamilySpec::mixer_quant_bits bits (8: the FP8 schemes), except the leaves in
 *   FamilySpec::no_block_quant under FP8_BLOCK. Everything protected stays protected under every scheme.
 * - Shapes: the in_features / out_features multiples a Linear needs for vLLM to serve it in the scheme
 *   (shape_rule); a weight that misses them is kept, with the reason.
 */
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/registry.h"
#include "fp4forge/model/tensor_role.h"

namespace fp4forge {

/** The multiples of K (in_features) and N (out_features) a quantized Linear needs under a scheme. */
struct ShapeRule {
  std::uint64_t k_multiple = 1;
  std::uint64_t n_multiple = 1;
  std::string_view why;  ///< where the rule comes from, for the keep reason
};

/**
 * NVFP4A16 16 / 1 and MXFP4A16 32 / 1 (the group), W4A16 128 / 1 (the group; upstream refuses the rest),
 * FP8_DYNAMIC 1 / 1 (any shape), FP8_BLOCK 128 / 128 (vLLM's block-FP8 path quantizes activations in groups
 * of 128 along K and checks N against the 128-row block for merged and tensor-parallel layers).
 */
ShapeRule shape_rule(QuantScheme s) noexcept;

/**
 * True when the policy quantizes a text-stack 2-D weight of role `r` under scheme `s` in `family`;
 * `leaf` is the last component of its module name ("in_proj_a"). MTP and non-text weights are kept by
 * the caller before this is asked.
 */
bool policy_quantizes(Role r, const FamilySpec& family, QuantScheme s, std::string_view leaf) noexcept;

/** Why the policy keeps role `r` under `s` when policy_quantizes says no for a role another scheme
 * quantizes ("" otherwise): "linear attention: kept at 4 bits ...", "in_proj_ba: no blockwise FP8 ...". */
std::string scheme_keep_reason(Role r, const FamilySpec& family, QuantScheme s, std::string_view leaf);

}  // namespace fp4forge
