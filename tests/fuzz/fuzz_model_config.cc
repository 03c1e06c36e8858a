// Fuzzes config.json handling: bounded JSON parse, ModelInfo, and classification of a fixed set of
// tensor names of every family under the fuzzed config.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/model_info.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = fp4forge::parse_json_bounded(text, "config.json");
  if (!j.ok()) return 0;
  auto info = fp4forge::read_model_info(*j);
  if (!info.ok()) return 0;
  static const std::array<std::string_view, 12> kNames{
      "model.language_model.layers.0.self_attn.q_proj.weight",
      "model.language_model.layers.5.experts.gate_up_proj",
      "model.language_model.layers.3.router.proj.weight",
      "model.layers.1.mlp.experts.7.down_proj.weight_packed",
      "model.layers.2.linear_attn.conv1d.weight",
      "mtp.layers.0.mlp.gate_proj.weight",
      "model.visual.blocks.0.attn.qkv.weight",
      "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight",
      "lm_head.weight",
      "model.layers.99999999999999999999.mlp.gate.weight",
      "model.language_model.layers.-1.self_attn.k_proj.weight",
      "",
  };
  std::vector<std::string> modules;
  for (auto n : kNames) {
    std::array<std::uint64_t, 2> shape{16, 32};
    auto c = fp4forge::classify(n, shape, *info);
    if (!c.module.empty()) modules.push_back(c.module);
  }
  auto sets = fp4forge::fused_sets(modules, *info);
  (void)sets;
  return 0;
}
