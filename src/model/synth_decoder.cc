// The decoder-only registry families synth lays out from a config alone (`synth --config`, issue 55: "a header-only
// mode at any config's real geometry"): one rule over the registry row (attention form, which layers are MoE, the
// experts' names, shared experts, DeepSeek-style MTP layers) with every width from the one home of the width
// formulas (shape_rules.h). Each family here is replayed against the real writer's tensors (tests/data/<family>,
// transformers 5.17) by a test; a config feature the rule does not write is refused by name, never approximated.
#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "fp4forge/model/registry.h"
#include "fp4forge/model/shape_rules.h"
#include "fp4forge/util/json_get.h"
#include "synth_geometry.h"

namespace fp4forge::synth_detail {

namespace {

using OJson = nlohmann::ordered_json;
using Shape = std::vector<std::uint64_t>;

/** Where a MoE layer's shared experts are, as transformers names them. */
enum class Shared : std::uint8_t {
  NONE,
  QWEN2,     ///< mlp.shared_expert.{gate,up,down}_proj (shared_expert_intermediate_size) + mlp.shared_expert_gate [1, H]
  DEEPSEEK,  ///< mlp.shared_experts.{gate,up,down}_proj (n_shared_experts x moe_intermediate_size), when n_shared > 0
};

/** What a family's modeling file decides that its registry row does not carry (transformers 5.17). */
struct Layout {
  Family family;
  bool qkv_bias = false;           ///< q/k/v always carry a bias (Qwen2Attention: bias=True)
  bool qk_norm = false;            ///< q_norm / k_norm [head_dim] always (Qwen3Attention)
  bool qk_norm_from_config = false;  ///< ... when the config's use_qk_norm is true (GLM-4.5)
  bool qkv_bias_from_config = false;  ///< attention_bias gives q/k/v a bias and o_proj none (Glm4Attention)
  std::string_view moe_block = "mlp";  ///< the MoE block's attribute ("block_sparse_moe": Mixtral)
  bool score_bias = false;  ///< the router's e_score_correction_bias [E] (DeepSeek-V3 / GLM top-k router)
  bool sandwich_norms = false;  ///< pre_ / post_feedforward_layernorm [H] around the MLP (Gemma3DecoderLayer)
  /** GatedDeltaNet's projections on the linear_attention layers (the family's mixer): Qwen3-Next's fused
   * in_proj_qkvz / in_proj_ba, or Qwen3.5's in_proj_qkv / in_proj_z / in_proj_a / in_proj_b. */
  bool fused_gdn = false;
  Shared shared = Shared::NONE;
};

// clang-format off
constexpr std::array kLayouts{
    Layout{.family = Family::MISTRAL},
    Layout{.family = Family::PHI3},
    Layout{.family = Family::QWEN2, .qkv_bias = true},
    Layout{.family = Family::QWEN3, .qk_norm = true},
    Layout{.family = Family::GEMMA3, .qk_norm = true, .sandwich_norms = true},
    Layout{.family = Family::QWEN3_NEXT, .qk_norm = true, .fused_gdn = true, .shared = Shared::QWEN2},
    Layout{.family = Family::QWEN3_5, .qk_norm = true},
    Layout{.family = Family::MIXTRAL, .moe_block = "block_sparse_moe"},
    Layout{.family = Family::QWEN2_MOE, .qkv_bias = true, .shared = Shared::QWEN2},
    Layout{.family = Family::DEEPSEEK_V2, .shared = Shared::DEEPSEEK},
    Layout{.family = Family::DEEPSEEK_V3, .score_bias = true, .shared = Shared::DEEPSEEK},
    Layout{.family = Family::GLM4_MOE, .qk_norm_from_config = true, .qkv_bias_from_config = true,
           .score_bias = true, .shared = Shared::DEEPSEEK},
};
// clang-format on

const Layout* layout_of(Family f) {
  for (const Layout& l : kLayouts)
    if (l.family == f) return &l;
  return nullptr;
}

Error not_written(const ModelInfo& m, std::string_view key, std::string_view what) {
  return not_laid_out(family_spec(m.family).display, key, what);
}

struct Writer {
  const ModelInfo& m;
  const Layout& lay;
  const OJson& text;
  std::vector<SynthTensor> out;
  std::string group;  ///< "" for the main stack; non-empty for the MTP layers (their own shard file)

  std::uint64_t H() const { return static_cast<std::uint64_t>(m.hidden_size); }
  void add(std::string name, Shape shape) { out.push_back({std::move(name), std::move(shape), group}); }
  /** `module.weight` of a Linear whose [out, in] the shape rules give. */
  void linear(const std::string& module, LinearShape s) {
    add(module + ".weight", {static_cast<std::uint64_t>(s->first), static_cast<std::uint64_t>(s->second)});
  }

  void attention(const std::string& p) {
    const std::string a = p + "self_attn.";
    if (m.spec().mla) {
      if (m.q_lora_rank > 0) {
        linear(a + "q_a_proj", mla_shape(Role::ATTN_Q_A, m));
        add(a + "q_a_layernorm.weight", {static_cast<std::uint64_t>(m.q_lora_rank)});
        linear(a + "q_b_proj", mla_shape(Role::ATTN_Q_B, m));
      } else {
        linear(a + "q_proj", mla_shape(Role::ATTN_Q, m));
      }
      linear(a + "kv_a_proj_with_mqa", mla_shape(Role::ATTN_KV_A, m));
      add(a + "kv_a_layernorm.weight", {static_cast<std::uint64_t>(m.kv_lora_rank)});
      linear(a + "kv_b_proj", mla_shape(Role::ATTN_KV_B, m));
      linear(a + "o_proj", mla_shape(Role::ATTN_O, m));
      return;
    }
    const std::int64_t q_mult = gated_q_multiplier(m);  // an output-gated q is twice as wide
    auto shape = [&](Role r) {
      return attention_shape(r, m.hidden_size, m.num_heads, m.head_dim, m.num_kv_heads, q_mult);
    };
    if (m.family == Family::PHI3) {
      linear(a + "qkv_proj", shape(Role::ATTN_QKV));
    } else {
      const bool bias = lay.qkv_bias || (lay.qkv_bias_from_config && bool_of(text, "attention_bias"));
      for (auto [leaf, role] : {std::pair{"q_proj", Role::ATTN_Q}, {"k_proj", Role::ATTN_K}, {"v_proj", Role::ATTN_V}}) {
        const LinearShape s = shape(role);
        linear(a + leaf, s);
        if (bias) add(a + leaf + ".bias", {static_cast<std::uint64_t>(s->first)});
      }
    }
    linear(a + "o_proj", shape(Role::ATTN_O));
    if (lay.qk_norm || (lay.qk_norm_from_config && bool_of(text, "use_qk_norm"))) {
      add(a + "q_norm.weight", {static_cast<std::uint64_t>(m.head_dim)});
      add(a + "k_norm.weight", {static_cast<std::uint64_t>(m.head_dim)});
    }
  }

  /** A linear_attention layer's GatedDeltaNet (shape_rules.h linear_attention_shape gives every width). */
  void linear_attention(const std::string& p) {
    const std::string la = p + "linear_attn.";
    auto put = [&](std::string_view leaf, std::string_view suffix) {
      const auto s = linear_attention_shape(leaf, m);
      add(la + std::string(leaf) + std::string(suffix), Shape(s.begin(), s.end()));
    };
    if (lay.fused_gdn) {
      put("in_proj_qkvz", ".weight");
      put("in_proj_ba", ".weight");
    } else {
      for (std::string_view leaf : {"in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b"}) put(leaf, ".weight");
    }
    put("conv1d", ".weight");
    put("A_log", "");
    put("dt_bias", "");
    put("norm", ".weight");
    put("out_proj", ".weight");
  }

  bool linear_layer(std::int64_t i) const {
    return m.spec().mixer == Mixer::GATED_DELTANET && i < static_cast<std::int64_t>(m.layer_types.size()) &&
           m.layer_types[static_cast<std::size_t>(i)] == "linear_attention";
  }

  void gated_mlp(const std::string& p, std::int64_t width, std::array<std::string_view, 3> leaves) {
    linear(p + std::string(leaves[0]), mlp_shape(Role::MLP_GATE, m.hidden_size, width));
    linear(p + std::string(leaves[1]), mlp_shape(Role::MLP_UP, m.hidden_size, width));
    linear(p + std::string(leaves[2]), mlp_shape(Role::MLP_DOWN, m.hidden_size, width));
  }

  void mlp(const std::string& p, std::int64_t layer) {
    if (!layer_is_moe(m.spec(), text, layer, m.num_layers)) {
      if (m.family == Family::PHI3) {
        linear(p + "mlp.gate_up_proj", mlp_shape(Role::MLP_GATE_UP, m.hidden_size, m.intermediate_size));
        linear(p + "mlp.down_proj", mlp_shape(Role::MLP_DOWN, m.hidden_size, m.intermediate_size));
      } else {
        gated_mlp(p + "mlp.", m.intermediate_size, {"gate_proj", "up_proj", "down_proj"});
      }
      return;
    }
    const std::string b = p + std::string(lay.moe_block) + ".";
    const auto E = static_cast<std::uint64_t>(m.num_experts);
    add(b + "gate.weight", {E, H()});
    if (lay.score_bias) add(b + "gate.e_score_correction_bias", {E});
    for (std::uint64_t e = 0; e < E; ++e)
      gated_mlp(fmt::format("{}experts.{}.", b, e), m.moe_intermediate_size, m.spec().expert_leaves);
    if (lay.shared == Shared::QWEN2) {
      gated_mlp(b + "shared_expert.", m.shared_expert_intermediate_size, {"gate_proj", "up_proj", "down_proj"});
      add(b + "shared_expert_gate.weight", {1, H()});
    } else if (lay.shared == Shared::DEEPSEEK && m.shared_expert_intermediate_size > 0) {
      gated_mlp(b + "shared_experts.", m.shared_expert_intermediate_size, {"gate_proj", "up_proj", "down_proj"});
    }
  }

  void decoder_layer(std::int64_t i) { decoder_layer(fmt::format("model.layers.{}.", i), i); }
  /** A decoder layer under `p`; `i` decides its mixer and MLP (an MTP layer: a full-attention layer past the
   * stack's). */
  void decoder_layer(const std::string& p, std::int64_t i) {
    if (linear_layer(i))
      linear_attention(p);
    else
      attention(p);
    mlp(p, i);
    add(p + "input_layernorm.weight", {H()});
    add(p + "post_attention_layernorm.weight", {H()});
    if (lay.sandwich_norms) {
      add(p + "pre_feedforward_layernorm.weight", {H()});
      add(p + "post_feedforward_layernorm.weight", {H()});
    }
  }

  /** A DeepSeek-style MTP layer `i` (>= num_hidden_layers): a decoder layer plus the embedding, the two norms, the
   * projection of [embedding; hidden] and its own head (the layout of DeepSeek-V3's and GLM-4.5's releases). */
  void mtp_layer(std::int64_t i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    const auto V = static_cast<std::uint64_t>(m.vocab_size);
    decoder_layer(i);
    add(p + "embed_tokens.weight", {V, H()});
    add(p + "enorm.weight", {H()});
    add(p + "hnorm.weight", {H()});
    add(p + "eh_proj.weight", {H(), 2 * H()});
    add(p + "shared_head.norm.weight", {H()});
    add(p + "shared_head.head.weight", {V, H()});
  }
};

/** The family's text-only class: its first architecture that is not the multimodal wrapper. */
std::string_view text_class_of(const FamilySpec& s) {
  for (const auto& a : s.architectures)
    if (a != s.wrapper_architecture) return a;
  return {};
}

/** Qwen3-Next's and Qwen3.5's MTP module (MtpForm::MTP_MODULE): mtp.fc [H, 2H] over [embedding; hidden], its
 * full-attention layers mtp.layers.k (MoE where the family's layers are), the two pre-fc norms and its final norm. */
void mtp_module(Writer& w) {
  const ModelInfo& m = w.m;
  w.add("mtp.fc.weight", {w.H(), 2 * w.H()});
  for (std::int64_t k = 0; k < m.mtp_num_hidden_layers; ++k)
    w.decoder_layer(fmt::format("mtp.layers.{}.", k), m.num_layers + k);
  w.add("mtp.norm.weight", {w.H()});
  w.add("mtp.pre_fc_norm_embedding.weight", {w.H()});
  w.add("mtp.pre_fc_norm_hidden.weight", {w.H()});
}

/** The config features the rule does not write, named (a refusal, never an approximation). */
Status check_writable(const ModelInfo& m, const Layout& lay, const OJson& text) {
  if (m.wrapper || m.has_vision_config || m.has_audio_config)
    return not_written(m, m.has_audio_config ? "audio_config" : "vision_config",
                       "is set (a multimodal release: its towers are not laid out)");
  if (bool_of(text, "attention_bias") && !lay.qkv_bias_from_config)
    return not_written(m, "attention_bias", "is true");
  if (bool_of(text, "mlp_bias")) return not_written(m, "mlp_bias", "is true");
  // DeepSeek-V3.2's sparse-attention indexer (self_attn.indexer.*): tensors this rule does not write.
  for (std::string_view k : {"index_topk", "index_n_heads", "index_head_dim"})
    if (text.contains(k)) return not_written(m, k, "is set (the DeepSeek-V3.2 indexer)");
  // Another class of the family (DeepseekV32ForCausalLM, a sequence-classification head) has other tensors: the
  // family's text class is its first one that is not the multimodal wrapper (Gemma-3: Gemma3ForCausalLM).
  const std::string_view text_class = text_class_of(m.spec());
  if (!m.architecture.empty() && m.architecture != text_class)
    return not_written(m, "architectures", fmt::format("is {}, not {}", m.architecture, text_class));
  if (m.zero_experts > 0) return not_written(m, "zero_expert_num", "is set (zero-computation experts)");
  if (m.stack_layers > 0) return not_written(m, "num_layers", "counts sublayers");
  if (m.mtp_num_hidden_layers > 0 && m.spec().mtp == MtpForm::NONE)
    return not_written(m, "mtp_num_hidden_layers", "is set");
  return {};
}

Status require_positive(const ModelInfo& m, std::initializer_list<std::pair<std::string_view, std::int64_t>> fields) {
  return synth_detail::require_positive(family_spec(m.family).display, fields);
}

Status check_widths(const ModelInfo& m, const Layout& lay, const OJson& text) {
  FP4FORGE_TRY(require_positive(m, {{"hidden_size", m.hidden_size}, {"num_hidden_layers", m.num_layers},
                                    {"num_attention_heads", m.num_heads}, {"vocab_size", m.vocab_size}}));
  if (m.spec().mla) {
    FP4FORGE_TRY(require_positive(m, {{"kv_lora_rank", m.kv_lora_rank}, {"qk_nope_head_dim", m.qk_nope_head_dim},
                                      {"qk_rope_head_dim", m.qk_rope_head_dim}, {"v_head_dim", m.v_head_dim}}));
  } else {
    FP4FORGE_TRY(require_positive(m, {{"num_key_value_heads", m.num_kv_heads}, {"head_dim", m.head_dim}}));
  }
  if (m.spec().mixer == Mixer::GATED_DELTANET) {
    FP4FORGE_TRY(require_positive(m, {{"linear_num_key_heads", m.linear_num_key_heads},
                                      {"linear_num_value_heads", m.linear_num_value_heads},
                                      {"linear_key_head_dim", m.linear_key_head_dim},
                                      {"linear_value_head_dim", m.linear_value_head_dim},
                                      {"linear_conv_kernel_dim", m.linear_conv_kernel_dim}}));
    if (static_cast<std::int64_t>(m.layer_types.size()) != m.num_layers)
      return not_written(m, "layer_types", fmt::format("has {} entries for {} layers", m.layer_types.size(),
                                                        m.num_layers));
  }
  bool any_dense = false, any_moe = false;
  for (std::int64_t i = 0; i < m.num_layers + m.mtp_num_hidden_layers; ++i)
    (layer_is_moe(m.spec(), text, i, m.num_layers) ? any_moe : any_dense) = true;
  // The key a width is named by in messages: the family's first, else the usual one.
  auto key = [](const std::vector<std::string_view>& keys, std::string_view dflt) {
    return keys.empty() ? dflt : keys.front();
  };
  const FamilySpec& spec = m.spec();
  if (any_dense)
    FP4FORGE_TRY(require_positive(m, {{key(spec.dense_intermediate_keys, "intermediate_size"), m.intermediate_size}}));
  if (any_moe) {
    FP4FORGE_TRY(require_positive(m, {{key(spec.num_experts_keys, "num_experts"), m.num_experts},
                                      {key(spec.expert_intermediate_keys, "moe_intermediate_size"),
                                       m.moe_intermediate_size}}));
    if (lay.shared == Shared::QWEN2)
      FP4FORGE_TRY(require_positive(m, {{"shared_expert_intermediate_size", m.shared_expert_intermediate_size}}));
  }
  return {};
}

}  // namespace

bool registry_layout_family(Family f) noexcept { return layout_of(f) != nullptr; }

std::span<const Family> registry_layout_families() noexcept {
  static const auto fams = [] {
    std::array<Family, kLayouts.size()> a{};
    for (std::size_t i = 0; i < kLayouts.size(); ++i) a[i] = kLayouts[i].family;
    return a;
  }();
  return fams;
}

Result<std::vector<SynthTensor>> registry_layout(const ModelInfo& m, const nlohmann::ordered_json& config) {
  const Layout* lay = layout_of(m.family);
  if (lay == nullptr)
    return make_error(Errc::INTERNAL, "synth: no registry layout for family '{}'", family_name(m.family));
  const OJson& text = text_config(config);
  FP4FORGE_TRY(check_writable(m, *lay, text));
  FP4FORGE_TRY(check_widths(m, *lay, text));
  Writer w{m, *lay, text, {}, {}};
  w.add("model.embed_tokens.weight", {static_cast<std::uint64_t>(m.vocab_size), w.H()});
  for (std::int64_t i = 0; i < m.num_layers; ++i) w.decoder_layer(i);
  w.add("model.norm.weight", {w.H()});
  if (!m.tie_word_embeddings) w.add("lm_head.weight", {static_cast<std::uint64_t>(m.vocab_size), w.H()});
  w.group = "mtp";
  if (m.spec().mtp == MtpForm::MTP_MODULE) {
    if (m.mtp_num_hidden_layers > 0) mtp_module(w);
  } else {
    for (std::int64_t i = m.num_layers; i < m.num_layers + m.mtp_num_hidden_layers; ++i) w.mtp_layer(i);
  }
  return std::move(w.out);
}

}  // namespace fp4forge::synth_detail
