// Tensor classification by name components (no regex), plus structural router recognition, and the
// fused global-scale sets of rule R1 (nvfp4a16-format.md §5).
#include "fp4forge/model/classify.h"
#include "fp4forge/model/tensor_param.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/model/tensor_names.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace fp4forge {
namespace {

constexpr std::size_t kMaxParts = 32;

/** A tensor name split at '.', without allocation. */
struct Parts {
  std::array<std::string_view, kMaxParts> p{};
  std::size_t n = 0;
  bool overflow = false;
  std::string_view operator[](std::size_t i) const { return i < n ? p[i] : std::string_view(); }
};

Parts split(std::string_view name) {
  Parts r;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t dot = name.find('.', start);
    const std::size_t end = dot == std::string_view::npos ? name.size() : dot;
    if (r.n == kMaxParts) {
      // Too deep: fold the tail into the last component (classification still sees the leaf).
      r.overflow = true;
      r.p[kMaxParts - 1] = name.substr(r.p[kMaxParts - 1].data() - name.data());
      break;
    }
    r.p[r.n++] = name.substr(start, end - start);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return r;
}

using names::kAudioTowers;
using names::kEmbeddings;
using names::kFinalNorms;
using names::kLayerContainers;
using names::kLmHeads;
using names::kMlpContexts;
using names::kVisualMergers;
using names::one_of;
using names::parse_index;

bool contains(std::string_view s, std::string_view sub) { return s.find(sub) != std::string_view::npos; }
using util::ends_with;
using util::starts_with;

}  // namespace

namespace {

/** Classification of the part of a name below the layer (or the whole text-relative name). */
struct Body {
  Role role = Role::OTHER;
  int expert = -1;
};

bool has_component(const Parts& b, std::size_t from, std::size_t to, std::string_view what) {
  for (std::size_t i = from; i < to; ++i)
    if (b[i] == what) return true;
  return false;
}

template <std::size_t N>
bool has_any_component(const Parts& b, std::size_t from, std::size_t to,
                       const std::array<std::string_view, N>& set) {
  for (std::size_t i = from; i < to; ++i)
    if (one_of(b[i], set)) return true;
  return false;
}

bool is_norm_name(std::string_view s) {
  return contains(s, "norm") || starts_with(s, "ln_") || s == "ln" || contains(s, "layernorm");
}

/**
 * Classifies b[from..b.n): `last` is the module (or parameter) that decides the role, ctx is
 * b[from..li) where li is the index of `last`.
 */
Body classify_body(const Parts& b, std::size_t from, std::span<const std::uint64_t> shape,
                   const ModelInfo& info) {
  Body r;
  if (b.n <= from) return r;
  const std::string_view leaf = b[b.n - 1];
  std::size_t li = b.n - 1;  // index of the deciding component
  if (const LeafTraits* lt = leaf_traits(leaf); lt && lt->module_param && b.n - 1 > from) li = b.n - 2;
  // Gemma-4 vision-style wrapped linears (`q_proj.linear.weight`) in a text-like stack.
  if (b[li] == "linear" && li > from) --li;
  const std::string_view last = b[li];
  if (last.empty()) return r;  // malformed name ("a..weight", "....")
  // Routing biases, stored beside the router or the experts (DeepSeek-V3 / GLM / dots1 gate.e_score_correction_bias,
  // AFMoE and Hunyuan expert_bias, Step moe.router_bias): added to the router's scores, never quantized.
  if (last == "e_score_correction_bias" || last == "expert_bias" || last == "router_bias") return {Role::ROUTER_AUX, -1};

  // Routed experts.
  for (std::size_t j = from; j < li; ++j) {
    if (b[j] != "experts") continue;
    const int e = (j + 1 < li) ? parse_index(b[j + 1]) : -1;
    if (e >= 0) {
      r.expert = e;
      if (last == "gate_proj" || last == "w1")
        r.role = Role::EXPERT_GATE;
      else if (last == "up_proj" || last == "w3")
        r.role = Role::EXPERT_UP;
      else if (last == "down_proj" || last == "w2")
        r.role = Role::EXPERT_DOWN;
      else if (last == "gate_up_proj")
        r.role = Role::EXPERT_GATE_UP_FUSED;
      else
        r.role = Role::OTHER;
      return r;
    }
    if (j + 1 == li) {  // experts.<proj> : fused 3-D over all experts
      // experts.<proj>_bias : a fused projection's biases, one row per expert (gpt-oss gate_up_proj_bias [E, 2I],
      // down_proj_bias [E, H]).
      if (last != "proj_bias" && ends_with(last, "proj_bias")) return {Role::EXPERT_PROJ_BIAS, -1};
      if (last == "gate_up_proj" || last == "w13" || last == "w13_weight")
        r.role = Role::EXPERT_GATE_UP_FUSED;
      else if (last == "down_proj" || last == "w2" || last == "w2_weight")
        r.role = Role::EXPERT_DOWN_FUSED;
      else if (last == "gate_proj" || last == "w1")
        r.role = Role::EXPERT_GATE;
      else if (last == "up_proj" || last == "w3")
        r.role = Role::EXPERT_UP;
      return r;
    }
  }
  // Granite MoE: block_sparse_moe.{input_linear,output_linear}.weight, fused 3-D [E, 2I, H] / [E, H, I].
  if (li > from && b[li - 1] == "block_sparse_moe" && shape.size() == 3) {
    if (last == "input_linear") return {Role::EXPERT_GATE_UP_FUSED, -1};
    if (last == "output_linear") return {Role::EXPERT_DOWN_FUSED, -1};
  }
  // Pre-release Gemma-4 naming: layers.{i}.moe.{gate_up_proj,down_proj,per_expert_scale}.
  if (li > from && b[li - 1] == "moe") {
    if (last == "gate_up_proj") return {Role::EXPERT_GATE_UP_FUSED, -1};
    if (last == "down_proj" && shape.size() == 3) return {Role::EXPERT_DOWN_FUSED, -1};
    // Step-3.x: moe.{gate,up,down}_proj.weight, each a 3-D stack over the experts.
    if (last == "gate_proj" && shape.size() == 3) return {Role::EXPERT_GATE, -1};
    if (last == "up_proj" && shape.size() == 3) return {Role::EXPERT_UP, -1};
  }
  if (last == "per_expert_scale") return {Role::ROUTER_AUX, -1};
  // Shared experts.
  if (has_any_component(b, from, li, names::kSharedExpertContexts)) {
    if (last == "gate_proj" || last == "w1") return {Role::SHARED_EXPERT_GATE, -1};
    if (last == "up_proj" || last == "w3") return {Role::SHARED_EXPERT_UP, -1};
    if (last == "down_proj" || last == "w2" || last == "output_linear") return {Role::SHARED_EXPERT_DOWN, -1};
    if (last == "gate_up_proj" || last == "input_linear") return {Role::SHARED_EXPERT_GATE_UP, -1};
  }
  if (last == "shared_expert_gate") return {Role::ROUTER, -1};
  // Routers.
  if (li > from && b[li - 1] == "router") {
    if (last == "scale") return {Role::ROUTER_AUX, -1};
    return {Role::ROUTER, -1};  // router.proj
  }
  if (last == "router") return {Role::ROUTER, -1};
  if (last == "wg" && li > from && b[li - 1] == "gate") return {Role::ROUTER, -1};  // Hunyuan MoE mlp.gate.wg
  if (last == "gate") {
    const bool mlp_ctx = has_any_component(b, from, li, kMlpContexts);
    const bool structural =
        shape.size() == 2 &&
        (info.hidden_size <= 0 || shape[1] == static_cast<std::uint64_t>(info.hidden_size)) &&
        (shape[0] == 1 || (info.num_experts > 0 && shape[0] == static_cast<std::uint64_t>(info.num_experts)));
    if (mlp_ctx || structural) return {Role::ROUTER, -1};
  }
  // Linear attention (GatedDeltaNet).
  if (has_component(b, from, li, "linear_attn") || last == "linear_attn") {
    if (last == "conv1d") return {Role::LINEAR_ATTN_CONV, -1};
    if (last == "A_log" || last == "dt_bias" || last == "D") return {Role::LINEAR_ATTN_PARAM, -1};
    if (is_norm_name(last)) return {Role::NORM, -1};
    return {Role::LINEAR_ATTN, -1};
  }
  // Mamba-2 mixer (Granite-4 hybrid).
  if (has_any_component(b, from, li, names::kMambaContexts)) {
    if (last == "conv1d") return {Role::LINEAR_ATTN_CONV, -1};
    if (last == "A_log" || last == "dt_bias" || last == "D") return {Role::LINEAR_ATTN_PARAM, -1};
    if (is_norm_name(last)) return {Role::NORM, -1};
    // Mamba-1 (Jamba, Falcon-Mamba) also projects through x_proj and dt_proj.
    if (last == "in_proj" || last == "out_proj" || last == "x_proj" || last == "dt_proj") return {Role::MAMBA, -1};
  }
  if (is_norm_name(last)) return {Role::NORM, -1};
  // Numbered norms (LongCat-Flash input_layernorm.0 / .1: one per sub-block of a layer).
  if (parse_index(last) >= 0 && li > from && is_norm_name(b[li - 1])) return {Role::NORM, -1};
  // Attention.
  const bool attn_ctx = has_any_component(b, from, li, names::kAttentionContexts);
  // Attention sinks: one learned logit per head (gpt-oss and Granite self_attn.sinks, DeepSeek-V4 attn.attn_sink,
  // MiMo self_attn.attention_sink_bias).
  if (attn_ctx && (last == "sinks" || last == "attn_sink" || last == "attention_sink_bias")) return {Role::ATTN_SINK, -1};
  // Multi-head latent attention (DeepSeek-V2/V3 and the wq_a / wkv_a naming of their reference code).
  if (last == "q_a_proj" || last == "wq_a") return {Role::ATTN_Q_A, -1};
  if (last == "q_b_proj" || last == "wq_b") return {Role::ATTN_Q_B, -1};
  if (last == "kv_a_proj_with_mqa" || last == "wkv_a_with_mqa" || last == "wkv_a") return {Role::ATTN_KV_A, -1};
  if (last == "kv_b_proj" || last == "wkv_b") return {Role::ATTN_KV_B, -1};
  // Pre-fused q/k/v (Phi-3 qkv_proj, Falcon query_key_value, MPT Wqkv, GPT-2 c_attn).
  if (last == "qkv_proj" || last == "query_key_value" || last == "Wqkv" || last == "c_attn" ||
      (attn_ctx && last == "qkv"))
    return {Role::ATTN_QKV, -1};
  if (last == "q_proj" || (attn_ctx && (last == "wq" || last == "query"))) return {Role::ATTN_Q, -1};
  if (last == "k_proj" || (attn_ctx && (last == "wk" || last == "key"))) return {Role::ATTN_K, -1};
  if (last == "v_proj" || (attn_ctx && (last == "wv" || last == "value"))) return {Role::ATTN_V, -1};
  if (last == "o_proj" || (attn_ctx && (last == "wo" || last == "out_proj" || last == "dense" ||
                                        last == "c_proj" || last == "proj")))
    return {Role::ATTN_O, -1};
  if (const LeafTraits* lt = leaf_traits(last); attn_ctx && lt && lt->attention_scale) return {Role::SCALAR, -1};
  // Dense MLP.
  if (last == "gate_up_proj") return {Role::MLP_GATE_UP, -1};
  if (last == "gate_proj" || last == "w1") return {Role::MLP_GATE, -1};
  if (last == "up_proj" || last == "w3") return {Role::MLP_UP, -1};
  if (last == "down_proj" || last == "w2") return {Role::MLP_DOWN, -1};
  if (has_any_component(b, from, li, kMlpContexts)) {
    if (last == "fc1" || last == "c_fc" || last == "dense_h_to_4h") return {Role::MLP_UP, -1};
    if (last == "fc2" || last == "c_proj" || last == "dense_4h_to_h") return {Role::MLP_DOWN, -1};
  }
  // Gemma-4 per-layer embeddings.
  if (last == "per_layer_input_gate" || last == "per_layer_projection" ||
      last == "per_layer_model_projection")
    return {Role::PLE, -1};
  if (one_of(last, kEmbeddings)) return {Role::EMBEDDING, -1};
  // DeepSeek-V4's release names: the token embedding is a bare `embed` at the text root (as its head is `head`).
  if (last == "embed" && li == from && b.n == from + 2) return {Role::EMBEDDING, -1};
  // LLaVA-NeXT / OneVision: the learned vector between rows of image features (the multimodal part).
  if (last == "image_newline" && li == from) return {Role::PROJECTOR, -1};
  if (last == "lm_head") return {Role::LM_HEAD, -1};
  if (last == "layer_scalar" || last == "layer_scale") return {Role::SCALAR, -1};
  // Other 0-d / [1] parameters.
  if (shape.empty() || (shape.size() == 1 && shape[0] == 1)) return {Role::SCALAR, -1};
  return r;
}

}  // namespace

namespace {

/** classify() without the columns the tables add (param_kind, group, quant_param). */
TensorClass classify_name(std::string_view name, std::span<const std::uint64_t> shape, const ModelInfo& info) {
  TensorClass c;
  const Parts parts = split(name);
  const auto [module_part, leaf_part] = names::split_leaf(name);
  c.module = std::string(module_part);
  c.param = std::string(leaf_part);
  if (parts.n == 0 || name.empty()) return c;

  // MTP block (top level).
  if (parts[0] == "mtp") {
    c.role = Role::MTP;
    std::size_t from = 1;
    if (parts[1] == "layers") {
      const int k = parse_index(parts[2]);
      if (k >= 0) {
        c.layer = k;
        c.layer_type = "full_attention";
        from = 3;
      }
    }
    if (parts[from] == "fc" || parts[from] == "eh_proj") {
      c.base_role = Role::OTHER;
    } else {
      const Body b = classify_body(parts, from, shape, info);
      c.base_role = b.role;
      c.expert = b.expert;
    }
    return c;
  }

  // lm_head (top level, or under a wrapper): `lm_head`, GPT-NeoX `embed_out`, DeepSeek-V4 reference `head`.
  if ((parts.n == 2 && one_of(parts[0], kLmHeads)) || parts[0] == "lm_head" ||
      ((parts[0] == "language_model" || parts[0] == "model") && parts.n == 3 && one_of(parts[1], kLmHeads))) {
    c.role = c.base_role = Role::LM_HEAD;
    return c;
  }

  // The text stack as the tensors show it (read_structure): its root is text, not a tower.
  const std::size_t root_parts =
      static_cast<std::size_t>(std::count(info.text_root.begin(), info.text_root.end(), '.'));
  const bool in_text_root = info.structure_read && !info.text_root.empty() && starts_with(name, info.text_root) &&
                            !names::is_vision_component(parts[root_parts]) &&
                            !names::is_audio_component(parts[root_parts]) &&
                            !names::is_projector_component(parts[root_parts]);

  // Towers and projectors: model.<tower>.* or <tower>.* (known names, `vit`, `*vision*`, `*audio*`,
  // `*projector*`, `connector`), and the other layer stacks the structure found beside the text stack.
  for (std::size_t i = 0; i < 2 && !in_text_root; ++i) {
    const std::string_view comp = parts[i];
    if (i == 1 && parts[0] != "model") break;
    if (names::is_projector_component(comp)) {
      c.role = c.base_role = Role::PROJECTOR;
      return c;
    }
    if (names::is_vision_component(comp)) {
      c.role = one_of(parts[i + 1], kVisualMergers) ? Role::PROJECTOR : Role::VISION;
      c.base_role = c.role;
      return c;
    }
    if (one_of(comp, kAudioTowers) || (i == 0 && names::is_audio_component(comp))) {
      c.role = c.base_role = Role::AUDIO;
      return c;
    }
  }
  if (!in_text_root)
    for (const auto& root : info.tower_roots)
      if (starts_with(name, root)) {
        c.role = c.base_role = names::is_audio_component(root) ? Role::AUDIO
                                : info.has_vision_config || !info.has_audio_config ? Role::VISION
                                                                                     : Role::AUDIO;
        return c;
      }

  // Text stack: strip the prefix.
  std::size_t from = 0;
  if (in_text_root) {
    from = root_parts;
    c.text_stack = true;
  } else if ((parts[0] == "model" && (parts[1] == "language_model" || parts[1] == "text_model")) ||
             (parts[0] == "language_model" && parts[1] == "model")) {
    from = 2;
    c.text_stack = true;
  } else if (parts[0] == "model" || parts[0] == "language_model" || parts[0] == "transformer") {
    from = 1;
    c.text_stack = true;
  } else if (one_of(parts[0], kLayerContainers) || one_of(parts[0], kEmbeddings) || parts[0] == "norm" ||
             (parts[0] == "embed" && parts.n == 2)) {
    c.text_stack = true;
  } else if (!info.structure_read && parts.n > 3 && one_of(parts[1], kLayerContainers) && parse_index(parts[2]) >= 0) {
    // `<root>.layers.<i>.*` under a root classify has no name for (GPT-NeoX `gpt_neox.`, Nemotron-H
    // `backbone.`): a decoder stack when nothing better is known (towers were excluded above).
    from = 1;
    c.text_stack = true;
  }
  if (c.text_stack && parts.n == from + 2 && one_of(parts[from], kLmHeads) && parts[from] != "head") {
    c.role = c.base_role = Role::LM_HEAD;
    c.text_stack = false;
    return c;
  }

  if (parts.n > from + 1 && one_of(parts[from], kLayerContainers)) {
    const int layer = parse_index(parts[from + 1]);
    if (layer >= 0) {
      c.layer = layer;
      if (c.text_stack && static_cast<std::size_t>(layer) < info.layer_types.size())
        c.layer_type = info.layer_types[static_cast<std::size_t>(layer)];
      from += 2;
    }
  } else if (parts.n == from + 2 && one_of(parts[from], kFinalNorms)) {
    c.role = c.base_role = Role::NORM;
    return c;
  }
  const Body b = classify_body(parts, from, shape, info);
  c.role = c.base_role = b.role;
  c.expert = b.expert;
  // DeepSeek-V3 / GLM-4.5 MTP: decoder layers [N, N + num_nextn_predict_layers) of the text stack.
  if (c.text_stack && c.layer >= 0 && info.num_layers > 0 && c.layer >= info.num_layers &&
      info.mtp_form == MtpForm::EXTRA_LAYERS) {
    c.role = Role::MTP;
    c.text_stack = false;
    const std::string_view leaf = parts[parts.n - 1] == "weight" && parts.n >= 2 ? parts[parts.n - 2] : parts[parts.n - 1];
    if (leaf == "eh_proj") c.base_role = Role::OTHER;
    if (leaf == "head") c.base_role = Role::LM_HEAD;
  }
  return c;
}

}  // namespace

TensorClass classify(std::string_view name, std::span<const std::uint64_t> shape, const ModelInfo& info) {
  TensorClass c = classify_name(name, shape, info);
  const LeafTraits* lt = leaf_traits(c.param);
  c.param_kind = lt ? lt->kind : ParamKind::OTHER;
  c.quant_param = lt && lt->quant_param;
  c.group = role_traits(c.role).group;
  return c;
}

std::vector<FusedSet> fused_sets(std::span<const std::string> weight_modules, const ModelInfo& info) {
  std::map<std::string, std::set<std::string>, std::less<>> children;
  for (const auto& m : weight_modules) {
    const auto [parent, leaf] = names::split_leaf(m);
    if (m.find('.') == std::string::npos) continue;
    children[std::string(parent)].insert(std::string(leaf));
  }
  std::vector<FusedSet> out;
  for (const auto& [parent, kids] : children) {
    for (const FusedRule& rule : fused_rules()) {
      bool all = true;
      for (auto leaf : rule.members) all = all && kids.count(std::string(leaf)) > 0;
      if (!all) continue;
      FusedSet s;
      s.parent = parent;
      s.kind = std::string(rule.kind);
      for (auto leaf : rule.members) s.members.push_back(parent + "." + std::string(leaf));
      out.push_back(std::move(s));
    }
    // Full-attention layers with attention_k_eq_v (Gemma-4, and any family whose config says keys are values):
    // {q_proj, k_proj}, no v_proj on disk; vLLM's qkv_proj loads k as v, so q and k share one global scale.
    if (info.attention_k_eq_v && kids.count("q_proj") > 0 &&
        kids.count("k_proj") > 0 && kids.count("v_proj") == 0) {
      const TensorClass tc = classify(parent + ".q_proj.weight", {}, info);
      if (tc.layer_type == "full_attention" && (tc.text_stack || tc.role == Role::MTP)) {
        FusedSet s;
        s.parent = parent;
        s.kind = "qk";
        s.members = {parent + ".q_proj", parent + ".k_proj"};
        out.push_back(std::move(s));
      }
    }
  }
  // std::map iteration already yields parents in sorted order; keep kinds stable within a parent.
  return out;
}

}  // namespace fp4forge
