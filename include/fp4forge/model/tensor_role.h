#pragma once
/** The role of a tensor in a checkpoint, as classify() decides it. */
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

/** Stable snake_case id used in --json ("attn_q", "expert_gate_up_fused", "router", ...). */
std::string_view role_name(Role r) noexcept;

/** True for the roles fp4forge quantizes by default (attention, dense MLP, experts, shared experts). */
bool role_is_quantizable(Role r) noexcept;

/** True for roles that must never be quantized (router, embedding, lm_head, norm, towers, MTP, ...). */
bool role_is_protected(Role r) noexcept;

}  // namespace fp4forge
