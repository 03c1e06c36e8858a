#pragma once
// Name components that decide towers, embeddings and layer stacks: shared by classify() and the structural
// reading (structure.cc), so that both read a name the same way.
#include <algorithm>
#include <array>
#include <string_view>

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

// clang-format on

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
