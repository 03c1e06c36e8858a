#pragma once
// The geometry `fp4forge synth` lays a family out at: the built-in sizes (tiny, small, 8b) and any config.json of
// a synth family read back into the same record (--config). Internal to the model module (synth.cc and
// synth_geometry.cc).
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/registry.h"
#include "fp4forge/model/synth.h"

namespace fp4forge::synth_detail {

struct Vision {
  std::uint64_t H = 0, I = 0, N = 0, heads = 0, hd = 0, pos = 0, patch = 16;
};

struct Geo {
  std::uint64_t H = 0, N = 0, A = 0, KV = 0, d = 0, I = 0, V = 0, max_pos = 4096;
  std::uint64_t E = 0, Im = 0, topk = 0, Is = 0;
  std::uint64_t dg = 0, KVg = 0, sliding_window = 0, pattern = 6;               // Gemma-4
  std::uint64_t Hk = 0, Hv = 0, Dk = 0, Dv = 0, Kc = 4, interval = 4, mtp = 0;  // Qwen3.5
  bool tie = false;
  Vision vis;
  std::uint64_t shard_bytes = 0;
  std::vector<std::string> layer_types;  ///< from a config (--config); empty: by pattern / interval
  bool k_eq_v = true;                    ///< Gemma-4 attention_k_eq_v: full-attention layers have no v_proj
};


/** A release's shard limit (transformers' save_pretrained default, 5 GB): the 8b size and every --config. */
inline constexpr std::uint64_t kReleaseShardBytes = 5'000'000'000ULL;

/** BAD_INPUT: config.json's `key` `what` (a feature), which synth's `layout` does not write (named, never
 * approximated), with the hint to plan from the config alone. */
Error not_laid_out(std::string_view layout, std::string_view key, std::string_view what);
/** BAD_INPUT naming the first of `fields` (config key, value) that is not positive: a zero would lay out empty
 * tensors. */
Status require_positive(std::string_view layout,
                        std::initializer_list<std::pair<std::string_view, std::int64_t>> fields);

/** The built-in geometry of (arch, size); both already checked against synth_archs() / synth_sizes(). */
Geo geometry(std::string_view arch, std::string_view size);

/** A config's geometry and the synth arch it is (llama, qwen3-moe, gemma4-dense/-moe, qwen3_5-dense/-moe). */
struct ConfigGeometry {
  std::string arch;
  Geo geo;
};

/**
 * The geometry of a real config.json (layer counts, widths, heads, experts, vocabulary, layer types, vision tower):
 * a checkpoint at the config's own size. The config is read once; its family decides the arch, and a non-empty
 * `arch` must agree (USAGE). BAD_INPUT for a family synth does not lay out, or a config synth cannot lay out
 * faithfully (a feature of the family the layout does not write, e.g. Gemma-4 per-layer inputs or KV-shared
 * layers), naming the key; never a silent approximation.
 */
Result<ConfigGeometry> geometry_from_config(std::string_view arch, const ModelInfo& m,
                                            const nlohmann::ordered_json& config);

/** layer_types of a geometry: as the config gave them, else by pattern (Gemma-4: a full-attention layer every
 * `pattern` and the last) or interval (Qwen3.5: every `interval`-th layer full attention). */
std::vector<std::string> gemma4_layer_types(const Geo& g);
std::vector<std::string> qwen_layer_types(const Geo& g);

// ---- the JSON files of the built-in layouts (synth_config.cc) -------------------------------------------------
nlohmann::json gemma4_config(const Geo& g, bool moe);
nlohmann::json qwen3_5_config(const Geo& g, bool moe);
nlohmann::json llama_config(const Geo& g);
nlohmann::json qwen3_moe_config(const Geo& g);
nlohmann::json gemma4_processor(const Geo& g);
nlohmann::json qwen_processor(const Geo& g);
/** generation_config.json of a config: its bos / eos / pad token ids, as transformers derives it. */
nlohmann::json generation_config(const nlohmann::json& config);

/** True for the decoder-only registry families laid out by one rule over their registry row (synth_decoder.cc):
 * Mistral, Phi-3, Qwen2, Qwen3, Mixtral, Qwen2-MoE, DeepSeek-V2/V3, GLM-4.5 MoE. */
bool registry_layout_family(Family f) noexcept;
std::span<const Family> registry_layout_families() noexcept;
/** The tensors of such a family at the config's geometry, in module order; MTP layers carry the group "mtp" in
 * `shard` (their own file). BAD_INPUT naming a config feature the rule does not write (a tower, a bias, the
 * DeepSeek-V3.2 indexer, another class of the family) or a width that is not positive. */
Result<std::vector<SynthTensor>> registry_layout(const ModelInfo& m, const nlohmann::ordered_json& config);

}  // namespace fp4forge::synth_detail
