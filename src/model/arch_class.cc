#include "fp4forge/model/arch_class.h"

#include <algorithm>
#include <vector>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/classify.h"

namespace fp4forge {

ArchClass classify_arch(std::span<const NamedShape> tensors, const ModelInfo& info) {
  ArchClass a;
  bool any_text = false;
  bool any_moe = false;
  std::uint64_t fused_e = 0, router_e = 0;
  int max_expert = -1;
  for (const auto& t : tensors) {
    const TensorClass c = classify(t.name, t.shape, info);
    const Role r = c.role == Role::MTP ? c.base_role : c.role;
    if (c.text_stack) any_text = true;
    switch (r) {
      case Role::EXPERT_GATE_UP_FUSED:
      case Role::EXPERT_DOWN_FUSED:
        any_moe = true;
        if (t.shape.size() == 3) fused_e = std::max<std::uint64_t>(fused_e, t.shape[0]);
        break;
      case Role::EXPERT_GATE:
      case Role::EXPERT_UP:
      case Role::EXPERT_DOWN:
        any_moe = true;
        max_expert = std::max(max_expert, c.expert);
        break;
      case Role::ROUTER:
        any_moe = true;
        // shared_expert_gate is [1, H]; a real router has one row per expert.
        if (t.shape.size() == 2 && c.module.find("shared_expert_gate") == std::string::npos)
          router_e = std::max<std::uint64_t>(router_e, t.shape[0]);
        break;
      case Role::LINEAR_ATTN:
      case Role::LINEAR_ATTN_CONV:
      case Role::LINEAR_ATTN_PARAM:
        a.hybrid = true;
        break;
      case Role::VISION:
      case Role::AUDIO:
      case Role::PROJECTOR:
        a.multimodal = true;
        break;
      default:
        break;
    }
  }
  if (std::find(info.layer_types.begin(), info.layer_types.end(), "linear_attention") !=
      info.layer_types.end())
    a.hybrid = true;
  if (info.has_vision_config || info.has_audio_config) a.multimodal = true;
  if (any_moe) {
    a.moe = true;
    if (fused_e > 0)
      a.num_experts = static_cast<int>(fused_e);
    else if (max_expert >= 0)
      a.num_experts = max_expert + 1;
    else if (router_e > 0)
      a.num_experts = static_cast<int>(router_e);
    else
      a.num_experts = static_cast<int>(info.num_experts);
  } else if (!any_text && info.num_experts > 0 && (info.family != Family::GEMMA4 || info.enable_moe_block)) {
    a.moe = true;
    a.num_experts = static_cast<int>(info.num_experts);
  }
  return a;
}

std::vector<NamedShape> named_shapes(const Checkpoint& ckpt) {
  std::vector<NamedShape> v;
  v.reserve(ckpt.tensors().size());
  for (const auto& t : ckpt.tensors()) v.push_back({t.name, t.info->shape});
  return v;
}

ArchClass classify_arch(const Checkpoint& ckpt, const ModelInfo& info) { return classify_arch(named_shapes(ckpt), info); }

}  // namespace fp4forge
