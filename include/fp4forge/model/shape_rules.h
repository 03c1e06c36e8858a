#pragma once
/**
 * Config against tensor shapes: the invariants of architectures.md §3.1 / §3.5 (every projection's
 * [out, in] from the config's widths, norms, conv and state tensors, routed experts, MTP layers), evaluated by
 * rule for every family in the registry. doctor reports them (`config-shape-mismatch`, `expert-layout`,
 * `mtp-declared-missing`, `mtp-present-undeclared`); the MTP splice re-runs them on the checkpoint as the
 * splice would leave it, before writing. Pure over (config, tensor names and shapes); only the tied-embedding
 * rule reads two tensors' bytes, through `ckpt` when it is set.
 */
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding_sink.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/tensor_role.h"
#include "fp4forge/safetensors/checkpoint.h"

namespace fp4forge {

struct TensorMeta {
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

/** What the shape rules look at. Set dir, config and tensors (and ckpt to let the tied-embedding rule read
 * bytes), then init_shape_context(). */
struct ShapeContext {
  std::filesystem::path dir;
  const Checkpoint* ckpt = nullptr;     ///< null when the directory has no weights (or none is opened)
  nlohmann::ordered_json config;        ///< config.json
  ModelInfo info;
  std::map<std::string, TensorMeta, std::less<>> tensors;  ///< every tensor, by name
  std::string text_prefix;              ///< text-stack prefix actually used by the tensors
  /** `<text_prefix><container>.` of the decoder layers the tensors show ("model.layers.", "transformer.h.");
   * empty when no decoder stack was found (then per-layer checks are skipped with a warning). */
  std::string layer_prefix;

  const nlohmann::ordered_json& text() const { return text_config(config); }
  bool has(std::string_view name) const { return tensors.find(name) != tensors.end(); }
  const TensorMeta* tensor(std::string_view name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
  /** True when some tensor name starts with `prefix`. */
  bool any_with_prefix(std::string_view prefix) const;
  /** The logical [out, in] of a Linear module (`X.weight`, or `X.weight_packed` rows; in = -1 when
   * packed); nullopt when the module has neither. */
  std::optional<std::pair<std::int64_t, std::int64_t>> linear_shape(const std::string& module) const;
  /** `text.<key>` as an integer if present and integral. */
  std::optional<std::int64_t> text_int(std::string_view key) const;
  /** Path of a text-config key in config.json (["text_config", key] for wrappers). */
  std::vector<std::string> text_path(std::string_view key) const;
};

/** Every tensor of `ck` as the shape rules see it (name -> dtype and shape): the one reading of a checkpoint into
 * ShapeContext::tensors. */
std::map<std::string, TensorMeta, std::less<>> tensor_metas(const Checkpoint& ck);

/** Completes a context whose dir, config and tensors are set: ModelInfo (BAD_INPUT naming config.json when
 * malformed), the structure the tensors show, and the text and layer prefixes they use. */
Status init_shape_context(ShapeContext& ctx);

// ---- expected Linear shapes: the one home of the width formulas (the shape rules and verify use them) ----------

/** [out, in] of a Linear; nullopt when a width it needs is unknown (<= 0). */
using LinearShape = std::optional<std::pair<std::int64_t, std::int64_t>>;

/** Standard attention: ATTN_Q [heads·head_dim·q_mult, hidden] (`q_mult` 2 for an output-gated q), ATTN_K / ATTN_V
 * [kv_heads·head_dim, hidden], ATTN_O [hidden, heads·head_dim], pre-fused ATTN_QKV [(heads + 2·kv_heads)·head_dim,
 * hidden]; nullopt for another role. */
LinearShape attention_shape(Role r, std::int64_t hidden, std::int64_t heads, std::int64_t head_dim,
                            std::int64_t kv_heads, std::int64_t q_mult = 1);
/** attention_shape's `q_mult` for a full-attention layer as doctor's shape rules and synth read it: 2 for the
 * output-gated q of a GatedDeltaNet hybrid (Qwen3-Next, Qwen3.5: attn_output_gate), else 1. */
std::int64_t gated_q_multiplier(const ModelInfo& m);
/** Multi-head latent attention (DeepSeek-V2/V3) from the config's ranks and head widths: ATTN_Q (no q_lora_rank)
 * and ATTN_Q_B [heads·(qk_nope + qk_rope), hidden | q_lora_rank], ATTN_Q_A [q_lora_rank, hidden], ATTN_KV_A
 * [kv_lora_rank + qk_rope, hidden], ATTN_KV_B [heads·(qk_nope + v_head_dim), kv_lora_rank], ATTN_O [hidden,
 * heads·v_head_dim]; nullopt for another role. */
LinearShape mla_shape(Role r, const ModelInfo& m);
/** Gated MLP of width `width`: gate / up [width, hidden], down [hidden, width], fused gate_up [2·width, hidden]
 * (the MLP_*, EXPERT_* and SHARED_EXPERT_* roles alike); nullopt for another role. */
LinearShape mlp_shape(Role r, std::int64_t hidden, std::int64_t width);

/** A GatedDeltaNet (Qwen3-Next, Qwen3.5) linear-attention tensor by its leaf under `linear_attn.`, from the config's
 * Hk = linear_num_key_heads, Hv = linear_num_value_heads, Dk / Dv their head widths, Kc = linear_conv_kernel_dim:
 * in_proj_qkvz [2·Hk·Dk + 2·Hv·Dv, H] and in_proj_ba [2·Hv, H] (Qwen3-Next's fused form), in_proj_qkv
 * [2·Hk·Dk + Hv·Dv, H], in_proj_z [Hv·Dv, H], in_proj_a / in_proj_b [Hv, H], out_proj [H, Hv·Dv], conv1d
 * [2·Hk·Dk + Hv·Dv, 1, Kc], A_log / dt_bias [Hv], norm [Dv]. Empty for another leaf or when a width is unknown
 * (<= 0; Kc unknown: -1 in the conv's last place). */
std::vector<std::int64_t> linear_attention_shape(std::string_view leaf, const ModelInfo& m);

/** The [out, in] a 2-D weight of role `base` in the layer `c` has by the config (`text` is its text config):
 * the layer's own head width and KV heads (per-layer geometry, Gemma-4 globals), the double-wide MLP of
 * Gemma-4's KV-shared layers, an output-gated q, MLA, expert and shared-expert widths. nullopt when the config
 * does not state it. What verify checks quantized weights against. */
LinearShape expected_linear_shape(const ModelInfo& info, const nlohmann::ordered_json& text, Role base,
                                  const TensorClass& c);

/** `config-shape-mismatch` and `expert-layout`: one finding per broken rule, listing the tensors. */
void check_config_shapes(const ShapeContext& ctx, FindingSink& out);
/** `mtp-declared-missing` / `mtp-present-undeclared`: the MTP layers the config declares against the tensors. */
void check_mtp(const ShapeContext& ctx, FindingSink& out);

}  // namespace fp4forge
