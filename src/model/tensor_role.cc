#include "fp4forge/model/tensor_role.h"

#include <array>

namespace fp4forge {
namespace {
// Order must match enum class Role.
constexpr std::array<std::string_view, kRoleCount> kRoleNames{{
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_o",
    "attn_qkv",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a",
    "attn_kv_b",
    "attn_sink",
    "mlp_gate",
    "mlp_up",
    "mlp_down",
    "mlp_gate_up",
    "expert_gate",
    "expert_up",
    "expert_down",
    "expert_gate_up_fused",
    "expert_down_fused",
    "expert_proj_bias",
    "shared_expert_gate",
    "shared_expert_up",
    "shared_expert_down",
    "shared_expert_gate_up",
    "router",
    "router_aux",
    "embedding",
    "lm_head",
    "norm",
    "linear_attn",
    "linear_attn_conv",
    "linear_attn_param",
    "mamba",
    "vision",
    "audio",
    "projector",
    "mtp",
    "ple",
    "scalar",
    "other",
}};
}  // namespace

std::string_view role_name(Role r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  return i < kRoleNames.size() ? kRoleNames[i] : std::string_view("other");
}

bool role_is_quantizable(Role r) noexcept {
  switch (r) {
    case Role::ATTN_Q:
    case Role::ATTN_K:
    case Role::ATTN_V:
    case Role::ATTN_O:
    case Role::ATTN_QKV:
    case Role::ATTN_Q_A:
    case Role::ATTN_Q_B:
    case Role::ATTN_KV_A:
    case Role::ATTN_KV_B:
    case Role::MLP_GATE:
    case Role::MLP_UP:
    case Role::MLP_DOWN:
    case Role::MLP_GATE_UP:
    case Role::EXPERT_GATE:
    case Role::EXPERT_UP:
    case Role::EXPERT_DOWN:
    case Role::EXPERT_GATE_UP_FUSED:
    case Role::EXPERT_DOWN_FUSED:
    case Role::SHARED_EXPERT_GATE:
    case Role::SHARED_EXPERT_UP:
    case Role::SHARED_EXPERT_DOWN:
    case Role::SHARED_EXPERT_GATE_UP:
      return true;
    default:
      return false;
  }
}

bool role_is_protected(Role r) noexcept {
  switch (r) {
    case Role::ROUTER:
    case Role::ROUTER_AUX:
    case Role::ATTN_SINK:
    case Role::EXPERT_PROJ_BIAS:
    case Role::EMBEDDING:
    case Role::LM_HEAD:
    case Role::NORM:
    case Role::LINEAR_ATTN:
    case Role::LINEAR_ATTN_CONV:
    case Role::LINEAR_ATTN_PARAM:
    case Role::MAMBA:
    case Role::VISION:
    case Role::AUDIO:
    case Role::PROJECTOR:
    case Role::MTP:
    case Role::SCALAR:
      return true;
    default:
      return false;
  }
}

}  // namespace fp4forge
