#pragma once
/**
 * What config.json says about the model, read once (pure function of the JSON):
 * family, wrapper vs flat layout, text prefix, text-config geometry and per-layer types.
 * Reading rule: `text = cfg.get("text_config", cfg)` (architectures.md §1.1).
 */
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/model/registry.h"

namespace fp4forge {

/** Architecture class flags; combinable (e.g. MoE | multimodal). */
struct ArchClass {
  bool moe = false;
  bool hybrid = false;      ///< linear attention (GatedDeltaNet) layers present
  bool multimodal = false;  ///< vision/audio tower present (tensors) or wrapper with vision_config
  int num_experts = 0;
  /** "dense", "moe", "moe+hybrid+multimodal", ... stable text form */
  std::string str() const;
  /** str() with the expert count: "moe+multimodal (128 experts)". */
  std::string describe() const;
  bool operator==(const ArchClass&) const = default;
};

struct ModelInfo {
  std::string architecture;  ///< architectures[0] ("" if absent)
  std::string model_type;    ///< top-level model_type
  std::string text_model_type;
  Family family = Family::UNKNOWN;
  bool wrapper = false;     ///< has text_config (multimodal wrapper layout)
  std::string text_prefix;  ///< "model.language_model." or "model." (from config; may be refined by tensors)
  // text-config geometry (0 / -1 when absent)
  std::int64_t hidden_size = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  std::int64_t intermediate_size = 0, vocab_size = 0, max_position_embeddings = 0;
  std::int64_t num_experts = 0, experts_per_tok = 0, moe_intermediate_size = 0;
  std::int64_t shared_expert_intermediate_size = 0;
  std::int64_t global_head_dim = 0, num_global_kv_heads = 0;  ///< Gemma-4 (flat or per_layer_config)
  bool attention_k_eq_v = false;
  std::int64_t sliding_window = 0, num_kv_shared_layers = 0;
  std::int64_t linear_num_key_heads = 0, linear_num_value_heads = 0;
  std::int64_t linear_key_head_dim = 0, linear_value_head_dim = 0, linear_conv_kernel_dim = 0;
  std::int64_t mtp_num_hidden_layers = 0;
  /** How the MTP layers are stored: the registry row's form; for a family outside the registry, what the
   * config and the tensors show (apply_structure: decoder layers past num_hidden_layers with an MTP count
   * declared are DeepSeek-style extra layers; `mtp.*` is read by name for every family). */
  MtpForm mtp_form = MtpForm::NONE;
  /** Decoder layers as the tensors index them when num_hidden_layers counts sublayers: the config's
   * `num_layers` when it divides num_hidden_layers into two or more (LongCat-Flash: two attention and two MLP
   * sublayers per layer, num_hidden_layers = 2 x num_layers); 0 otherwise (the stack has num_layers). */
  std::int64_t stack_layers = 0;
  /** LongCat-Flash's zero-computation experts (`zero_expert_num`): routed like experts, computed as the
   * identity; indices num_experts .. num_experts + zero_experts - 1. */
  std::int64_t zero_experts = 0;
  /** The number of layer indices the text stack's tensors use. */
  std::int64_t indexed_layers() const noexcept { return stack_layers > 0 ? stack_layers : num_layers; }
  bool attn_output_gate = false;
  bool tie_word_embeddings = false;
  bool has_vision_config = false, has_audio_config = false;
  std::vector<std::string> layer_types;  ///< per decoder layer; synthesized when absent
  // --- additions (model engineer) ---
  bool layer_types_synthesized = false;          ///< layer_types was absent and built from interval/pattern
  /** config.json names recurrent-state keys (mamba_*, ssm_*, state_size, rescale_every, lru_width, ...): the
   * one reading of them, for the derived layer types and plan's refusal wording. */
  bool recurrent_state_keys = false;
  std::int64_t full_attention_interval = 0;      ///< Qwen3.5/Qwen3-Next (0 when absent)
  bool enable_moe_block = false;                 ///< Gemma-4 `enable_moe_block` / `use_second_mlp_block`
  bool has_per_layer_config = false;             ///< Gemma-4 `per_layer_config` present (transformers >=5.15)
  bool has_flat_global_head_dim = false;         ///< flat `global_head_dim` key present (non-null)
  bool has_flat_num_global_kv_heads = false;     ///< flat `num_global_key_value_heads` present (non-null)
  std::int64_t hidden_size_per_layer_input = 0;  ///< Gemma-4 PLE width (0 disables)
  bool use_double_wide_mlp = false;              ///< Gemma-4 KV-shared layers use 2*I
  std::string quant_method;                      ///< quantization_config.quant_method ("" when not quantized)
  /** Effective per-layer attention geometry (size num_layers when known): head dim d_i and kv heads
   * kv_i after Gemma-4 global / per_layer_config overrides (architectures.md §2.1); 0 for layers
   * without attention (linear_attention). */
  std::vector<std::int64_t> layer_head_dim, layer_kv_heads;
  // Multi-head latent attention (DeepSeek-V2/V3; 0 when absent; q_lora_rank 0 = no q_a/q_b split).
  std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  // --- what the tensors show (read_structure / apply_structure; unset when only config.json was read) ---
  bool structure_read = false;
  /** Root of the text stack's decoder layers as stored: "model.", "gpt_neox.", "backbone.",
   * "model.text_model.", "language_model.model."; "" when the layers are top-level or none were found. */
  std::string text_root;
  std::string text_container;             ///< the layer container under text_root: "layers", "h", "blocks"
  std::vector<std::string> tower_roots;   ///< roots of the other layer stacks (towers), e.g. "vit."
  /** The registry row of `family` (the UNKNOWN row for unknown families). */
  const FamilySpec& spec() const noexcept { return family_spec(family); }
};

/** Reads ModelInfo from config.json. BAD_INPUT only for structurally impossible configs (e.g. a
 * text_config that is not an object); missing keys leave fields at 0. */
Result<ModelInfo> read_model_info(const nlohmann::ordered_json& config);

/** The text-config object (`text_config` if present, else the root). */
const nlohmann::ordered_json& text_config(const nlohmann::ordered_json& config);

}  // namespace fp4forge
