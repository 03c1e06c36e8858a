// Fuzzes the quantization_config readers (config.json text in): the compressed-tensors parser and vLLM's group
// lookup over what it parsed (GroupMatcher), and FP8 source detection (every dialect's config keys) over a fixed tensor table of each scale layout.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/safetensors/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fp4forge::DType;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = fp4forge::parse_json_bounded(text, "config.json");
  if (!j.ok()) return 0;
  static const std::vector<fp4forge::Fp8TensorInfo> tensors{
      {"a.weight", DType::F8_E4M3, {300, 200}},       {"a.weight_scale_inv", DType::F32, {3, 2}},
      {"b.weight", DType::F8_E4M3, {256, 128}},       {"b.weight_scale", DType::BF16, {256, 1}},
      {"c.weight", DType::F8_E4M3, {64, 64}},         {"c.weight_scale", DType::F32, {}},
      {"c.input_scale", DType::F32, {}},              {"e.gate_up_proj", DType::F8_E4M3, {2, 256, 128}},
      {"e.gate_up_proj_scale_inv", DType::F32, {2, 2}}, {"n.weight", DType::BF16, {64}}};
  auto fp8 = fp4forge::detect_fp8_source(*j, &*j, tensors);  // the same text as hf_quant_config.json too
  if (fp8.ok() && *fp8) (void)fp4forge::fp8_source_json(**fp8);
  (void)fp4forge::expanded_config(*j);
  const auto* qc = fp4forge::find_quant_config(*j);
  if (qc == nullptr) return 0;
  auto parsed = fp4forge::parse_quant_config(*qc);
  if (!parsed.ok()) return 0;
  // vLLM's group lookup over the parsed groups (issue 30): by name, by class, through fused shards, and the MoE
  // probe; a group index it returns must be one of the config's.
  auto gm = fp4forge::GroupMatcher::compile(*parsed);
  auto ig = fp4forge::IgnoreMatcher::compile(parsed->ignore);
  if (!gm.ok() || !ig.ok()) return 0;
  const auto g = gm->match("model.layers.0.self_attn.qkv_proj", "QKVParallelLinear",
                           {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"});
  if (g.group >= static_cast<long>(parsed->groups.size())) __builtin_trap();
  if (auto m = gm->moe(*ig, "model.layers.1.mlp.experts"); m.ok() && m->group >= static_cast<long>(parsed->groups.size()))
    __builtin_trap();
  return 0;
}
