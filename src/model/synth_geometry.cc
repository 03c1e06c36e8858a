// The geometry synth lays a family out at: built-in sizes, and a real config.json read back (--config).
#include "synth_geometry.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/model/model_info.h"
#include "fp4forge/model/registry.h"

namespace fp4forge::synth_detail {

constexpr std::uint64_t kKiB = 1024, kMiB = 1024 * 1024;

Geo geometry(std::string_view arch, std::string_view size) {
  Geo g;
  const int s = size == "tiny" ? 0 : size == "small" ? 1 : 2;
  g.shard_bytes = s == 0 ? 256 * kKiB : s == 1 ? 64 * kMiB : kReleaseShardBytes;
  if (arch == "llama" || arch == "qwen3-moe") {
    const bool moe = arch == "qwen3-moe";
    if (s == 0)
      g.H = 128, g.N = 2, g.A = 4, g.KV = 2, g.d = 32, g.I = 256, g.V = 512, g.max_pos = 4096;
    if (s == 1)
      g.H = 768, g.N = 6, g.A = 12, g.KV = 4, g.d = 64, g.I = 2048, g.V = 32000, g.max_pos = 8192;
    if (s == 2)
      g.H = 4096, g.N = 32, g.A = 32, g.KV = 8, g.d = 128, g.I = 14336, g.V = 128256, g.max_pos = 8192;
    if (moe) {
      const std::array<std::uint64_t, 3> e{8, 8, 16}, im{64, 512, 1024}, k{2, 2, 4};
      g.E = e[s];
      g.Im = im[s];
      g.topk = k[s];
      if (s == 2) {
        g.KV = 4;
        g.V = 151936;
        g.max_pos = 40960;
      }
    }
    return g;
  }
  if (arch == "gemma4-dense" || arch == "gemma4-moe") {
    const bool moe = arch == "gemma4-moe";
    g.tie = true;
    g.pattern = 6;
    if (s == 0) {
      g.H = 128, g.N = 6, g.A = 4, g.KV = 2, g.d = 32, g.dg = 64, g.KVg = 1, g.I = moe ? 96 : 256, g.V = 512;
      g.sliding_window = 64, g.max_pos = 4096;
      g.vis = {64, 112, 2, 2, 32, 64, 16};
      if (moe) g.E = 8, g.Im = 64, g.topk = 2;
    } else if (s == 1) {
      g.H = 768, g.N = 6, g.A = 8, g.KV = 4, g.d = 64, g.dg = 128, g.KVg = 2, g.I = moe ? 512 : 2048,
      g.V = 32000;
      g.sliding_window = 512, g.max_pos = 8192;
      g.vis = {256, 512, 2, 4, 64, 1024, 16};
      if (moe) g.E = 8, g.Im = 256, g.topk = 2;
    } else {
      g.H = moe ? 2816 : 4096, g.N = moe ? 30 : 32, g.A = 16, g.KV = 8, g.d = 256, g.dg = 512;
      g.KVg = moe ? 2 : 4, g.I = moe ? 2112 : 14336, g.V = 262144;
      g.sliding_window = 1024, g.max_pos = 262144;
      g.vis = {1152, 4304, 27, 16, 72, 10240, 16};
      if (moe) g.E = 32, g.Im = 704, g.topk = 8;
    }
    return g;
  }
  // qwen3_5-dense / qwen3_5-moe
  const bool moe = arch == "qwen3_5-moe";
  g.mtp = 1;
  g.interval = 4;
  if (s == 0) {
    g.H = 128, g.N = 8, g.A = 4, g.KV = 2, g.d = 32, g.I = 256, g.V = 512, g.max_pos = 8192;
    g.Hk = 2, g.Hv = 4, g.Dk = 32, g.Dv = 32;
    g.vis = {64, 128, 2, 2, 32, 64, 16};
    if (moe) g.E = 8, g.Im = 64, g.Is = 64, g.topk = 2;
  } else if (s == 1) {
    g.H = 768, g.N = 8, g.A = 8, g.KV = 2, g.d = 64, g.I = 2048, g.V = 32000, g.max_pos = 32768;
    g.Hk = 4, g.Hv = 8, g.Dk = 64, g.Dv = 64;
    g.vis = {256, 512, 2, 4, 64, 256, 16};
    if (moe) g.E = 8, g.Im = 512, g.Is = 512, g.topk = 2;
  } else {
    g.H = moe ? 2048 : 4096, g.N = moe ? 40 : 32, g.A = 16, g.KV = moe ? 2 : 4, g.d = 256;
    g.I = 11008, g.V = 248320, g.max_pos = 262144;
    g.Hk = 16, g.Hv = 32, g.Dk = 128, g.Dv = 128;
    g.vis = {1152, 4304, 27, 16, 72, 2304, 16};
    if (moe) g.E = 48, g.Im = 512, g.Is = 512, g.topk = 8;
  }
  return g;
}

std::vector<std::string> gemma4_layer_types(const Geo& g) {
  if (!g.layer_types.empty()) return g.layer_types;
  std::vector<std::string> lt;
  for (std::uint64_t i = 0; i < g.N; ++i)
    lt.emplace_back((i + 1) % g.pattern == 0 || i + 1 == g.N ? "full_attention" : "sliding_attention");
  return lt;
}

std::vector<std::string> qwen_layer_types(const Geo& g) {
  if (!g.layer_types.empty()) return g.layer_types;
  std::vector<std::string> lt;
  for (std::uint64_t i = 0; i < g.N; ++i)
    lt.emplace_back((i + 1) % g.interval == 0 ? "full_attention" : "linear_attention");
  return lt;
}

Error not_laid_out(std::string_view arch, std::string_view key, std::string_view what) {
  return make_error(Errc::BAD_INPUT,
                    "config.json: '{}' {}: synth's {} layout does not write it, so the checkpoint would not be "
                    "this model's; hint: plan reads the config alone (fp4forge plan --seat NAME=DIR), or synth "
                    "a config without it",
                    key, what, arch);
}

Status require_positive(std::string_view arch, std::initializer_list<std::pair<std::string_view, std::int64_t>> fields) {
  for (const auto& [key, v] : fields)
    if (v <= 0)
      return make_error(Errc::BAD_INPUT,
                        "config.json: '{}' is {}, expected a positive integer for synth's {} layout; hint: "
                        "pass the release's full config.json (a multimodal family's with its text_config and "
                        "vision_config complete)",
                        // a key the config lacks reads 0 here: said as absent (issue 55 tryout: "is 0")
                        key, v == 0 ? std::string("absent (or 0)") : std::to_string(v), arch);
  return {};
}

namespace {

using OJson = nlohmann::ordered_json;

/** config.json's integers as every config reader takes them (util/json_get.h: integral_of, a 27.0 is 27). */
std::int64_t int_or(const OJson& j, std::string_view key, std::int64_t def) {
  return integral_of(j, key).value_or(def);
}

Status read_vision(std::string_view arch, const OJson& config, bool gemma, Geo& g) {
  const auto it = config.find("vision_config");
  if (it == config.end() || !it->is_object())
    return make_error(Errc::BAD_INPUT,
                      "config.json has no 'vision_config' object: synth lays {} out as its multimodal release "
                      "(vision tower included); hint: pass the release's config.json, not its text_config",
                      arch);
  const OJson& v = *it;
  Vision& vis = g.vis;
  vis.H = static_cast<std::uint64_t>(int_or(v, "hidden_size", 0));
  vis.I = static_cast<std::uint64_t>(int_or(v, "intermediate_size", 0));
  vis.N = static_cast<std::uint64_t>(int_or(v, gemma ? "num_hidden_layers" : "depth", 0));
  vis.heads = static_cast<std::uint64_t>(int_or(v, gemma ? "num_attention_heads" : "num_heads", 0));
  vis.patch = static_cast<std::uint64_t>(int_or(v, "patch_size", 16));
  vis.pos = static_cast<std::uint64_t>(int_or(v, gemma ? "position_embedding_size" : "num_position_embeddings", 0));
  vis.hd = static_cast<std::uint64_t>(int_or(v, "head_dim", vis.heads > 0 ? static_cast<std::int64_t>(vis.H / vis.heads) : 0));
  return require_positive(arch, {{"vision_config.hidden_size", static_cast<std::int64_t>(vis.H)},
                                 {"vision_config.intermediate_size", static_cast<std::int64_t>(vis.I)},
                                 {gemma ? "vision_config.num_hidden_layers" : "vision_config.depth", static_cast<std::int64_t>(vis.N)},
                                 {gemma ? "vision_config.num_attention_heads" : "vision_config.num_heads", static_cast<std::int64_t>(vis.heads)},
                                 {"vision_config.head_dim", static_cast<std::int64_t>(vis.hd)},
                                 {gemma ? "vision_config.position_embedding_size" : "vision_config.num_position_embeddings", static_cast<std::int64_t>(vis.pos)}});
}

Result<std::string> arch_of(const ModelInfo& m) {
  switch (m.family) {
    case Family::LLAMA: return std::string("llama");
    case Family::QWEN3_MOE: return std::string("qwen3-moe");
    case Family::GEMMA4: return std::string(m.enable_moe_block ? "gemma4-moe" : "gemma4-dense");
    case Family::QWEN3_5: return std::string("qwen3_5-dense");
    case Family::QWEN3_5_MOE: return std::string("qwen3_5-moe");
    default: break;
  }
  return make_error(Errc::BAD_INPUT,
                    "config.json: family '{}' (model_type '{}'): synth lays out llama, qwen3_moe, gemma4, "
                    "qwen3_5 / qwen3_5_moe and {} only; hint: plan sizes any registered family from its config "
                    "alone (fp4forge plan --seat NAME=DIR)",
                    family_name(m.family), m.model_type, fmt::join(synth_rule_families(), ", "));
}

Result<Geo> geo_of(std::string_view arch, const ModelInfo& m, const OJson& config) {
  const OJson& t = text_config(config);
  Geo g;
  g.shard_bytes = kReleaseShardBytes;
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v > 0 ? v : 0); };
  g.H = u(m.hidden_size), g.N = u(m.num_layers), g.A = u(m.num_heads), g.KV = u(m.num_kv_heads);
  g.d = u(m.head_dim), g.V = u(m.vocab_size), g.I = u(m.intermediate_size);
  g.max_pos = u(m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096);
  g.tie = m.tie_word_embeddings;
  FP4FORGE_TRY(require_positive(arch, {{"hidden_size", m.hidden_size}, {"num_hidden_layers", m.num_layers},
                                       {"num_attention_heads", m.num_heads}, {"num_key_value_heads", m.num_kv_heads},
                                       {"head_dim", m.head_dim}, {"vocab_size", m.vocab_size}}));
  const bool moe = arch.ends_with("moe");
  if (moe) {
    g.E = u(m.num_experts), g.Im = u(m.moe_intermediate_size), g.topk = u(m.experts_per_tok);
    FP4FORGE_TRY(require_positive(arch, {{"num_experts", m.num_experts},
                                         {"moe_intermediate_size", m.moe_intermediate_size},
                                         {"num_experts_per_tok / top_k_experts", m.experts_per_tok}}));
  }
  if (arch == "llama" || arch == "qwen3-moe") {
    // A multimodal release around a Llama text stack (LLaVA, Idefics3, SmolVLM) has its tower and other names.
    if (m.wrapper || m.has_vision_config || m.has_audio_config)
      return not_laid_out(arch, m.has_audio_config ? "audio_config" : "vision_config",
                          fmt::format("is set (a multimodal release, {})",
                                      m.architecture.empty() ? m.model_type : m.architecture));
    if (arch == "llama") FP4FORGE_TRY(require_positive(arch, {{"intermediate_size", m.intermediate_size}}));
    if (arch == "qwen3-moe") {
      if (const auto it = t.find("mlp_only_layers"); it != t.end() && it->is_array() && !it->empty())
        return not_laid_out(arch, "mlp_only_layers", "lists dense layers");
      if (int_or(t, "decoder_sparse_step", 1) != 1)
        return not_laid_out(arch, "decoder_sparse_step", "is not 1 (some layers dense)");
    }
    if (bool_of(t, "mlp_bias") || bool_of(t, "attention_bias"))
      return not_laid_out(arch, "attention_bias / mlp_bias", "is set");
    return g;
  }
  const bool gemma = arch.starts_with("gemma4");
  g.layer_types = m.layer_types;
  if (gemma) {
    if (m.hidden_size_per_layer_input > 0)
      return not_laid_out(arch, "hidden_size_per_layer_input", "is set (per-layer inputs)");
    if (m.num_kv_shared_layers > 0) return not_laid_out(arch, "num_kv_shared_layers", "is set (KV-shared layers)");
    if (m.use_double_wide_mlp) return not_laid_out(arch, "use_double_wide_mlp", "is set");
    if (!m.tie_word_embeddings) return not_laid_out(arch, "tie_word_embeddings", "is false (an lm_head of its own)");
    g.dg = u(m.global_head_dim > 0 ? m.global_head_dim : m.head_dim);
    g.KVg = u(m.num_global_kv_heads > 0 ? m.num_global_kv_heads : m.num_kv_heads);
    g.k_eq_v = m.attention_k_eq_v;
    g.sliding_window = u(m.sliding_window);
    FP4FORGE_TRY(require_positive(arch, {{"intermediate_size", m.intermediate_size},
                                         {"sliding_window", m.sliding_window}}));
  } else {
    g.Hk = u(m.linear_num_key_heads), g.Hv = u(m.linear_num_value_heads);
    g.Dk = u(m.linear_key_head_dim), g.Dv = u(m.linear_value_head_dim);
    g.Kc = u(m.linear_conv_kernel_dim > 0 ? m.linear_conv_kernel_dim : 4);
    g.mtp = u(m.mtp_num_hidden_layers);
    if (moe) g.Is = u(m.shared_expert_intermediate_size);
    FP4FORGE_TRY(require_positive(arch, {{"linear_num_key_heads", m.linear_num_key_heads},
                                         {"linear_num_value_heads", m.linear_num_value_heads},
                                         {"linear_key_head_dim", m.linear_key_head_dim},
                                         {"linear_value_head_dim", m.linear_value_head_dim}}));
    if (moe)
      FP4FORGE_TRY(require_positive(arch, {{"shared_expert_intermediate_size", m.shared_expert_intermediate_size}}));
    else
      FP4FORGE_TRY(require_positive(arch, {{"intermediate_size", m.intermediate_size}}));
  }
  if (g.layer_types.size() != g.N)
    return make_error(Errc::BAD_INPUT, "config.json: 'layer_types' has {} entries, expected num_hidden_layers = {}",
                      g.layer_types.size(), g.N);
  FP4FORGE_TRY(read_vision(arch, config, gemma, g));
  return g;
}

}  // namespace

Result<ConfigGeometry> geometry_from_config(std::string_view requested, const ModelInfo& m, const OJson& config) {
  FP4FORGE_ASSIGN_OR_RETURN(std::string detected, arch_of(m));
  if (!requested.empty() && detected != requested)
    return make_error(Errc::USAGE, "--arch {} does not match the config, which is a {} checkpoint; hint: leave "
                      "--arch out with --config", requested, detected);
  FP4FORGE_ASSIGN_OR_RETURN(Geo g, geo_of(detected, m, config));
  return ConfigGeometry{std::move(detected), std::move(g)};
}

}  // namespace fp4forge::synth_detail
