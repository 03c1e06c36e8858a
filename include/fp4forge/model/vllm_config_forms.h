#pragma once
/**
 * Config forms vLLM builds only from some release on, or never (issue 51): the rule doctor reports
 * (`gemma4-per-layer-config-only`, `gemma4-missing-global-kv-fields`) and `plan --emit-compose` refuses a stack
 * by. One home for the release boundary; the cause is in docs/architectures.md §3.2 - §3.3 and the failure
 * catalogue (F27, F28).
 *
 * - Gemma-4 with its full-attention geometry only in `per_layer_config` (the transformers >= 5.15 form, no flat
 *   `global_head_dim` / `num_global_key_value_heads`): vLLM <= 0.27 with transformers <= 5.14 reads the global kv
 *   heads as None and fails to build the full-attention layers, 0.27.x with transformers >= 5.15 crashes in
 *   get_head_size (vllm #51744); from 0.28 it builds.
 * - Gemma-4 without the flat fields and without `per_layer_config` (F27): no release builds it (the layers fall back
 *   to head_dim / None and loading fails with a size mismatch on the full-attention projections).
 */
#include <optional>
#include <string_view>

#include "fp4forge/model/model_info.h"

namespace fp4forge {

/** The first vLLM 0.MINOR that builds Gemma-4's per_layer_config-only form. */
inline constexpr int kGemma4PerLayerConfigOnlyMinVllmMinor = 28;

struct VllmConfigForm {
  std::string_view kind;  ///< the doctor finding kind that reports the form
  int min_minor = -1;     ///< the first vLLM 0.MINOR that builds it; -1: no release does
  std::string_view what;  ///< the form, for messages
  std::string_view fix;   ///< how to make it buildable
};

/** The form of `info`'s config that some vLLM releases cannot build, or nullopt when every modelled release builds
 * it (as far as these rules know). Reads ModelInfo's record of the config keys. */
std::optional<VllmConfigForm> vllm_config_form(const ModelInfo& info) noexcept;

}  // namespace fp4forge
