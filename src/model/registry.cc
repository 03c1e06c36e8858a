// The architecture registry: one row of data per family (docs/DEVELOPING.md, "The architecture registry").
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"  // designated initializers: omitted fields take their defaults
// Sources for each row: the family's transformers 5.17 configuration/modeling files (model types, config
// keys, tensor names as written by save_pretrained) and vLLM's model registry and loaders
// (architectures, MTP classes, prefix mappers, expert loading); docs/registry.md summarises them.
#include "fp4forge/model/registry.h"

#include <algorithm>
#include <array>

namespace fp4forge {
namespace {

using V = std::vector<std::string_view>;

const V kFlat{"model."};
const V kWrapper{"model.language_model.", "language_model.model.", "model."};
const V kLegacyWrapper{"language_model.model.", "model.language_model.", "model."};

std::vector<FamilySpec> make_table() {
  std::vector<FamilySpec> t;
  auto add = [&](FamilySpec s) { t.push_back(std::move(s)); };
  // Dense decoder-only families.
  add({.family = Family::LLAMA, .id = "llama", .display = "Llama", .model_types = {"llama"},
       .architectures = {"LlamaForCausalLM"}, .text_prefixes = kFlat, .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::MISTRAL, .id = "mistral", .display = "Mistral", .model_types = {"mistral"},
       .architectures = {"MistralForCausalLM"}, .text_prefixes = kFlat,
       .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::PHI3, .id = "phi3", .display = "Phi-3", .model_types = {"phi3"},
       .architectures = {"Phi3ForCausalLM"}, .text_prefixes = kFlat, .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::QWEN2, .id = "qwen2", .display = "Qwen2", .model_types = {"qwen2"},
       .architectures = {"Qwen2ForCausalLM"}, .text_prefixes = kFlat, .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::QWEN3, .id = "qwen3", .display = "Qwen3", .model_types = {"qwen3"},
       .architectures = {"Qwen3ForCausalLM"}, .text_prefixes = kFlat, .dense_intermediate_keys = {"intermediate_size"}});
  // MoE decoder-only families.
  add({.family = Family::MIXTRAL, .id = "mixtral", .display = "Mixtral", .model_types = {"mixtral"},
       .architectures = {"MixtralForCausalLM"}, .text_prefixes = kFlat, .moe_layers = MoeLayers::ALL,
       .expert_intermediate_keys = {"intermediate_size"}, .num_experts_keys = {"num_local_experts"},
       .expert_leaves = {"w1", "w3", "w2"}});
  add({.family = Family::QWEN2_MOE, .id = "qwen2_moe", .display = "Qwen2-MoE", .model_types = {"qwen2_moe"},
       .architectures = {"Qwen2MoeForCausalLM"}, .text_prefixes = kFlat, .moe_layers = MoeLayers::SPARSE_STEP,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_intermediate_keys = {"shared_expert_intermediate_size"}, .num_experts_keys = {"num_experts"}});
  add({.family = Family::QWEN3_MOE, .id = "qwen3_moe", .display = "Qwen3-MoE", .model_types = {"qwen3_moe"},
       .architectures = {"Qwen3MoeForCausalLM"}, .text_prefixes = kFlat, .moe_layers = MoeLayers::SPARSE_STEP,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .num_experts_keys = {"num_experts", "num_local_experts"}});
  add({.family = Family::QWEN3_NEXT, .id = "qwen3_next", .display = "Qwen3-Next", .model_types = {"qwen3_next"},
       .architectures = {"Qwen3NextForCausalLM"}, .mtp_architectures = {"Qwen3NextMTP"}, .text_prefixes = kFlat,
       .mixer = Mixer::GATED_DELTANET, .mixer_quant_bits = 8, .no_block_quant = {"in_proj_ba", "in_proj_a", "in_proj_b"}, .attn_output_gate = true, .full_attention_interval = 4,
       .mtp = MtpForm::MTP_MODULE, .moe_layers = MoeLayers::SPARSE_STEP,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_intermediate_keys = {"shared_expert_intermediate_size"}, .num_experts_keys = {"num_experts"}});
  add({.family = Family::DEEPSEEK_V2, .id = "deepseek_v2", .display = "DeepSeek-V2", .model_types = {"deepseek_v2"},
       .architectures = {"DeepseekV2ForCausalLM"}, .mtp_architectures = {"DeepSeekMTPModel"}, .text_prefixes = kFlat,
       .mtp = MtpForm::EXTRA_LAYERS, .moe_layers = MoeLayers::FIRST_K_DENSE,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_count_key = "n_shared_experts", .num_experts_keys = {"n_routed_experts"}, .mla = true});
  add({.family = Family::DEEPSEEK_V3, .id = "deepseek_v3", .display = "DeepSeek-V3", .model_types = {"deepseek_v3"},
       .architectures = {"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"}, .mtp_architectures = {"DeepSeekMTPModel"}, .text_prefixes = kFlat,
       .mtp = MtpForm::EXTRA_LAYERS, .moe_layers = MoeLayers::FIRST_K_DENSE,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_count_key = "n_shared_experts", .num_experts_keys = {"n_routed_experts"}, .mla = true});
  add({.family = Family::GLM4_MOE, .id = "glm4_moe", .display = "GLM-4.5 MoE", .model_types = {"glm4_moe"},
       .architectures = {"Glm4MoeForCausalLM"}, .mtp_architectures = {"Glm4MoeMTPModel"}, .text_prefixes = kFlat,
       .mtp = MtpForm::EXTRA_LAYERS, .moe_layers = MoeLayers::FIRST_K_DENSE,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_count_key = "n_shared_experts", .num_experts_keys = {"n_routed_experts"}});
  add({.family = Family::GPT_OSS, .id = "gpt_oss", .display = "gpt-oss", .model_types = {"gpt_oss"},
       .architectures = {"GptOssForCausalLM"}, .text_prefixes = kFlat, .moe_layers = MoeLayers::ALL,
       .expert_intermediate_keys = {"intermediate_size"}, .num_experts_keys = {"num_local_experts"},
       .gate_up_order = GateUpOrder::INTERLEAVED,
       .experts_refusal = "vLLM's gpt-oss loader (gpt_oss.py, _load_weights_other) reads compressed-tensors "
                          "experts only as fused bf16 [E, ...] tensors: per-expert NVFP4 weights are skipped "
                          "without an error, and its NVFP4 MoE method has no expert biases"});
  add({.family = Family::GRANITE_MOE_HYBRID, .id = "granitemoehybrid", .display = "Granite-4 hybrid",
       .model_types = {"granitemoehybrid"}, .architectures = {"GraniteMoeHybridForCausalLM"},
       .text_prefixes = kFlat, .mixer = Mixer::MAMBA2, .moe_layers = MoeLayers::ALL,
       .expert_intermediate_keys = {"intermediate_size"}, .shared_intermediate_keys = {"shared_intermediate_size"},
       .num_experts_keys = {"num_local_experts"}, .ignore_aliases = {{"mamba", "mixer"}}});
  // Multimodal wrappers (and their text-only classes).
  add({.family = Family::QWEN3_5, .id = "qwen3_5", .display = "Qwen3.5/3.6", .model_types = {"qwen3_5", "qwen3_5_text"},
       .architectures = {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"}, .mtp_architectures = {"Qwen3_5MTP"},
       .wrapper_architecture = "Qwen3_5ForConditionalGeneration", .text_prefixes = kWrapper,
       .mixer = Mixer::GATED_DELTANET, .mixer_quant_bits = 8, .no_block_quant = {"in_proj_ba", "in_proj_a", "in_proj_b"}, .attn_output_gate = true, .full_attention_interval = 4,
       .mtp = MtpForm::MTP_MODULE, .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::QWEN3_5_MOE, .id = "qwen3_5_moe", .display = "Qwen3.5/3.6-MoE",
       .model_types = {"qwen3_5_moe", "qwen3_5_moe_text"},
       .architectures = {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"},
       .mtp_architectures = {"Qwen3_5MoeMTP"}, .wrapper_architecture = "Qwen3_5MoeForConditionalGeneration",
       .text_prefixes = kWrapper, .mixer = Mixer::GATED_DELTANET, .mixer_quant_bits = 8, .no_block_quant = {"in_proj_ba", "in_proj_a", "in_proj_b"}, .attn_output_gate = true,
       .full_attention_interval = 4, .mtp = MtpForm::MTP_MODULE, .moe_layers = MoeLayers::ALL,
       .dense_intermediate_keys = {"intermediate_size"}, .expert_intermediate_keys = {"moe_intermediate_size"},
       .shared_intermediate_keys = {"shared_expert_intermediate_size"}, .num_experts_keys = {"num_experts"}});
  add({.family = Family::QWEN3_VL, .id = "qwen3_vl", .display = "Qwen3-VL", .model_types = {"qwen3_vl", "qwen3_vl_text"},
       .architectures = {"Qwen3VLForConditionalGeneration"}, .wrapper_architecture = "Qwen3VLForConditionalGeneration",
       .text_prefixes = kWrapper, .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::QWEN3_VL_MOE, .id = "qwen3_vl_moe", .display = "Qwen3-VL-MoE",
       .model_types = {"qwen3_vl_moe", "qwen3_vl_moe_text"}, .architectures = {"Qwen3VLMoeForConditionalGeneration"},
       .wrapper_architecture = "Qwen3VLMoeForConditionalGeneration", .text_prefixes = kWrapper,
       .moe_layers = MoeLayers::SPARSE_STEP, .dense_intermediate_keys = {"intermediate_size"},
       .expert_intermediate_keys = {"moe_intermediate_size"}, .num_experts_keys = {"num_experts", "num_local_experts"}});
  add({.family = Family::GEMMA3, .id = "gemma3", .display = "Gemma-3", .model_types = {"gemma3", "gemma3_text"},
       .architectures = {"Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"},
       .wrapper_architecture = "Gemma3ForConditionalGeneration", .text_prefixes = kLegacyWrapper, .tie_default = true,
       .dense_intermediate_keys = {"intermediate_size"}});
  add({.family = Family::GEMMA4, .id = "gemma4", .display = "Gemma-4", .model_types = {"gemma4", "gemma4_text"},
       .architectures = {"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"},
       .mtp_architectures = {"Gemma4MTPModel"}, .wrapper_architecture = "Gemma4ForConditionalGeneration", .text_prefixes = kWrapper, .tie_default = true,
       .moe_layers = MoeLayers::ALL, .dense_intermediate_keys = {"intermediate_size"},
       .expert_intermediate_keys = {"moe_intermediate_size", "expert_intermediate_size"},
       .num_experts_keys = {"num_experts"}});
  add({.family = Family::LLAMA4, .id = "llama4", .display = "Llama-4", .model_types = {"llama4", "llama4_text"},
       .architectures = {"Llama4ForConditionalGeneration", "Llama4ForCausalLM"},
       .mtp_architectures = {"EagleLlama4ForCausalLM"}, .wrapper_architecture = "Llama4ForConditionalGeneration",
       .text_prefixes = kLegacyWrapper, .moe_layers = MoeLayers::INTERLEAVE,
       .dense_intermediate_keys = {"intermediate_size_mlp"}, .expert_intermediate_keys = {"intermediate_size"},
       .shared_intermediate_keys = {"intermediate_size"}, .num_experts_keys = {"num_local_experts"}});
  add({.family = Family::MISTRAL3, .id = "mistral3", .display = "Mistral-3", .model_types = {"mistral3"},
       .architectures = {"Mistral3ForConditionalGeneration", "Ministral3ForCausalLM"}, .wrapper_architecture = "Mistral3ForConditionalGeneration",
       .text_prefixes = kLegacyWrapper, .dense_intermediate_keys = {"intermediate_size"}});
  return t;
}

const std::vector<FamilySpec>& table() {
  static const std::vector<FamilySpec> t = make_table();
  return t;
}

const FamilySpec& unknown_spec() {
  static const FamilySpec u{.family = Family::UNKNOWN, .id = "unknown", .display = "unknown",
                            .text_prefixes = kWrapper,
                            .dense_intermediate_keys = {"intermediate_size"},
                            .expert_intermediate_keys = {"moe_intermediate_size", "expert_intermediate_size"},
                            .shared_intermediate_keys = {"shared_expert_intermediate_size"},
                            .num_experts_keys = {"num_experts", "num_local_experts", "n_routed_experts"}};
  return u;
}

const FamilySpec* by_model_type(std::string_view mt) {
  if (mt.empty()) return nullptr;
  for (const auto& s : table())
    if (std::find(s.model_types.begin(), s.model_types.end(), mt) != s.model_types.end()) return &s;
  return nullptr;
}

const FamilySpec* by_architecture(std::string_view a) {
  if (a.empty()) return nullptr;
  for (const auto& s : table())
    if (std::find(s.architectures.begin(), s.architectures.end(), a) != s.architectures.end()) return &s;
  return nullptr;
}

}  // namespace

std::span<const FamilySpec> families() noexcept { return table(); }

std::span<const FusedRule> fused_rules() noexcept {
  static const std::vector<FusedRule> r{
      {"qkv", {"q_proj", "k_proj", "v_proj"}, "qkv_proj"},
      {"gate_up", {"gate_proj", "up_proj"}, "gate_up_proj"},
      {"q_a_kv_a", {"q_a_proj", "kv_a_proj_with_mqa"}, "fused_qkv_a_proj"},  // DeepSeek fused_qkv_a_proj
      {"q_a_kv_a", {"wq_a", "wkv_a_with_mqa"}, "fused_qkv_a_proj"},
      {"w1_w3", {"w1", "w3"}, ""},                                // Mixtral experts (w13, in FusedMoE)
      {"in_proj_qkvz", {"in_proj_qkv", "in_proj_z"}, "in_proj_qkvz"},  // Qwen3.5 GatedDeltaNet
      {"in_proj_ba", {"in_proj_b", "in_proj_a"}, "in_proj_ba"},
  };
  return r;
}

std::string_view vllm_fused_leaf(std::string_view kind) noexcept {
  if (kind == "qk") return "qkv_proj";  // Gemma-4 attention_k_eq_v: q and k load into qkv_proj
  for (const FusedRule& r : fused_rules())
    if (r.kind == kind) return r.vllm_name;
  return {};
}

const FamilySpec& family_spec(Family f) noexcept {
  for (const auto& s : table())
    if (s.family == f) return s;
  return unknown_spec();
}

std::string_view family_name(Family f) noexcept { return family_spec(f).id; }

Family detect_family(std::string_view model_type, std::string_view text_model_type,
                     std::string_view architecture) noexcept {
  const FamilySpec* top = by_model_type(model_type);
  const FamilySpec* text = by_model_type(text_model_type);
  if (top != nullptr && text != nullptr && top != text &&
      std::find(text->architectures.begin(), text->architectures.end(), architecture) != text->architectures.end())
    return text->family;
  if (top != nullptr) return top->family;
  if (const FamilySpec* a = by_architecture(architecture)) return a->family;
  if (text != nullptr) return text->family;
  return Family::UNKNOWN;
}

std::int64_t first_int(const nlohmann::ordered_json& j, std::span<const std::string_view> keys) {
  for (auto k : keys)
    if (auto v = integral_of(j, k)) return *v;
  return 0;
}

bool layer_is_moe(const FamilySpec& spec, const nlohmann::ordered_json& text, std::int64_t i,
                  std::int64_t num_layers) {
  auto get = [&](std::string_view k, std::int64_t dflt) { return integral_of(text, k).value_or(dflt); };
  auto in_list = [&](std::string_view k) -> std::optional<bool> {
    if (!text.is_object()) return std::nullopt;
    auto it = text.find(k);
    if (it == text.end() || !it->is_array()) return std::nullopt;
    for (const auto& x : *it)
      if (x.is_number_integer() && x.get<std::int64_t>() == i) return true;
    return false;
  };
  switch (spec.moe_layers) {
    case MoeLayers::NONE: return false;
    case MoeLayers::ALL: return true;
    case MoeLayers::SPARSE_STEP: {
      if (in_list("mlp_only_layers").value_or(false)) return false;
      const std::int64_t step = get("decoder_sparse_step", 1);
      return step <= 1 || (i + 1) % step == 0;
    }
    case MoeLayers::FIRST_K_DENSE: {
      const std::int64_t k = get("first_k_dense_replace", 0), freq = get("moe_layer_freq", 1);
      return i >= k && (freq <= 1 || i % freq == 0);
    }
    case MoeLayers::INTERLEAVE: {
      if (auto l = in_list("moe_layers")) return *l;
      const std::int64_t step = get("interleave_moe_layer_step", 1);
      if (step <= 0) return false;
      return i < num_layers && (i + 1) % step == 0;
    }
  }
  return false;
}

std::vector<std::string> vllm_ignore_aliases(const FamilySpec& spec, std::string_view module) {
  std::vector<std::string> out;
  for (const auto& [from, to] : spec.ignore_aliases) {
    // `.from.` as a whole path component, replaced by `.to.`.
    for (std::size_t p = module.find(from); p != std::string_view::npos; p = module.find(from, p + 1)) {
      const std::size_t e = p + from.size();
      if (p == 0 || module[p - 1] != '.' || e >= module.size() || module[e] != '.') continue;
      std::string m;
      m.reserve(module.size() + to.size());
      m.append(module.substr(0, p)).append(to).append(module.substr(e));
      out.push_back(std::move(m));
      break;
    }
  }
  return out;
}

bool vllm_registers(std::string_view a) noexcept {
  for (const auto& s : table()) {
    if (std::find(s.architectures.begin(), s.architectures.end(), a) != s.architectures.end()) return true;
    if (std::find(s.mtp_architectures.begin(), s.mtp_architectures.end(), a) != s.mtp_architectures.end()) return true;
  }
  return false;
}

}  // namespace fp4forge
