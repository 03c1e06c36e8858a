#pragma once
/**
 * The structure of a checkpoint read from its tensor names and shapes, before any family table: the layer
 * stacks (prefixes that repeat per layer index), which of them is the text decoder (not a tower, its
 * matrices have the config's hidden size on one side, the most tensors), and which are towers. The family
 * registry then only confirms and adds what structure cannot know (vLLM's names, fused sets, MTP).
 */
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fp4forge/model/arch_class.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge {

/** Tensors `<root><container>.<i>.*` for i = 0, 1, ... */
struct LayerStack {
  std::string root;       ///< "gpt_neox.", "model.vision_model.encoder.", "" for top-level layers
  std::string container;  ///< "layers", "h", "blocks", "layer", "resblocks"
  std::int64_t layers = 0;          ///< highest index + 1
  std::uint64_t tensors = 0;        ///< tensors in the stack
  std::uint64_t matrices = 0;       ///< 2-D tensors among them
  std::uint64_t hidden_matches = 0; ///< 2-D tensors with the config's hidden_size as one dimension
  bool tower_named = false;         ///< the root names a tower or projector (vision, audio, vit, ...)
  bool operator==(const LayerStack&) const = default;
};

struct StackLayout {
  std::vector<LayerStack> stacks;  ///< sorted by root then container
  int text = -1;                   ///< index of the text decoder stack in `stacks`; -1 when none
  std::vector<std::string> tower_roots;  ///< the top prefix of each other stack ("vit.", "model.vision_model.")
};

/** Pure: the layer stacks among `tensors` and the text decoder among them. */
StackLayout read_structure(std::span<const NamedShape> tensors, const ModelInfo& info);

/** Records `s` in `info` (structure_read, text_root, text_container, tower_roots); classify() reads them. */
void apply_structure(ModelInfo& info, const StackLayout& s);

/** read_structure + apply_structure. */
void read_structure_into(ModelInfo& info, std::span<const NamedShape> tensors);

class Checkpoint;
/** The checkpoint's ModelInfo: config.json (read_model_info) refined by its tensors (read_structure). */
Result<ModelInfo> read_checkpoint_info(const Checkpoint& ckpt);

}  // namespace fp4forge
