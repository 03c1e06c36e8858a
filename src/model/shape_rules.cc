// The shape rules' context (model/shape_rules.h): ModelInfo, the structure and the prefixes the tensors use.
#include "fp4forge/model/shape_rules.h"

#include "fp4forge/model/structure.h"
#include "fp4forge/util/json_get.h"

namespace fp4forge {

bool ShapeContext::any_with_prefix(std::string_view prefix) const {
  auto it = tensors.lower_bound(prefix);
  return it != tensors.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix;
}

std::optional<std::pair<std::int64_t, std::int64_t>> ShapeContext::linear_shape(const std::string& module) const {
  if (const auto* t = tensor(module + ".weight"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), static_cast<std::int64_t>(t->shape[1]));
  if (const auto* t = tensor(module + ".weight_packed"); t != nullptr && t->shape.size() == 2)
    return std::make_pair(static_cast<std::int64_t>(t->shape[0]), std::int64_t{-1});
  return std::nullopt;
}

std::optional<std::int64_t> ShapeContext::text_int(std::string_view key) const { return integral_of(text(), key); }

std::vector<std::string> ShapeContext::text_path(std::string_view key) const {
  if (info.wrapper) return {"text_config", std::string(key)};
  return {std::string(key)};
}

std::map<std::string, TensorMeta, std::less<>> tensor_metas(const Checkpoint& ck) {
  std::map<std::string, TensorMeta, std::less<>> out;
  for (const TensorRef& t : ck.tensors())
    out.emplace(t.name, TensorMeta{std::string(dtype_name(t.info->dtype)), t.info->shape});
  return out;
}

Status init_shape_context(ShapeContext& ctx) {
  auto info = read_model_info(ctx.config);
  if (!info.ok()) return with_file(info.error(), (ctx.dir / "config.json").string());
  ctx.info = std::move(*info);
  {
    std::vector<NamedShape> named;
    named.reserve(ctx.tensors.size());
    for (const auto& [name, meta] : ctx.tensors) named.push_back({name, meta.shape});
    read_structure_into(ctx.info, named);
  }
  // The first of the family's text prefixes (the registry) that the tensors use, else the text stack the
  // tensors show (read_structure), whatever its root and container.
  ctx.text_prefix = ctx.info.text_prefix;
  ctx.layer_prefix.clear();
  for (auto p : ctx.info.spec().text_prefixes)
    if (ctx.any_with_prefix(std::string(p) + "layers.")) {
      ctx.text_prefix = std::string(p);
      ctx.layer_prefix = ctx.text_prefix + "layers.";
      break;
    }
  if (ctx.layer_prefix.empty() && !ctx.info.text_container.empty()) {
    ctx.text_prefix = ctx.info.text_root;
    ctx.layer_prefix = ctx.info.text_root + ctx.info.text_container + ".";
  }
  return {};
}

namespace {
LinearShape pair(std::int64_t r, std::int64_t c) {
  if (r <= 0 || c <= 0) return std::nullopt;
  return std::make_pair(r, c);
}
}  // namespace

LinearShape attention_shape(Role r, std::int64_t hidden, std::int64_t heads, std::int64_t head_dim,
                            std::int64_t kv_heads, std::int64_t q_mult) {
  const std::int64_t H = hidden, A = heads, d = head_dim, kv = kv_heads;
  if (d <= 0) return std::nullopt;
  switch (r) {
    case Role::ATTN_Q: return A > 0 ? pair(A * d * q_mult, H) : std::nullopt;
    case Role::ATTN_QKV: return A > 0 && kv > 0 ? pair((A + 2 * kv) * d, H) : std::nullopt;
    case Role::ATTN_K:
    case Role::ATTN_V: return kv > 0 ? pair(kv * d, H) : std::nullopt;
    case Role::ATTN_O: return A > 0 ? pair(H, A * d) : std::nullopt;
    default: return std::nullopt;
  }
}

LinearShape mla_shape(Role r, const ModelInfo& m) {
  const std::int64_t H = m.hidden_size, A = m.num_heads;
  const std::int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim, vd = m.v_head_dim;
  switch (r) {
    case Role::ATTN_Q: return A > 0 && qk > 0 ? pair(A * qk, H) : std::nullopt;
    case Role::ATTN_Q_A: return pair(m.q_lora_rank, H);
    case Role::ATTN_Q_B: return A > 0 && qk > 0 ? pair(A * qk, m.q_lora_rank) : std::nullopt;
    case Role::ATTN_KV_A: return pair(m.kv_lora_rank + m.qk_rope_head_dim, H);
    case Role::ATTN_KV_B:
      return A > 0 && m.qk_nope_head_dim > 0 && vd > 0 ? pair(A * (m.qk_nope_head_dim + vd), m.kv_lora_rank)
                                                      : std::nullopt;
    case Role::ATTN_O: return A > 0 && vd > 0 ? pair(H, A * vd) : std::nullopt;
    default: return std::nullopt;
  }
}

std::vector<std::int64_t> linear_attention_shape(std::string_view leaf, const ModelInfo& m) {
  const std::int64_t H = m.hidden_size, Hk = m.linear_num_key_heads, Hv = m.linear_num_value_heads;
  const std::int64_t Dk = m.linear_key_head_dim, Dv = m.linear_value_head_dim;
  if (H <= 0 || Hk <= 0 || Hv <= 0 || Dk <= 0 || Dv <= 0) return {};
  const std::int64_t conv = 2 * Hk * Dk + Hv * Dv;
  if (leaf == "in_proj_qkvz") return {2 * Hk * Dk + 2 * Hv * Dv, H};
  if (leaf == "in_proj_ba") return {2 * Hv, H};
  if (leaf == "in_proj_qkv") return {conv, H};
  if (leaf == "in_proj_z") return {Hv * Dv, H};
  if (leaf == "in_proj_a" || leaf == "in_proj_b") return {Hv, H};
  if (leaf == "out_proj") return {H, Hv * Dv};
  if (leaf == "conv1d") return {conv, 1, m.linear_conv_kernel_dim > 0 ? m.linear_conv_kernel_dim : -1};
  if (leaf == "A_log" || leaf == "dt_bias") return {Hv};
  if (leaf == "norm") return {Dv};
  return {};
}

std::int64_t gated_q_multiplier(const ModelInfo& m) {
  return m.spec().mixer == Mixer::GATED_DELTANET && m.attn_output_gate ? 2 : 1;
}

LinearShape mlp_shape(Role r, std::int64_t hidden, std::int64_t width) {
  switch (r) {
    case Role::MLP_GATE_UP:
    case Role::SHARED_EXPERT_GATE_UP: return pair(2 * width, hidden);
    case Role::MLP_GATE:
    case Role::MLP_UP:
    case Role::EXPERT_GATE:
    case Role::EXPERT_UP:
    case Role::SHARED_EXPERT_GATE:
    case Role::SHARED_EXPERT_UP: return pair(width, hidden);
    case Role::MLP_DOWN:
    case Role::EXPERT_DOWN:
    case Role::SHARED_EXPERT_DOWN: return pair(hidden, width);
    default: return std::nullopt;
  }
}

LinearShape expected_linear_shape(const ModelInfo& info, const nlohmann::ordered_json& text, Role base,
                                  const TensorClass& c) {
  const std::int64_t H = info.hidden_size, A = info.num_heads;
  if (H <= 0) return std::nullopt;
  const bool full = c.layer_type == "full_attention";
  std::int64_t d = info.head_dim > 0 ? info.head_dim : (A > 0 ? H / A : 0);
  std::int64_t kv = info.num_kv_heads > 0 ? info.num_kv_heads : A;
  std::int64_t I = info.intermediate_size;
  const auto layer = static_cast<std::size_t>(c.layer);
  const bool in_stack = c.text_stack && c.layer >= 0 && layer < info.layer_head_dim.size();
  if (in_stack && info.layer_head_dim[layer] > 0) {
    // Effective per-layer geometry (Gemma-4 globals / per_layer_config already applied by ModelInfo).
    d = info.layer_head_dim[layer];
    if (layer < info.layer_kv_heads.size() && info.layer_kv_heads[layer] > 0) kv = info.layer_kv_heads[layer];
  } else if (info.family == Family::GEMMA4) {
    if (full && info.global_head_dim > 0) d = info.global_head_dim;
    if (full && info.attention_k_eq_v && info.num_global_kv_heads > 0) kv = info.num_global_kv_heads;
  }
  if (info.family == Family::GEMMA4) {
    const std::int64_t shared = info.num_kv_shared_layers;
    if (shared > 0 && c.layer >= 0 && c.text_stack && c.layer >= info.num_layers - shared &&
        (info.use_double_wide_mlp || bool_of(text, "use_double_wide_mlp")))
      I *= 2;
  }
  if ((info.spec().mla || info.kv_lora_rank > 0) && role_traits(base).mla) return mla_shape(base, info);
  if (auto s = attention_shape(base, H, A, d, kv, info.attn_output_gate ? 2 : 1)) return s;
  switch (base) {
    case Role::EXPERT_GATE:
    case Role::EXPERT_UP:
    case Role::EXPERT_DOWN: return mlp_shape(base, H, info.moe_intermediate_size);
    case Role::SHARED_EXPERT_GATE_UP:
    case Role::SHARED_EXPERT_GATE:
    case Role::SHARED_EXPERT_UP:
    case Role::SHARED_EXPERT_DOWN: return mlp_shape(base, H, info.shared_expert_intermediate_size);
    default: return mlp_shape(base, H, I);
  }
}

}  // namespace fp4forge
