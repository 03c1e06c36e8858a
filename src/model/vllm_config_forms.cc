#include "fp4forge/model/vllm_config_forms.h"

#include <algorithm>

namespace fp4forge {

std::optional<VllmConfigForm> vllm_config_form(const ModelInfo& info) noexcept {
  if (info.family != Family::GEMMA4) return std::nullopt;
  const bool has_gd = info.has_flat_global_head_dim, has_gkv = info.has_flat_num_global_kv_heads;
  if (info.has_per_layer_config) {
    if (has_gd || has_gkv) return std::nullopt;  // both forms: doctor checks they agree
    return VllmConfigForm{"gemma4-per-layer-config-only", kGemma4PerLayerConfigOnlyMinVllmMinor,
                          "Gemma-4's full-attention geometry only in per_layer_config (transformers >= 5.15 form)",
                          "plan with vllm_version=0.28 or newer, or write the flat global_head_dim / "
                          "num_global_key_value_heads into config.json"};
  }
  const bool full = std::find(info.layer_types.begin(), info.layer_types.end(), "full_attention") != info.layer_types.end();
  if (full && (!has_gd || (info.attention_k_eq_v && !has_gkv)))
    return VllmConfigForm{"gemma4-missing-global-kv-fields", -1,
                          "Gemma-4 without global_head_dim / num_global_key_value_heads and without per_layer_config",
                          "fp4forge doctor DIR --fix writes the values the tensors prove"};
  return std::nullopt;
}

}  // namespace fp4forge
