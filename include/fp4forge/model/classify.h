#pragma once
/**
 * classify(): a pure function from (tensor name, shape, ModelInfo) to a role, with layer index, expert
 * index and layer type where they exist. Never depends on iteration order. Quantized-checkpoint names
 * (`X.weight_packed`, `X.weight_scale`, `X.weight_global_scale`, `X.input_global_scale`) classify by
 * their module X. The role's traits come from the role table (tensor_role.h), the leaf's from the leaf table
 * (tensor_param.h); the name components it reads are those of tensor_names.h.
 */
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/model/model_info.h"
#include "fp4forge/model/tensor_param.h"
#include "fp4forge/model/tensor_role.h"

namespace fp4forge {

struct TensorClass {
  Role role = Role::OTHER;
  int layer = -1;           ///< decoder layer index (text stack or mtp.layers.k), -1 if none
  int expert = -1;          ///< routed expert index for per-expert tensors, -1 otherwise
  std::string layer_type;   ///< "full_attention", "sliding_attention", "linear_attention" or ""
  std::string module;       ///< module path (name without the final parameter component; names::split_leaf)
  std::string param;        ///< the leaf, the final component: "weight", "bias", "weight_packed", "gate_up_proj", ...
  ParamKind param_kind = ParamKind::OTHER;  ///< the leaf's kind (leaf table; OTHER for a leaf outside it)
  RoleGroup group = RoleGroup::OTHER;       ///< the group of `role` (role table)
  bool text_stack = false;  ///< under the text prefix (not tower, not mtp)
  // --- additions (model engineer) ---
  /** For MTP tensors (role MTP): the role the tensor would have in a text-stack layer (ATTN_Q for
   * `mtp.layers.0.self_attn.q_proj.weight`, NORM for `mtp.norm.weight`, OTHER for `mtp.fc`).
   * Equal to `role` for every other tensor. */
  Role base_role = Role::OTHER;
  bool quant_param = false;  ///< the leaf table's quant_param: a compressed-tensors / FP8 parameter (weight_packed, ...)
};

TensorClass classify(std::string_view name, std::span<const std::uint64_t> shape, const ModelInfo& info);

/** A fused global-scale set (R1): members share one global scale; all quantized or all kept. */
struct FusedSet {
  std::string parent;                ///< parent module, e.g. "model.layers.0.self_attn"
  std::vector<std::string> members;  ///< member module names (e.g. "...q_proj"), in canonical order
  std::string kind;                  ///< "qkv", "qk", "gate_up", "q_a_kv_a", "w1_w3"
};

/**
 * Forms the fused sets of R1 over a list of module names that own a 2-D `weight` (after splitting fused
 * 3-D experts). Modules in no set are absent from the result. Pure; output sorted by parent.
 */
std::vector<FusedSet> fused_sets(std::span<const std::string> weight_modules, const ModelInfo& info);

}  // namespace fp4forge
