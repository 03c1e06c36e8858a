#pragma once
/**
 * The name components of the tensor vocabulary (issue 54): what decides towers, embeddings, layer stacks and
 * the blocks a module sits in, read by classify(), the structural reading (structure.cc) and verify's geometry,
 * so that all read a name the same way; and the one split of a tensor name into module and leaf.
 */
#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

namespace fp4forge::names {

// clang-format off
inline constexpr std::array<std::string_view, 6> kVisionTowers{
    "vision_tower", "visual", "vision_model", "vision_encoder", "image_encoder", "vision_embed_tokens"};
inline constexpr std::array<std::string_view, 4> kAudioTowers{"audio_tower", "audio_model", "audio_encoder",
                                                       "speech_encoder"};
inline constexpr std::array<std::string_view, 5> kProjectors{"embed_vision", "embed_audio", "multi_modal_projector",
                                                      "mm_projector", "audio_projector"};
inline constexpr std::array<std::string_view, 3> kVisualMergers{"merger", "deepstack_merger_list", "patch_merger"};
// Token and position embeddings (GPT-NeoX `embed_in`, Nemotron-H `backbone.embeddings`, GPT-2 `wpe`).
inline constexpr std::array<std::string_view, 9> kEmbeddings{"embed_tokens", "embed_tokens_per_layer", "wte",
                                                      "word_embeddings", "tok_embeddings", "embed_in",
                                                      "embeddings", "wpe", "embed_positions"};
inline constexpr std::array<std::string_view, 6> kFinalNorms{"norm", "final_layernorm", "ln_f", "final_norm",
                                                      "norm_f", "final_layer_norm"};
// Output heads under another name: GPT-NeoX `embed_out`, DeepSeek-V4 reference `head`.
inline constexpr std::array<std::string_view, 3> kLmHeads{"lm_head", "embed_out", "head"};
inline constexpr std::array<std::string_view, 4> kLayerContainers{"layers", "h", "blocks", "layer"};
inline constexpr std::array<std::string_view, 6> kMlpContexts{"mlp", "block_sparse_moe", "moe", "feed_forward",
                                                       "ffn", "sparse_moe"};
// Blocks that hold the attention projections (`model.layers.0.self_attn.q_proj`).
inline constexpr std::array<std::string_view, 5> kAttentionContexts{"self_attn", "attn", "attention", "cross_attn",
                                                             "self_attention"};
// Blocks that hold the shared experts beside the routed ones (Qwen2-MoE shared_expert, DeepSeek shared_experts,
// Granite shared_mlp).
inline constexpr std::array<std::string_view, 3> kSharedExpertContexts{"shared_expert", "shared_experts",
                                                                "shared_mlp"};
// Blocks of a Mamba mixer (Granite-4 hybrid, Jamba, Falcon-Mamba).
inline constexpr std::array<std::string_view, 2> kMambaContexts{"mamba", "mixer"};

// clang-format on

/** A tensor name split at its last '.': {module, leaf} ("a.b.weight" -> {"a.b", "weight"}; a name without a dot
 * is all leaf: {"", name}). The one place a name is split into module and parameter. */
inline std::pair<std::string_view, std::string_view> split_leaf(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return {std::string_view(), name};
  return {name.substr(0, dot), name.substr(dot + 1)};
}
/** The module part of a tensor name ("" when it has no dot). */
inline std::string_view module_of(std::string_view name) { return split_leaf(name).first; }
/** The last component of a name ("weight" of "a.b.weight"; the name itself when it has no dot). */
inline std::string_view leaf_of(std::string_view name) { return split_leaf(name).second; }

/** Parses a non-negative decimal index of at most 9 digits (a layer or expert number); -1 otherwise. */
inline int parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v;
}

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

/** A top-level component that names a vision tower: the known ones, and `vit`, `*vision*`, `*visual*`. */
inline bool is_vision_component(std::string_view c) {
  return one_of(c, kVisionTowers) || c == "vit" || c.find("vision") != std::string_view::npos ||
         c.find("visual") != std::string_view::npos;
}
/** A component that names an audio tower. */
inline bool is_audio_component(std::string_view c) {
  return one_of(c, kAudioTowers) || c.find("audio") != std::string_view::npos ||
         c.find("speech") != std::string_view::npos;
}
/** A component that names a modality projector / connector. */
inline bool is_projector_component(std::string_view c) {
  return one_of(c, kProjectors) || c.find("projector") != std::string_view::npos || c == "connector" ||
         c == "aligner" || c == "mm_adapter";
}

}  // namespace fp4forge::names
