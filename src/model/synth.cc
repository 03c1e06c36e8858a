// fp4forge synth: plan (pure) + streaming write of a random-weight BF16 checkpoint.
#include "fp4forge/model/synth.h"

#include "fp4forge/model/registry.h"
#include "synth_geometry.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <system_error>

#include <fmt/format.h>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/safetensors/index.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/safetensors/header.h"

namespace fp4forge {
namespace synth_detail {  // src/model/synth_tokenizer.cc.in, generated from tests/data/tokenizer/
extern const std::string_view kTokenizerJson;
extern const std::string_view kTokenizerConfigJson;
extern const std::string_view kChatTemplateJinja;
}  // namespace synth_detail
namespace {

using Json = nlohmann::json;  // sorted keys, as transformers writes (sort_keys=True)
using Shape = std::vector<std::uint64_t>;
using synth_detail::Geo;
using synth_detail::Vision;
using synth_detail::gemma4_config;
using synth_detail::gemma4_layer_types;
using synth_detail::qwen_layer_types;
using synth_detail::gemma4_processor;
using synth_detail::generation_config;
using synth_detail::llama_config;
using synth_detail::qwen3_5_config;
using synth_detail::qwen3_moe_config;
using synth_detail::qwen_processor;

constexpr std::array<std::string_view, 6> kArchs{"llama",      "qwen3-moe",     "gemma4-dense",
                                                 "gemma4-moe", "qwen3_5-dense", "qwen3_5-moe"};
constexpr std::array<std::string_view, 3> kSizes{"tiny", "small", "8b"};

// ---------------------------------------------------------------------------------------------
// Tensor lists

struct Builder {
  std::vector<SynthTensor> t;
  void add(std::string name, Shape shape, std::string group = {}) {
    t.push_back({std::move(name), std::move(shape), std::move(group)});
  }
};

void gemma4_vision(Builder& b, const Geo& g) {
  const Vision& v = g.vis;
  const std::string p = "model.vision_tower.";
  for (std::uint64_t j = 0; j < v.N; ++j) {
    const std::string l = fmt::format("{}encoder.layers.{}.", p, j);
    b.add(l + "input_layernorm.weight", {v.H});
    b.add(l + "mlp.down_proj.linear.weight", {v.H, v.I});
    b.add(l + "mlp.gate_proj.linear.weight", {v.I, v.H});
    b.add(l + "mlp.up_proj.linear.weight", {v.I, v.H});
    b.add(l + "post_attention_layernorm.weight", {v.H});
    b.add(l + "post_feedforward_layernorm.weight", {v.H});
    b.add(l + "pre_feedforward_layernorm.weight", {v.H});
    b.add(l + "self_attn.k_norm.weight", {v.hd});
    b.add(l + "self_attn.k_proj.linear.weight", {v.heads * v.hd, v.H});
    b.add(l + "self_attn.o_proj.linear.weight", {v.H, v.heads * v.hd});
    b.add(l + "self_attn.q_norm.weight", {v.hd});
    b.add(l + "self_attn.q_proj.linear.weight", {v.heads * v.hd, v.H});
    b.add(l + "self_attn.v_proj.linear.weight", {v.heads * v.hd, v.H});
  }
  b.add(p + "patch_embedder.input_proj.weight", {v.H, 3 * v.patch * v.patch});
  b.add(p + "patch_embedder.position_embedding_table", {2, v.pos, v.H});
  b.add(p + "std_bias", {v.H});
  b.add(p + "std_scale", {v.H});
}


void gemma4_text(Builder& b, const Geo& g, bool moe) {
  const std::string P = "model.language_model.";
  b.add(P + "embed_tokens.weight", {g.V, g.H});
  const auto lt = gemma4_layer_types(g);
  for (std::uint64_t i = 0; i < g.N; ++i) {
    const bool full = lt[i] == "full_attention";
    const std::uint64_t d = full ? g.dg : g.d, kv = full ? g.KVg : g.KV;
    const std::string l = fmt::format("{}layers.{}.", P, i);
    b.add(l + "self_attn.q_proj.weight", {g.A * d, g.H});
    b.add(l + "self_attn.k_proj.weight", {kv * d, g.H});
    if (!full || !g.k_eq_v) b.add(l + "self_attn.v_proj.weight", {kv * d, g.H});  // attention_k_eq_v
    b.add(l + "self_attn.o_proj.weight", {g.H, g.A * d});
    b.add(l + "self_attn.q_norm.weight", {d});
    b.add(l + "self_attn.k_norm.weight", {d});
    b.add(l + "mlp.gate_proj.weight", {g.I, g.H});
    b.add(l + "mlp.up_proj.weight", {g.I, g.H});
    b.add(l + "mlp.down_proj.weight", {g.H, g.I});
    b.add(l + "input_layernorm.weight", {g.H});
    b.add(l + "post_attention_layernorm.weight", {g.H});
    b.add(l + "pre_feedforward_layernorm.weight", {g.H});
    b.add(l + "post_feedforward_layernorm.weight", {g.H});
    if (moe) {
      b.add(l + "router.proj.weight", {g.E, g.H});
      b.add(l + "router.scale", {g.H});
      b.add(l + "router.per_expert_scale", {g.E});
      b.add(l + "experts.gate_up_proj", {g.E, 2 * g.Im, g.H});
      b.add(l + "experts.down_proj", {g.E, g.H, g.Im});
      b.add(l + "post_feedforward_layernorm_1.weight", {g.H});
      b.add(l + "pre_feedforward_layernorm_2.weight", {g.H});
      b.add(l + "post_feedforward_layernorm_2.weight", {g.H});
    }
    b.add(l + "layer_scalar", {1});
  }
  b.add(P + "norm.weight", {g.H});
  b.add("model.embed_vision.embedding_projection.weight", {g.H, g.vis.H});
}


void qwen_full_attn(Builder& b, const std::string& l, const Geo& g, const std::string& group) {
  b.add(l + "self_attn.q_proj.weight", {g.A * g.d * 2, g.H}, group);  // attn_output_gate
  b.add(l + "self_attn.k_proj.weight", {g.KV * g.d, g.H}, group);
  b.add(l + "self_attn.v_proj.weight", {g.KV * g.d, g.H}, group);
  b.add(l + "self_attn.o_proj.weight", {g.H, g.A * g.d}, group);
  b.add(l + "self_attn.q_norm.weight", {g.d}, group);
  b.add(l + "self_attn.k_norm.weight", {g.d}, group);
}

void qwen_mlp(Builder& b, const std::string& l, const Geo& g, bool moe, const std::string& group) {
  if (!moe) {
    b.add(l + "mlp.gate_proj.weight", {g.I, g.H}, group);
    b.add(l + "mlp.up_proj.weight", {g.I, g.H}, group);
    b.add(l + "mlp.down_proj.weight", {g.H, g.I}, group);
    return;
  }
  b.add(l + "mlp.gate.weight", {g.E, g.H}, group);
  b.add(l + "mlp.experts.gate_up_proj", {g.E, 2 * g.Im, g.H}, group);
  b.add(l + "mlp.experts.down_proj", {g.E, g.H, g.Im}, group);
  b.add(l + "mlp.shared_expert.gate_proj.weight", {g.Is, g.H}, group);
  b.add(l + "mlp.shared_expert.up_proj.weight", {g.Is, g.H}, group);
  b.add(l + "mlp.shared_expert.down_proj.weight", {g.H, g.Is}, group);
  b.add(l + "mlp.shared_expert_gate.weight", {1, g.H}, group);
}

void qwen3_5(Builder& b, const Geo& g, bool moe) {
  const Vision& v = g.vis;
  const std::string vp = "model.visual.";
  for (std::uint64_t j = 0; j < v.N; ++j) {
    const std::string l = fmt::format("{}blocks.{}.", vp, j);
    b.add(l + "attn.proj.bias", {v.H});
    b.add(l + "attn.proj.weight", {v.H, v.H});
    b.add(l + "attn.qkv.bias", {3 * v.H});
    b.add(l + "attn.qkv.weight", {3 * v.H, v.H});
    b.add(l + "mlp.linear_fc1.bias", {v.I});
    b.add(l + "mlp.linear_fc1.weight", {v.I, v.H});
    b.add(l + "mlp.linear_fc2.bias", {v.H});
    b.add(l + "mlp.linear_fc2.weight", {v.H, v.I});
    b.add(l + "norm1.bias", {v.H});
    b.add(l + "norm1.weight", {v.H});
    b.add(l + "norm2.bias", {v.H});
    b.add(l + "norm2.weight", {v.H});
  }
  const std::uint64_t m2 = v.H * 4;  // spatial_merge_size 2
  b.add(vp + "merger.linear_fc1.bias", {m2});
  b.add(vp + "merger.linear_fc1.weight", {m2, m2});
  b.add(vp + "merger.linear_fc2.bias", {g.H});
  b.add(vp + "merger.linear_fc2.weight", {g.H, m2});
  b.add(vp + "merger.norm.bias", {v.H});
  b.add(vp + "merger.norm.weight", {v.H});
  b.add(vp + "patch_embed.proj.bias", {v.H});
  b.add(vp + "patch_embed.proj.weight", {v.H, 3, 2, v.patch, v.patch});
  b.add(vp + "pos_embed.weight", {v.pos, v.H});

  const std::string P = "model.language_model.";
  b.add(P + "embed_tokens.weight", {g.V, g.H});
  const auto lt = qwen_layer_types(g);
  const std::uint64_t conv = 2 * g.Hk * g.Dk + g.Hv * g.Dv;
  for (std::uint64_t i = 0; i < g.N; ++i) {
    const std::string l = fmt::format("{}layers.{}.", P, i);
    if (lt[i] == "full_attention") {
      qwen_full_attn(b, l, g, {});
    } else {
      b.add(l + "linear_attn.A_log", {g.Hv});
      b.add(l + "linear_attn.conv1d.weight", {conv, 1, g.Kc});
      b.add(l + "linear_attn.dt_bias", {g.Hv});
      b.add(l + "linear_attn.in_proj_a.weight", {g.Hv, g.H});
      b.add(l + "linear_attn.in_proj_b.weight", {g.Hv, g.H});
      b.add(l + "linear_attn.in_proj_qkv.weight", {conv, g.H});
      b.add(l + "linear_attn.in_proj_z.weight", {g.Hv * g.Dv, g.H});
      b.add(l + "linear_attn.norm.weight", {g.Dv});
      b.add(l + "linear_attn.out_proj.weight", {g.H, g.Hv * g.Dv});
    }
    qwen_mlp(b, l, g, moe, {});
    b.add(l + "input_layernorm.weight", {g.H});
    b.add(l + "post_attention_layernorm.weight", {g.H});
  }
  b.add(P + "norm.weight", {g.H});
  if (!g.tie) b.add("lm_head.weight", {g.V, g.H});
  // MTP block in its own shard, as llm-compressor saves it.
  const std::string mtp = "mtp";
  if (g.mtp == 0) return;
  b.add("mtp.fc.weight", {g.H, 2 * g.H}, mtp);
  for (std::uint64_t k = 0; k < g.mtp; ++k) {
    const std::string l = fmt::format("mtp.layers.{}.", k);
    qwen_full_attn(b, l, g, mtp);
    qwen_mlp(b, l, g, moe, mtp);
    b.add(l + "input_layernorm.weight", {g.H}, mtp);
    b.add(l + "post_attention_layernorm.weight", {g.H}, mtp);
  }
  b.add("mtp.norm.weight", {g.H}, mtp);
  b.add("mtp.pre_fc_norm_embedding.weight", {g.H}, mtp);
  b.add("mtp.pre_fc_norm_hidden.weight", {g.H}, mtp);
}

void llama_like(Builder& b, const Geo& g, bool qwen3_moe) {
  b.add("model.embed_tokens.weight", {g.V, g.H});
  for (std::uint64_t i = 0; i < g.N; ++i) {
    const std::string l = fmt::format("model.layers.{}.", i);
    b.add(l + "self_attn.q_proj.weight", {g.A * g.d, g.H});
    b.add(l + "self_attn.k_proj.weight", {g.KV * g.d, g.H});
    b.add(l + "self_attn.v_proj.weight", {g.KV * g.d, g.H});
    b.add(l + "self_attn.o_proj.weight", {g.H, g.A * g.d});
    if (qwen3_moe) {
      b.add(l + "self_attn.q_norm.weight", {g.d});
      b.add(l + "self_attn.k_norm.weight", {g.d});
      b.add(l + "mlp.gate.weight", {g.E, g.H});
      for (std::uint64_t e = 0; e < g.E; ++e) {
        const std::string x = fmt::format("{}mlp.experts.{}.", l, e);
        b.add(x + "gate_proj.weight", {g.Im, g.H});
        b.add(x + "up_proj.weight", {g.Im, g.H});
        b.add(x + "down_proj.weight", {g.H, g.Im});
      }
    } else {
      b.add(l + "mlp.gate_proj.weight", {g.I, g.H});
      b.add(l + "mlp.up_proj.weight", {g.I, g.H});
      b.add(l + "mlp.down_proj.weight", {g.H, g.I});
    }
    b.add(l + "input_layernorm.weight", {g.H});
    b.add(l + "post_attention_layernorm.weight", {g.H});
  }
  b.add("model.norm.weight", {g.H});
  if (!g.tie) b.add("lm_head.weight", {g.V, g.H});
}

// ---------------------------------------------------------------------------------------------
// Values: counter-based splitmix64 -> Irwin-Hall(4) ~ N(0,1) -> * 0.02 -> BF16 (round to nearest even)

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t tensor_key(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001B3ULL;
  }
  return mix64(h ^ mix64(seed + kGamma));
}

std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

Status make_dirs(const std::filesystem::path& dir) {
  std::filesystem::path cur;
  for (const auto& part : dir) {
    cur /= part;
    if (cur.empty() || cur == cur.root_path()) continue;
    std::error_code ec;
    if (std::filesystem::is_directory(cur, ec)) continue;
    if (fs::ops().mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return Error{Errc::IO,
                   fmt::format("cannot create directory '{}': {}", cur.string(), std::strerror(errno)),
                   cur.string(),
                   {}};
  }
  return {};
}

bool is_checkpoint_file(const std::string& n) {
  auto ends = [&n](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".safetensors") || ends(".safetensors.index.json") || fs::is_partial_name(n) || n == "config.json" ||
         n == "generation_config.json" || n == "processor_config.json" || n == "preprocessor_config.json" ||
         n == "tokenizer.json" || n == "tokenizer_config.json" || n == "chat_template.jinja";
}

}  // namespace

bool header_only_synth(const Checkpoint& ck) noexcept {
  for (const auto& sh : ck.shards())
    for (const auto& [k, v] : sh.header().metadata)
      if (k == kSynthMetadataKey && v == kSynthHeaderOnly) return true;
  return false;
}

std::span<const std::string_view> synth_archs() noexcept { return kArchs; }
std::span<const std::string_view> synth_sizes() noexcept { return kSizes; }

std::vector<std::string_view> synth_rule_families() {
  std::vector<std::string_view> ids;
  for (Family f : synth_detail::registry_layout_families()) ids.push_back(family_spec(f).id);
  return ids;
}

void synth_fill_bf16(std::uint64_t seed, std::string_view name, std::uint64_t first,
                     std::span<std::uint16_t> out) {
  const std::uint64_t key = tensor_key(seed, name);
  constexpr float kScale = 0.02f / 37837.23f;  // sd of a sum of four U{0..65535} is 65536*sqrt(1/3)
  std::uint64_t ctr = key + (first + 1) * kGamma;
  for (auto& v : out) {
    const std::uint64_t r = mix64(ctr);
    ctr += kGamma;
    const std::uint32_t s =
        static_cast<std::uint32_t>(r & 0xFFFF) + static_cast<std::uint32_t>((r >> 16) & 0xFFFF) +
        static_cast<std::uint32_t>((r >> 32) & 0xFFFF) + static_cast<std::uint32_t>(r >> 48);
    v = f32_to_bf16((static_cast<float>(s) - 131070.0f) * kScale);
  }
}

namespace {

/** Shard assignment as transformers does it: fill in order up to `limit`; a group (MTP) gets its own file. Sets the
 * plan's tensors, shards and totals. */
void assign_shards(SynthPlan& p, std::vector<SynthTensor> t, std::uint64_t limit) {
  std::vector<std::vector<std::size_t>> shards;
  std::uint64_t cur = 0;
  std::vector<std::size_t> grouped;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!t[i].shard.empty()) {
      grouped.push_back(i);
      continue;
    }
    const std::uint64_t bytes = st::shape_numel(t[i].shape) * 2;
    if (shards.empty() || (cur > 0 && cur + bytes > limit)) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(i);
    cur += bytes;
  }
  const std::size_t n = shards.size();
  for (std::size_t s = 0; s < n; ++s) {
    p.shards.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", s + 1, n));
    for (std::size_t i : shards[s]) t[i].shard = p.shards.back();
  }
  if (!grouped.empty()) {
    p.shards.push_back("model-mtp.safetensors");
    for (std::size_t i : grouped) t[i].shard = p.shards.back();
  }
  for (const auto& x : t) {
    p.total_params += st::shape_numel(x.shape);
    p.total_bytes += st::shape_numel(x.shape) * 2;
  }
  p.tensors = std::move(t);
}

/** The checkpoint of `arch` at geometry `g`: tensors, configs and shard assignment (no I/O). */
SynthPlan plan_geometry(std::string_view arch, std::string_view size, const Geo& g, std::uint64_t max_shard_bytes) {
  SynthPlan p;
  p.arch = std::string(arch);
  p.size = std::string(size);
  Builder b;
  if (arch == "llama") {
    llama_like(b, g, false);
    p.config = llama_config(g);
  } else if (arch == "qwen3-moe") {
    llama_like(b, g, true);
    p.config = qwen3_moe_config(g);
  } else if (arch == "gemma4-dense" || arch == "gemma4-moe") {
    const bool moe = arch == "gemma4-moe";
    gemma4_vision(b, g);
    gemma4_text(b, g, moe);
    p.config = gemma4_config(g, moe);
    p.processor_config = gemma4_processor(g);
  } else {
    const bool moe = arch == "qwen3_5-moe";
    qwen3_5(b, g, moe);
    p.config = qwen3_5_config(g, moe);
    p.processor_config = qwen_processor(g);
  }
  p.generation_config = generation_config(p.config);
  assign_shards(p, std::move(b.t), max_shard_bytes > 0 ? max_shard_bytes : g.shard_bytes);
  return p;
}

/** The --arch name as kArchs spells it: case, '_' and '-' as the operator types them (qwen3_moe is the model_type
 * of qwen3-moe, issue 55), else the nearest in a did-you-mean. */
Result<std::string_view> canonical_arch(std::string_view arch) {
  const std::string key = util::option_key(arch);
  std::vector<std::string> keys;
  for (std::string_view a : kArchs) {
    if (util::option_key(a) == key) return a;
    keys.push_back(util::option_key(a));
  }
  std::string near = util::nearest(key, keys);
  for (std::string_view a : kArchs)
    if (!near.empty() && util::option_key(a) == near) near = std::string(a);
  return make_error(Errc::USAGE, "unknown --arch '{}'{}; expected one of: {}", arch,
                    near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", near), fmt::join(kArchs, ", "));
}

}  // namespace

Result<SynthPlan> plan_synth(std::string_view typed_arch, std::string_view size, std::uint64_t max_shard_bytes) {
  FP4FORGE_ASSIGN_OR_RETURN(std::string_view arch, canonical_arch(typed_arch));
  if (std::find(kSizes.begin(), kSizes.end(), size) == kSizes.end())
    return make_error(Errc::USAGE, "unknown --size '{}'; expected one of: {}, or --config FILE for a real "
                      "config's geometry", size, fmt::join(kSizes, ", "));
  return plan_geometry(arch, size, synth_detail::geometry(arch, size), max_shard_bytes);
}

Result<SynthPlan> plan_synth_from_config(const nlohmann::ordered_json& config, std::string_view arch,
                                         std::uint64_t max_shard_bytes) {
  if (!arch.empty()) {
    FP4FORGE_ASSIGN_OR_RETURN(arch, canonical_arch(arch));
  }
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo m, read_model_info(config));
  // Qwen3.5's multimodal release is the built-in qwen3_5 layout (its tower included); its text class is the rule's.
  const bool builtin_release = m.family == Family::QWEN3_5 && (m.wrapper || m.has_vision_config);
  if (!synth_detail::registry_layout_family(m.family) || builtin_release) {
    FP4FORGE_ASSIGN_OR_RETURN(synth_detail::ConfigGeometry cg, synth_detail::geometry_from_config(arch, m, config));
    return plan_geometry(cg.arch, "config", cg.geo, max_shard_bytes);
  }
  // A family laid out by rule: the config itself is written (it is the model's), its tensors by the rule.
  const std::string_view id = m.spec().id;
  if (!arch.empty())
    return make_error(Errc::USAGE, "--arch {} does not match the config, which is a {} checkpoint; hint: leave "
                      "--arch out with --config", arch, id);
  FP4FORGE_ASSIGN_OR_RETURN(std::vector<SynthTensor> tensors, synth_detail::registry_layout(m, config));
  SynthPlan p;
  p.arch = std::string(id);
  p.size = "config";
  p.config = config;
  if (p.config.erase("quantization_config") > 0)
    p.notes.push_back("the config's quantization_config is not written: synth writes BF16 weights");
  for (const char* k : {"torch_dtype", "dtype"})
    if (p.config.contains(k) && p.config[k] != "bfloat16") {
      p.notes.push_back(fmt::format("config '{}' {} is written as \"bfloat16\" (synth writes BF16 weights)", k,
                                    p.config[k].dump()));
      p.config[k] = "bfloat16";
    }
  p.generation_config = generation_config(p.config);
  assign_shards(p, std::move(tensors), max_shard_bytes > 0 ? max_shard_bytes : synth_detail::kReleaseShardBytes);
  return p;
}

namespace {

/** Every tensor of `w` filled with its values, streamed in chunks through `buf`. */
Status write_values(st::ShardWriter& w, std::uint64_t seed, std::vector<std::uint16_t>& buf, ProgressScope& progress) {
  constexpr std::size_t kChunk = 1 << 20;  // elements per chunk (2 MiB of BF16)
  for (const auto& ti : w.layout().tensors) {
    const std::uint64_t n = ti.numel();
    for (std::uint64_t first = 0; first < n; first += kChunk) {
      const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, n - first));
      buf.resize(m);
      synth_fill_bf16(seed, ti.name, first, buf);
      // BF16 little-endian on disk.
      if constexpr (std::endian::native == std::endian::big)
        for (auto& v : buf) v = static_cast<std::uint16_t>((v >> 8) | (v << 8));
      FP4FORGE_TRY(w.write_at(ti.begin + first * 2, std::as_bytes(std::span<const std::uint16_t>(buf))));
      progress.add(m * 2);
    }
  }
  return {};
}

}  // namespace

Result<SynthReport> synth_checkpoint(const SynthOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  FP4FORGE_ASSIGN_OR_RETURN(SynthPlan plan, opts.config
                                                ? plan_synth_from_config(*opts.config, opts.arch, opts.max_shard_bytes)
                                                : plan_synth(opts.arch, opts.size, opts.max_shard_bytes));
  if (opts.out.empty()) return make_error(Errc::USAGE, "--out is required");
  const std::filesystem::path out = opts.out;
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(out, ec);
  if (std::filesystem::exists(st)) {
    if (!std::filesystem::is_directory(out, ec))
      return Error{
          Errc::BAD_INPUT,
          fmt::format("--out '{}' exists and is not a directory; hint: choose a new path", out.string()),
          out.string(),
          {}};
    std::vector<std::string> existing;
    for (auto it = std::filesystem::directory_iterator(out, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      existing.push_back(it->path().filename().string());
    if (ec)
      return Error{
          Errc::IO, fmt::format("cannot list '{}': {}", out.string(), ec.message()), out.string(), {}};
    if (!existing.empty() && !opts.force)
      return Error{
          Errc::BAD_INPUT,
          fmt::format("--out '{}' exists and is not empty ({} entries); hint: choose a new directory or "
                      "pass --force to replace the checkpoint files in it",
                      out.string(), existing.size()),
          out.string(),
          {}};
    for (const auto& name : existing) {
      if (!is_checkpoint_file(name)) continue;
      const auto path = out / name;
      if (fs::ops().unlink(path.c_str()) != 0 && errno != ENOENT)
        return Error{Errc::IO,
                     fmt::format("cannot remove '{}': {}", path.string(), std::strerror(errno)),
                     path.string(),
                     {}};
    }
  } else {
    FP4FORGE_TRY(make_dirs(out));
  }
  // Lay every shard out first (the headers decide what a header-only checkpoint takes on disk).
  std::vector<std::pair<std::string, std::string>> metadata{{"format", "pt"}};
  if (opts.header_only) metadata.emplace_back(kSynthMetadataKey, kSynthHeaderOnly);
  std::vector<st::ShardLayout> layouts;
  std::uint64_t header_bytes = 0;
  for (const auto& shard : plan.shards) {
    std::vector<st::OutTensor> outs;
    for (const auto& t : plan.tensors)
      if (t.shard == shard) outs.push_back({t.name, DType::BF16, t.shape});
    FP4FORGE_ASSIGN_OR_RETURN(st::ShardLayout layout, st::layout_shard(std::move(outs), metadata));
    header_bytes += layout.header_bytes.size();
    layouts.push_back(std::move(layout));
  }
  // Free space check (the data, plus headers and small files).
  const std::uint64_t on_disk = opts.header_only ? header_bytes : plan.total_bytes + header_bytes;
  const std::uint64_t need = on_disk + (1u << 20);
  if (auto avail = fs::available_bytes(out); avail && *avail < need)
    return Error{Errc::IO,
                 fmt::format("not enough free space in '{}': need {}, {} available", out.string(),
                             format_bytes(need), format_bytes(*avail)),
                 out.string(),
                 {}};

  SynthReport rep;
  rep.out = out;
  rep.arch = plan.arch;
  rep.size = plan.size;
  rep.seed = opts.seed;
  rep.num_tensors = plan.tensors.size();
  rep.total_params = plan.total_params;
  rep.total_bytes = plan.total_bytes;
  rep.shards = plan.shards;
  rep.header_only = opts.header_only;
  rep.notes = plan.notes;
  rep.config_source = opts.config ? opts.config_source : std::string();
  rep.bytes_on_disk = on_disk;

  ProgressScope progress(opts.progress, fmt::format("synth {} {}", plan.arch, plan.size), plan.total_bytes,
                         plan.shards.size());
  std::vector<std::uint16_t> buf;
  for (std::size_t si = 0; si < plan.shards.size(); ++si) {
    const std::string& shard = plan.shards[si];
    FP4FORGE_ASSIGN_OR_RETURN(st::ShardWriter w, st::ShardWriter::create(out / shard, std::move(layouts[si])));
    progress.set_detail(shard);
    if (opts.header_only) {
      FP4FORGE_TRY(w.leave_data_sparse());
      progress.add(w.layout().file_size - w.layout().header_bytes.size());
    } else {
      FP4FORGE_TRY(write_values(w, opts.seed, buf, progress));
    }
    FP4FORGE_TRY(w.commit());
    progress.add(0, 1);
    rep.files.push_back(shard);
  }

  // Index (transformers: metadata + weight_map sorted by name).
  Json wm = Json::object();
  for (const auto& t : plan.tensors) wm[t.name] = t.shard;
  auto write_json = [&](const std::string& name, const Json& j) -> Status {
    FP4FORGE_TRY(fs::write_file_atomic(out / name, j.dump(2) + "\n"));
    rep.files.push_back(name);
    return {};
  };
  FP4FORGE_TRY(fs::write_file_atomic(
      out / "model.safetensors.index.json",
      st::index_text(wm, plan.total_bytes, st::IndexForm::TRANSFORMERS, plan.total_params)));
  rep.files.push_back("model.safetensors.index.json");
  FP4FORGE_TRY(write_json("config.json", plan.config));
  FP4FORGE_TRY(write_json("generation_config.json", plan.generation_config));
  if (!plan.processor_config.is_null())
    FP4FORGE_TRY(write_json("processor_config.json", plan.processor_config));
  // A release ships its tokenizer and chat template (doctor: missing-tokenizer is an error without them).
  for (const auto& [name, text] : {std::pair{"tokenizer.json", synth_detail::kTokenizerJson},
                                   std::pair{"tokenizer_config.json", synth_detail::kTokenizerConfigJson},
                                   std::pair{"chat_template.jinja", synth_detail::kChatTemplateJinja}}) {
    FP4FORGE_TRY(fs::write_file_atomic(out / name, text));
    rep.files.push_back(name);
  }
  progress.finish();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

namespace {
/** A checkpoint file's identity as clean() compares it; nullopt when it cannot be read (or is no checkpoint file). */
std::optional<std::tuple<std::uint64_t, std::uint64_t, std::int64_t>> identity(const std::filesystem::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return std::nullopt;
  return std::tuple{static_cast<std::uint64_t>(st.st_ino), static_cast<std::uint64_t>(st.st_size),
                    static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}
}  // namespace

SynthCleanup SynthCleanup::before(const std::filesystem::path& out) {
  SynthCleanup c;
  c.out_ = out;
  std::error_code ec;
  for (std::filesystem::path p = out; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (std::filesystem::exists(std::filesystem::symlink_status(p, ec))) break;
    c.top_created_ = p;
  }
  for (auto it = std::filesystem::directory_iterator(out, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_checkpoint_file(name)) continue;
    if (const auto id = identity(it->path()))
      c.before_.push_back({name, std::get<0>(*id), std::get<1>(*id), std::get<2>(*id)});
  }
  return c;
}

std::size_t SynthCleanup::clean() const noexcept {
  std::size_t removed = 0;
  try {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (auto it = std::filesystem::directory_iterator(out_, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!is_checkpoint_file(name)) continue;
      const auto id = identity(it->path());
      // What was there before and is unchanged is the user's, not this run's: kept.
      if (id && std::find(before_.begin(), before_.end(),
                          Before{name, std::get<0>(*id), std::get<1>(*id), std::get<2>(*id)}) != before_.end())
        continue;
      files.push_back(it->path());
    }
    for (const auto& f : files)
      if (fs::ops().unlink(f.c_str()) == 0) ++removed;
  } catch (...) {  // out of memory while listing: what was not removed stays
    return removed;
  }
  if (top_created_.empty()) return removed;
  // The folders synth created, innermost first, while empty (rmdir never removes what is not).
  for (std::filesystem::path p = out_;; p = p.parent_path()) {
    if (fs::ops().rmdir(p.c_str()) != 0 || p == top_created_ || p == p.parent_path()) break;
  }
  return removed;
}

nlohmann::ordered_json to_json(const SynthReport& r) {
  nlohmann::ordered_json j;
  j["ok"] = true;
  j["schema"] = "fp4forge.synth/1";
  j["out"] = r.out.string();
  j["arch"] = r.arch;
  j["size"] = r.size;
  j["seed"] = r.seed;
  j["tensors"] = r.num_tensors;
  j["params"] = r.total_params;
  j["bytes"] = r.total_bytes;
  j["shards"] = r.shards;
  j["files"] = r.files;
  j["seconds"] = r.seconds;
  j["header_only"] = r.header_only;
  j["config"] = r.config_source.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.config_source);
  j["bytes_on_disk"] = r.bytes_on_disk;
  j["notes"] = r.notes;
  return j;
}

std::string to_text(const SynthReport& r) {
  const std::string what = r.config_source.empty() ? fmt::format("{} {}", r.arch, r.size)
                                                    : fmt::format("{} (the geometry of {})", r.arch, r.config_source);
  // One unit family, counts with separators (issue 55 audit: "235093634560 params", "(853248 bytes)").
  std::string s = fmt::format("wrote {} checkpoint to {}: {} tensors, {} params, {} in {} shard(s) ({:.1f} s)\n",
                              what, r.out.string(), format_count(r.num_tensors), format_count(r.total_params),
                              format_bytes(r.total_bytes), r.shards.size(), r.seconds);
  if (r.header_only)
    s += fmt::format("  header-only: {} on disk; tensor data is sparse and reads as zeros (for inspect, doctor and "
                     "plan; not for quantize or serving)\n",
                     format_bytes(r.bytes_on_disk));
  for (const auto& n : r.notes) s += fmt::format("  note: {}\n", n);
  return s;
}

}  // namespace fp4forge
