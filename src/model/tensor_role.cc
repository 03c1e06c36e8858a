// The role table (tensor_role.h): one row per role.
#include "fp4forge/model/tensor_role.h"

#include <array>

namespace fp4forge {
namespace {

using G = RoleGroup;
constexpr bool Q = true, P = true, L = true, S = true, M = true, _ = false;

// clang-format off
// Order must match enum class Role (static_assert below and model_tensor_vocab_test check it).
//                                                                        quant prot linear stack mla
constexpr std::array<RoleTraits, kRoleCount> kRoles{{
    {Role::ATTN_Q,                "attn_q",                G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_K,                "attn_k",                G::ATTENTION,        Q, _, L, _, _},
    {Role::ATTN_V,                "attn_v",                G::ATTENTION,        Q, _, L, _, _},
    {Role::ATTN_O,                "attn_o",                G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_QKV,              "attn_qkv",              G::ATTENTION,        Q, _, L, _, _},
    {Role::ATTN_Q_A,              "attn_q_a",              G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_Q_B,              "attn_q_b",              G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_KV_A,             "attn_kv_a",             G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_KV_B,             "attn_kv_b",             G::ATTENTION,        Q, _, L, _, M},
    {Role::ATTN_SINK,             "attn_sink",             G::ATTENTION,        _, P, _, _, _},
    {Role::MLP_GATE,              "mlp_gate",              G::DENSE_MLP,        Q, _, L, _, _},
    {Role::MLP_UP,                "mlp_up",                G::DENSE_MLP,        Q, _, L, _, _},
    {Role::MLP_DOWN,              "mlp_down",              G::DENSE_MLP,        Q, _, L, _, _},
    {Role::MLP_GATE_UP,           "mlp_gate_up",           G::DENSE_MLP,        Q, _, L, _, _},
    {Role::EXPERT_GATE,           "expert_gate",           G::EXPERTS,          Q, _, L, _, _},
    {Role::EXPERT_UP,             "expert_up",             G::EXPERTS,          Q, _, L, _, _},
    {Role::EXPERT_DOWN,           "expert_down",           G::EXPERTS,          Q, _, L, _, _},
    {Role::EXPERT_GATE_UP_FUSED,  "expert_gate_up_fused",  G::EXPERTS,          Q, _, L, S, _},
    {Role::EXPERT_DOWN_FUSED,     "expert_down_fused",     G::EXPERTS,          Q, _, L, S, _},
    {Role::EXPERT_PROJ_BIAS,      "expert_proj_bias",      G::EXPERTS,          _, P, _, _, _},
    {Role::SHARED_EXPERT_GATE,    "shared_expert_gate",    G::SHARED_EXPERTS,   Q, _, L, _, _},
    {Role::SHARED_EXPERT_UP,      "shared_expert_up",      G::SHARED_EXPERTS,   Q, _, L, _, _},
    {Role::SHARED_EXPERT_DOWN,    "shared_expert_down",    G::SHARED_EXPERTS,   Q, _, L, _, _},
    {Role::SHARED_EXPERT_GATE_UP, "shared_expert_gate_up", G::SHARED_EXPERTS,   Q, _, L, _, _},
    {Role::ROUTER,                "router",                G::ROUTING,          _, P, L, _, _},
    {Role::ROUTER_AUX,            "router_aux",            G::ROUTING,          _, P, _, _, _},
    {Role::EMBEDDING,             "embedding",             G::EMBEDDING,        _, P, _, _, _},
    {Role::LM_HEAD,               "lm_head",               G::HEAD,             _, P, L, _, _},
    {Role::NORM,                  "norm",                  G::NORM,             _, P, _, _, _},
    {Role::LINEAR_ATTN,           "linear_attn",           G::LINEAR_ATTENTION, _, P, L, _, _},
    {Role::LINEAR_ATTN_CONV,      "linear_attn_conv",      G::LINEAR_ATTENTION, _, P, _, _, _},
    {Role::LINEAR_ATTN_PARAM,     "linear_attn_param",     G::LINEAR_ATTENTION, _, P, _, _, _},
    {Role::MAMBA,                 "mamba",                 G::STATE_SPACE,      _, P, L, _, _},
    {Role::VISION,                "vision",                G::MULTIMODAL,       _, P, _, _, _},
    {Role::AUDIO,                 "audio",                 G::MULTIMODAL,       _, P, _, _, _},
    {Role::PROJECTOR,             "projector",             G::MULTIMODAL,       _, P, _, _, _},
    {Role::MTP,                   "mtp",                   G::MTP,              _, P, _, _, _},
    {Role::PLE,                   "ple",                   G::EMBEDDING,        _, _, L, _, _},
    {Role::SCALAR,                "scalar",                G::OTHER,            _, P, _, _, _},
    {Role::OTHER,                 "other",                 G::OTHER,            _, _, _, _, _},
}};

constexpr std::array<std::string_view, kRoleGroupCount> kGroupNames{
    "attention", "dense_mlp", "experts", "shared_experts", "linear_attention", "state_space",
    "routing",   "embedding", "head",    "norm",           "multimodal",       "mtp", "other"};
// clang-format on

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kRoles.size(); ++i)
    if (static_cast<std::size_t>(kRoles[i].role) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kRoles: one row per Role, in enum order");

}  // namespace

const RoleTraits& role_traits(Role r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  return i < kRoles.size() ? kRoles[i] : kRoles.back();
}

std::span<const RoleTraits> role_table() noexcept { return kRoles; }

std::string_view role_group_name(RoleGroup g) noexcept {
  const auto i = static_cast<std::size_t>(g);
  return i < kGroupNames.size() ? kGroupNames[i] : std::string_view("other");
}

bool role_has_config_geometry(Role r) noexcept {
  const RoleTraits& t = role_traits(r);
  return t.linear && !t.expert_stack &&
         (t.group == RoleGroup::ATTENTION || t.group == RoleGroup::DENSE_MLP || t.group == RoleGroup::EXPERTS ||
          t.group == RoleGroup::SHARED_EXPERTS);
}

}  // namespace fp4forge
