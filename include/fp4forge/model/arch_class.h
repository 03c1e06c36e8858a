#pragma once
/**
 * Architecture class of a checkpoint: dense / MoE / hybrid (linear attention) / multimodal, combinable.
 * Decided from the tensors (classify()) and, where tensors are silent, from config.json.
 */
#include <cstdint>
#include <span>
#include <vector>
#include <string_view>

#include "fp4forge/model/model_info.h"

namespace fp4forge {

class Checkpoint;

/** A tensor as classify_arch() needs it: name and shape. */
struct NamedShape {
  std::string_view name;
  std::span<const std::uint64_t> shape;
};

/**
 * Pure: MoE when routed-expert or router tensors exist (num_experts from the fused tensors' first dim,
 * else the largest per-expert index + 1, else the router rows, else the config); hybrid when
 * linear-attention tensors exist or layer_types has `linear_attention`; multimodal when vision / audio /
 * projector tensors exist or the config has a non-null vision_config / audio_config. With no text-stack
 * tensors at all, MoE falls back to the config (`num_experts` > 0).
 */
ArchClass classify_arch(std::span<const NamedShape> tensors, const ModelInfo& info);

/** Name and shape of every tensor of an opened checkpoint (views into it), in its order. */
std::vector<NamedShape> named_shapes(const Checkpoint& ckpt);

/** classify_arch over every tensor of an opened checkpoint. */
ArchClass classify_arch(const Checkpoint& ckpt, const ModelInfo& info);

}  // namespace fp4forge
