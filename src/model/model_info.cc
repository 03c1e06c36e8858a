#include "fp4forge/model/model_info.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string_view>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/util/json_get.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::int64_t kMaxLayers = 100'000;  // far above any real model; guards allocations

/** Integer value of `key` in `j` (`dflt` when absent, null, non-numeric or non-integral). */
std::int64_t get_int(const Json& j, std::string_view key, std::int64_t dflt = 0) {
  return integral_of(j, key).value_or(dflt);
}

using util::ends_with;

}  // namespace

std::string ArchClass::describe() const {
  return moe ? fmt::format("{} ({} experts)", str(), num_experts) : str();
}

std::string ArchClass::str() const {
  std::string s = moe ? "moe" : "dense";
  if (hybrid) s += "+hybrid";
  if (multimodal) s += "+multimodal";
  return s;
}

const nlohmann::ordered_json& text_config(const nlohmann::ordered_json& config) {
  if (config.is_object()) {
    auto it = config.find("text_config");
    if (it != config.end() && it->is_object()) return *it;
  }
  return config;
}

namespace {

/** The text model's widths, counts and flags (absent keys read as 0 / false / the family's default). */
void read_geometry(const Json& text, const FamilySpec& spec, ModelInfo& m) {
  // Geometry.
  // GPT-2-style keys (GPTBigCode's n_embd / n_layer / n_head / n_positions) are transformers' attribute_map
  // aliases of the usual ones: read as those (issue 55: plan said num_hidden_layers was missing).
  const auto first = [&](std::initializer_list<std::string_view> keys) -> std::int64_t {
    for (std::string_view k : keys)
      if (auto v = integral_of(text, k)) return *v;
    return 0;
  };
  m.hidden_size = first({"hidden_size", "n_embd"});
  m.num_layers = first({"num_hidden_layers", "n_layer"});
  if (m.num_layers == 0)  // Nemotron-H (transformers 5.x): the layer count is len(layers_block_type)
    if (auto lb = text.find("layers_block_type"); lb != text.end() && lb->is_array())
      m.num_layers = static_cast<std::int64_t>(lb->size());
  m.num_heads = first({"num_attention_heads", "n_head"});
  // KV heads as vLLM counts them (ee92a6f, transformers_utils/model_arch_config_convertor.py: the first of
  // n_head_kv, num_kv_heads, num_key_value_heads, multi_query_group_num, num_attention_groups, else the attention
  // heads; FalconModelArchConfigConvertor and models/gpt_bigcode.py: multi_query, unless Falcon's
  // new_decoder_architecture, is one KV head).
  m.num_kv_heads = first({"n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                          "num_attention_groups"});
  if (m.num_kv_heads == 0) m.num_kv_heads = m.num_heads;
  if (opt_bool_of(text, "multi_query").value_or(false) &&
      !opt_bool_of(text, "new_decoder_architecture").value_or(false))
    m.num_kv_heads = 1;
  m.head_dim = get_int(text, "head_dim");
  if (m.head_dim == 0 && m.num_heads > 0 && m.hidden_size % m.num_heads == 0)
    m.head_dim = m.hidden_size / m.num_heads;
  m.intermediate_size = first_int(text, spec.dense_intermediate_keys);
  if (m.intermediate_size == 0) m.intermediate_size = get_int(text, "intermediate_size");
  m.vocab_size = get_int(text, "vocab_size");
  m.max_position_embeddings = first({"max_position_embeddings", "n_positions"});
  m.num_experts = first_int(text, spec.num_experts_keys);
  if (m.num_experts == 0) m.num_experts = first_int(text, family_spec(Family::UNKNOWN).num_experts_keys);
  m.experts_per_tok = get_int(text, "num_experts_per_tok");
  if (m.experts_per_tok == 0) m.experts_per_tok = get_int(text, "top_k_experts");
  m.moe_intermediate_size = first_int(text, spec.expert_intermediate_keys);
  m.shared_expert_intermediate_size = first_int(text, spec.shared_intermediate_keys);
  if (!spec.shared_count_key.empty())
    m.shared_expert_intermediate_size = get_int(text, spec.shared_count_key) * m.moe_intermediate_size;
  m.q_lora_rank = get_int(text, "q_lora_rank");
  m.kv_lora_rank = get_int(text, "kv_lora_rank");
  m.qk_nope_head_dim = get_int(text, "qk_nope_head_dim");
  m.qk_rope_head_dim = get_int(text, "qk_rope_head_dim");
  m.v_head_dim = get_int(text, "v_head_dim");
  m.attention_k_eq_v = opt_bool_of(text, "attention_k_eq_v").value_or(false);
  m.sliding_window = get_int(text, "sliding_window");
  m.num_kv_shared_layers = get_int(text, "num_kv_shared_layers");
  m.linear_num_key_heads = get_int(text, "linear_num_key_heads");
  m.linear_num_value_heads = get_int(text, "linear_num_value_heads");
  m.linear_key_head_dim = get_int(text, "linear_key_head_dim");
  m.linear_value_head_dim = get_int(text, "linear_value_head_dim");
  m.linear_conv_kernel_dim = get_int(text, "linear_conv_kernel_dim");
  m.mtp_num_hidden_layers = get_int(text, "mtp_num_hidden_layers");
  if (m.mtp_num_hidden_layers == 0) m.mtp_num_hidden_layers = get_int(text, "num_nextn_predict_layers");
  m.attn_output_gate = opt_bool_of(text, "attn_output_gate").value_or(spec.attn_output_gate);
  m.enable_moe_block = opt_bool_of(text, "enable_moe_block").value_or(false) ||
                       opt_bool_of(text, "use_second_mlp_block").value_or(false);
  m.hidden_size_per_layer_input = get_int(text, "hidden_size_per_layer_input");
  m.use_double_wide_mlp = opt_bool_of(text, "use_double_wide_mlp").value_or(false);
  m.full_attention_interval = get_int(text, "full_attention_interval");
  if (const std::int64_t nl = get_int(text, "num_layers"); nl > 0 && m.num_layers > nl && m.num_layers % nl == 0)
    m.stack_layers = nl;
  m.zero_experts = std::max<std::int64_t>(0, get_int(text, "zero_expert_num"));

}

/** A list of integers under `key` (entries that are not integers skipped); empty when absent. */
std::vector<std::int64_t> int_list(const Json& j, std::string_view key) {
  std::vector<std::int64_t> out;
  if (auto it = j.find(key); it != j.end() && it->is_array())
    for (const auto& e : *it)
      if (e.is_number_integer()) out.push_back(e.get<std::int64_t>());
  return out;
}

/** Whether a config names recurrent-state keys (Mamba's mamba_* / ssm_* / state_size, RWKV's rescale_every,
 * RecurrentGemma's lru_width, ...) with a value. */
bool has_state_keys(const Json& text) {
  static constexpr std::string_view kExact[] = {"state_size",  "d_state",    "time_step_rank", "rescale_every",
                                                "lru_width",   "ssm_cfg",    "conv_L_cache"};
  for (const auto& [k, v] : text.items()) {
    const bool prefixed = k.rfind("mamba_", 0) == 0 || k.rfind("ssm_", 0) == 0;
    const bool exact = std::find(std::begin(kExact), std::end(kExact), k) != std::end(kExact);
    if ((prefixed || exact) && !v.is_null()) return true;
  }
  return false;
}

/** Layer types of hybrids the registry has no entry for, as transformers derives them (issue 55: Jamba was
 * sized as 32 attention layers): Jamba's attn_layer_period/attn_layer_offset and Bamba's attn_layer_indices
 * (the other layers Mamba), Nemotron-H's hybrid_override_pattern (M Mamba, * attention, - MLP, E MoE),
 * RecurrentGemma's block_types (repeated), MiniMax's attn_type_list (0 linear, 1 softmax) and Kimi-Linear's
 * linear_attn_config (1-based kda_layers). An unknown family that names recurrent-state keys and none of these
 * has that state in every layer: "mamba" (or "rwkv") without attention heads, "attention+mamba" with them
 * (layers that run both side by side, as Falcon-H1's; inferred from its config, no layer list to read). False
 * when none applies: the layers are plain attention. plan refuses the types it has no formula for. */
bool hybrid_layer_types(const Json& text, ModelInfo& m, std::size_t n) {
  auto& lt = m.layer_types;
  if (const std::int64_t period = get_int(text, "attn_layer_period"); period > 0) {
    const std::int64_t offset = get_int(text, "attn_layer_offset");
    for (std::size_t i = 0; i < n; ++i)
      lt.emplace_back(static_cast<std::int64_t>(i) % period == offset ? "full_attention" : "mamba");
    return true;
  }
  if (auto it = text.find("attn_layer_indices"); it != text.end() && it->is_array()) {
    const auto idx = int_list(text, "attn_layer_indices");
    for (std::size_t i = 0; i < n; ++i)
      lt.emplace_back(std::find(idx.begin(), idx.end(), static_cast<std::int64_t>(i)) != idx.end() ? "full_attention"
                                                                                                  : "mamba");
    return true;
  }
  if (auto it = text.find("hybrid_override_pattern"); it != text.end() && it->is_string()) {
    const std::string p = it->get<std::string>();
    for (std::size_t i = 0; i < n; ++i) {
      const char c = i < p.size() ? p[i] : '*';
      lt.emplace_back(c == 'M' ? "mamba" : c == '-' ? "mlp" : c == 'E' ? "moe" : "full_attention");
    }
    return true;
  }
  if (auto it = text.find("block_types"); it != text.end() && it->is_array() && !it->empty()) {
    std::vector<std::string> blocks;
    for (const auto& e : *it) blocks.push_back(e.is_string() ? e.get<std::string>() : "unknown");
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& b = blocks[i % blocks.size()];
      lt.push_back(b == "attention" ? "full_attention" : b);
    }
    return true;
  }
  if (auto it = text.find("attn_type_list"); it != text.end() && it->is_array()) {
    const auto types = int_list(text, "attn_type_list");
    for (std::size_t i = 0; i < n; ++i)
      lt.emplace_back(i < types.size() && types[i] == 0 ? "linear_attention" : "full_attention");
    return true;
  }
  if (auto it = text.find("linear_attn_config"); it != text.end() && it->is_object()) {
    const auto kda = int_list(*it, "kda_layers");
    for (std::size_t i = 0; i < n; ++i)
      lt.emplace_back(std::find(kda.begin(), kda.end(), static_cast<std::int64_t>(i) + 1) != kda.end()
                          ? "linear_attention"
                          : "full_attention");
    return true;
  }
  if (m.family != Family::UNKNOWN || !m.recurrent_state_keys) return false;
  const bool rwkv = has_non_null(text, "rescale_every");
  const std::string state = rwkv ? "rwkv" : "mamba";
  lt.assign(n, m.num_heads > 0 && !rwkv ? "attention+" + state : state);
  return true;
}

/** layer_types as written (each a string), or as transformers derives it for the family (GatedDeltaNet
 * intervals, Granite-4's layers_block_type, Gemma-4's sliding pattern, else all full attention). */
Status read_layer_types(const Json& text, const FamilySpec& spec, ModelInfo& m) {
  m.recurrent_state_keys = has_state_keys(text);
  // Layer types.
  if (auto it = text.find("layer_types"); it != text.end() && !it->is_null()) {
    if (!it->is_array())
      return make_error(Errc::BAD_INPUT, "config.json: 'layer_types' must be a list of strings, got {}",
                        it->type_name());
    if (it->size() > static_cast<std::size_t>(kMaxLayers))
      return make_error(Errc::BAD_INPUT, "config.json: 'layer_types' has {} entries, expected at most {}",
                        it->size(), kMaxLayers);
    std::size_t i = 0;
    for (const auto& e : *it) {
      if (!e.is_string())
        return make_error(Errc::BAD_INPUT, "config.json: layer_types[{}] must be a string, got {}", i,
                          e.type_name());
      m.layer_types.push_back(e.get<std::string>());
      ++i;
    }
  } else {
    m.layer_types_synthesized = true;
    const auto n = static_cast<std::size_t>(m.num_layers);
    m.layer_types.reserve(n);
    if (spec.mixer == Mixer::GATED_DELTANET) {
      const std::int64_t interval =
          m.full_attention_interval > 0 ? m.full_attention_interval : spec.full_attention_interval;
      for (std::size_t i = 0; i < n; ++i)
        m.layer_types.emplace_back((static_cast<std::int64_t>(i) + 1) % interval == 0 ? "full_attention"
                                                                                      : "linear_attention");
    } else if (auto lb = text.find("layers_block_type"); lb != text.end() && lb->is_array()) {
      // Granite-4 hybrid: "attention" / "mamba" per layer; any other block (Zamba2's "hybrid", Nemotron-H's
      // "mlp") is kept as written, for plan to refuse rather than size it as attention.
      for (const auto& e : *lb) {
        if (m.layer_types.size() == n) break;
        const std::string b = e.is_string() ? e.get<std::string>() : "attention";
        m.layer_types.emplace_back(b == "attention" ? "full_attention" : b);
      }
      m.layer_types.resize(n, "full_attention");
    } else if (m.family == Family::GEMMA4) {
      std::int64_t pattern = get_int(text, "sliding_window_pattern", 6);
      if (pattern <= 0) pattern = 6;
      for (std::size_t i = 0; i < n; ++i)
        m.layer_types.emplace_back((static_cast<std::int64_t>(i) + 1) % pattern == 0 ? "full_attention"
                                                                                     : "sliding_attention");
      if (!m.layer_types.empty()) m.layer_types.back() = "full_attention";
    } else if (!hybrid_layer_types(text, m, n)) {
      m.layer_types.assign(n, "full_attention");
    }
  }

  return {};
}

/** Each layer's head_dim and kv heads: the flat values, none for linear attention, and Gemma-4's global
 * layers (per_layer_config, transformers >= 5.15, wins over the flat global keys). */
Status read_layer_geometry(const Json& text, ModelInfo& m) {
  // Gemma-4 full-attention geometry: per_layer_config (transformers >= 5.15) wins over flat keys.
  m.has_flat_global_head_dim = has_non_null(text, "global_head_dim");
  m.has_flat_num_global_kv_heads = has_non_null(text, "num_global_key_value_heads");
  const Json* plc = nullptr;
  if (auto it = text.find("per_layer_config"); it != text.end() && !it->is_null()) {
    if (!it->is_object())
      return make_error(Errc::BAD_INPUT, "config.json: 'per_layer_config' must be an object, got {}",
                        it->type_name());
    plc = &*it;
    m.has_per_layer_config = true;
  }
  const std::size_t nl = m.layer_types.size();
  m.layer_head_dim.assign(nl, m.head_dim);
  m.layer_kv_heads.assign(nl, m.num_kv_heads);
  for (std::size_t i = 0; i < nl; ++i) {
    if (m.layer_types[i] == "linear_attention") {
      m.layer_head_dim[i] = 0;
      m.layer_kv_heads[i] = 0;
    }
  }
  if (m.family == Family::GEMMA4) {
    if (plc != nullptr) {
      bool global_seen = false;
      for (std::size_t i = 0; i < nl; ++i) {
        auto it = plc->find(std::to_string(i));
        const Json* ov = (it != plc->end() && it->is_object()) ? &*it : nullptr;
        if (ov != nullptr) {
          m.layer_head_dim[i] = get_int(*ov, "head_dim", m.head_dim);
          m.layer_kv_heads[i] = get_int(*ov, "num_key_value_heads", m.num_kv_heads);
        }
        if (m.layer_types[i] == "full_attention" && !global_seen) {
          global_seen = true;
          m.global_head_dim = m.layer_head_dim[i];
          if (m.attention_k_eq_v) m.num_global_kv_heads = m.layer_kv_heads[i];
        }
      }
    } else {
      m.global_head_dim = get_int(text, "global_head_dim");
      m.num_global_kv_heads = get_int(text, "num_global_key_value_heads");
      const std::int64_t dg = m.global_head_dim > 0 ? m.global_head_dim : 512;  // transformers default
      const std::int64_t kvg = m.num_global_kv_heads > 0 ? m.num_global_kv_heads : m.num_kv_heads;
      for (std::size_t i = 0; i < nl; ++i) {
        if (m.layer_types[i] != "full_attention") continue;
        m.layer_head_dim[i] = dg;
        if (m.attention_k_eq_v) m.layer_kv_heads[i] = kvg;
      }
    }
  }
  return {};
}

}  // namespace

Result<ModelInfo> read_model_info(const nlohmann::ordered_json& config) {
  if (!config.is_object())
    return make_error(Errc::BAD_INPUT, "config.json: expected a JSON object at the root, got {}",
                      config.type_name());
  ModelInfo m;
  if (auto it = config.find("text_config"); it != config.end() && !it->is_null()) {
    if (!it->is_object())
      return make_error(Errc::BAD_INPUT,
                        "config.json: 'text_config' must be an object, got {}; hint: wrapper configs "
                        "nest the text model's keys in an object",
                        it->type_name());
    m.wrapper = true;
  }
  const Json& text = text_config(config);

  if (auto it = config.find("architectures");
      it != config.end() && it->is_array() && !it->empty() && (*it)[0].is_string())
    m.architecture = (*it)[0].get<std::string>();
  m.model_type = str_of(config, "model_type");
  m.text_model_type = m.wrapper ? str_of(text, "model_type") : m.model_type;

  m.family = detect_family(m.model_type, m.text_model_type, m.architecture);
  const FamilySpec& spec = m.spec();
  // The family's preferred wrapper prefix; the tensors may refine it (text_prefix_of()).
  m.text_prefix = (m.wrapper || ends_with(m.architecture, "ForConditionalGeneration"))
                      ? std::string(spec.text_prefixes.front())
                      : "model.";

  read_geometry(text, spec, m);
  m.mtp_form = spec.mtp;

  // Tied embeddings: the text-level value is authoritative (architectures.md §1.1).
  const bool tie_default = spec.tie_default;
  if (auto t = opt_bool_of(text, "tie_word_embeddings"))
    m.tie_word_embeddings = *t;
  else
    m.tie_word_embeddings = opt_bool_of(config, "tie_word_embeddings").value_or(tie_default);

  m.has_vision_config = has_non_null(config, "vision_config");
  m.has_audio_config = has_non_null(config, "audio_config");

  if (const Json* qc = find_quant_config(config); qc != nullptr && qc->is_object())
    m.quant_method = str_of(*qc, "quant_method");

  if (m.num_layers < 0 || m.num_layers > kMaxLayers)
    return make_error(Errc::BAD_INPUT, "config.json: num_hidden_layers = {} is out of range, expected 0..{}",
                      m.num_layers, kMaxLayers);
  if (m.mtp_num_hidden_layers < 0 || m.mtp_num_hidden_layers > kMaxLayers)
    return make_error(Errc::BAD_INPUT, "config.json: mtp_num_hidden_layers = {} is out of range",
                      m.mtp_num_hidden_layers);

  FP4FORGE_TRY(read_layer_types(text, spec, m));

  FP4FORGE_TRY(read_layer_geometry(text, m));
  return m;
}

}  // namespace fp4forge
