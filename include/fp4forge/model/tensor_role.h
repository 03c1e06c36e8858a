#pragma once
/** The role of a tensor in a checkpoint, as classify() decides it. */
#include <cstdint>
#include <span>
#include <string_view>

namespace fp4forge {

enum class Role {
  ATTN_Q, ATTN_K, ATTN_V, ATTN_O,          // text-stack attention projections
  ATTN_QKV,                                // pre-fused q/k/v (qkv_proj [(A+2kv)·d, H], Phi-3)
  ATTN_Q_A, ATTN_Q_B, ATTN_KV_A, ATTN_KV_B,  // multi-head latent attention (DeepSeek q_a/q_b/kv_a/kv_b)
  ATTN_SINK,                               // per-head attention sinks (gpt-oss sinks, attn_sink, attention_sink_bias)
  MLP_GATE, MLP_UP, MLP_DOWN,              // dense MLP (also w1/w3/w2 naming)
  MLP_GATE_UP,                             // pre-fused dense gate/up ([2I, H], Phi-3 gate_up_proj)
  EXPERT_GATE, EXPERT_UP, EXPERT_DOWN,     // routed expert, per-expert 2-D
  EXPERT_GATE_UP_FUSED, EXPERT_DOWN_FUSED, // routed experts, fused 3-D [E, ., .]
  EXPERT_PROJ_BIAS,                        // fused experts' projection biases [E, N] (gpt-oss gate_up_proj_bias)
  SHARED_EXPERT_GATE, SHARED_EXPERT_UP, SHARED_EXPERT_DOWN,
  SHARED_EXPERT_GATE_UP,  // pre-fused shared-expert gate/up (Granite shared_mlp.input_linear [2Is, H])
  ROUTER,            // router.proj, mlp.gate, shared_expert_gate (never quantized)
  ROUTER_AUX,        // router.scale, per_expert_scale, e_score_correction_bias, expert_bias, router_bias
  EMBEDDING,         // embed_tokens, embed_tokens_per_layer
  LM_HEAD,
  NORM,              // any norm weight/bias
  LINEAR_ATTN,       // GatedDeltaNet in_proj_*, out_proj
  LINEAR_ATTN_CONV,  // linear_attn.conv1d
  LINEAR_ATTN_PARAM, // A_log, dt_bias (GatedDeltaNet and Mamba)
  MAMBA,             // Mamba-2 mixer in_proj / out_proj (Granite-4 hybrid)
  VISION,            // vision tower (model.vision_tower.*, model.visual.* except merger)
  AUDIO,             // audio tower
  PROJECTOR,         // embed_vision, embed_audio, visual.merger, multi_modal_projector
  MTP,               // multi-token prediction: mtp.* (Qwen) or layers >= N (DeepSeek / GLM)
  PLE,               // Gemma-4 per-layer-embedding projections/gates (per_layer_*)
  SCALAR,            // layer_scalar and other 0-d / [1] parameters
  OTHER,
};
inline constexpr int kRoleCount = static_cast<int>(Role::OTHER) + 1;

/** What a role belongs to: the unit the recipe selectors, the plan summary and verify's geometry speak of. */
enum class RoleGroup : std::uint8_t {
  ATTENTION,         // q/k/v/o, fused qkv, multi-head latent attention, attention sinks
  DENSE_MLP,         // gate/up/down of a dense MLP
  EXPERTS,           // routed experts: per-expert, fused 3-D stacks, their projection biases
  SHARED_EXPERTS,    // shared experts beside the routed ones
  LINEAR_ATTENTION,  // GatedDeltaNet projections, its conv1d and state parameters (also Mamba's A_log / dt_bias)
  STATE_SPACE,       // Mamba mixer projections
  ROUTING,           // routers and what is added to their scores
  EMBEDDING,         // token / position / per-layer embeddings and their projections
  HEAD,              // lm_head
  NORM,
  MULTIMODAL,        // vision and audio towers, projectors
  MTP,               // multi-token prediction layers
  OTHER,             // scalars and unknown tensors
};
inline constexpr int kRoleGroupCount = static_cast<int>(RoleGroup::OTHER) + 1;

/**
 * One row per role (issue 54, modelled on llama.cpp's LLM_TENSOR_INFOS): everything fp4forge decides from
 * a role alone. A new role is one enumerator above plus one row in tensor_role.cc; a test checks that every
 * role has its row.
 */
struct RoleTraits {
  Role role;
  std::string_view name;  ///< stable snake_case id used in --json ("attn_q", "expert_gate_up_fused", ...)
  RoleGroup group;
  bool quantizable;       ///< quantized by default (attention, dense MLP, experts, shared experts)
  bool is_protected;      ///< never quantized without --force-quantize by exact name (router, embedding, ...)
  bool linear;            ///< the weight of a Linear (a matmul): [out, in], or a 3-D stack of them over the experts
  bool expert_stack;      ///< fused over the routed experts: one 3-D tensor [E, ., .] holds every expert's Linear
  bool mla;               ///< a projection of multi-head latent attention (its shape follows the LoRA ranks)
};

/** The row of `r` (the OTHER row for a value outside the enum). */
const RoleTraits& role_traits(Role r) noexcept;
/** Every row, in enum order. */
std::span<const RoleTraits> role_table() noexcept;

/** Stable snake_case id used in --json ("attn_q", "expert_gate_up_fused", "router", ...). */
inline std::string_view role_name(Role r) noexcept { return role_traits(r).name; }
/** The group's snake_case id ("attention", "dense_mlp", "experts", ...): the recipe selector names. */
std::string_view role_group_name(RoleGroup g) noexcept;

/** True for the roles fp4forge quantizes by default (attention, dense MLP, experts, shared experts). */
inline bool role_is_quantizable(Role r) noexcept { return role_traits(r).quantizable; }

/** True for roles that must never be quantized (router, embedding, lm_head, norm, towers, MTP, ...). */
inline bool role_is_protected(Role r) noexcept { return role_traits(r).is_protected; }

/** A Linear of `g` (the roles a recipe selector of that group picks, and the plan summary counts). */
inline bool role_is_linear_of(Role r, RoleGroup g) noexcept {
  const RoleTraits& t = role_traits(r);
  return t.group == g && t.linear;
}

/** A per-module 2-D Linear of attention, dense MLP, routed or shared experts: the shapes config.json states
 * (fused 3-D expert stacks excluded). */
bool role_has_config_geometry(Role r) noexcept;

}  // namespace fp4forge
