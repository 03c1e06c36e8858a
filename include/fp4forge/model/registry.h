#pragma once
/**
 * The architecture registry: the one place that knows model families (docs/DEVELOPING.md, "The
 * architecture registry"). Every family is one row of data, read by classify, quantize, verify, diff,
 * doctor, plan, inspect and synth:
 *
 * - how to recognise it: exact `model_type` values (top level or `text_config`) and architecture strings;
 * - what vLLM registers for it (main-model classes, MTP classes, the multimodal wrapper);
 * - where its text stack lives in tensor names (`model.`, `model.language_model.`,
 *   `language_model.model.`), which sequence mixer its hybrid layers use, how its MTP layers are stored;
 * - which config keys give the routed-expert and shared-expert widths, which layers are MoE, and how
 *   its fused gate/up experts are ordered (concatenated or interleaved);
 * - whether vLLM can load its experts quantized (a refusal reason when it cannot).
 *
 * Adding a family: a `Family` value, a row in `src/model/registry.cc`, and a fixture in tests/data.
 * Unknown families still work by tensor name (classify is name-driven); checks that need a family
 * rule then warn that they could not check.
 */
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/util/json_get.h"

namespace fp4forge {

enum class Family {
  LLAMA, MISTRAL, MIXTRAL, PHI3, QWEN2, QWEN2_MOE, QWEN3, QWEN3_MOE, QWEN3_NEXT, QWEN3_5, QWEN3_5_MOE,
  QWEN3_VL, QWEN3_VL_MOE, GEMMA3, GEMMA4, DEEPSEEK_V2, DEEPSEEK_V3, GLM4_MOE, LLAMA4, GPT_OSS,
  GRANITE_MOE_HYBRID, MISTRAL3, UNKNOWN
};

/** How multi-token-prediction layers are stored. */
enum class MtpForm : std::uint8_t {
  NONE,
  MTP_MODULE,    ///< top-level `mtp.*` (Qwen3-Next, Qwen3.5/3.6): mtp.fc, mtp.layers.k.*, norms
  EXTRA_LAYERS,  ///< decoder layers `layers.[N, N + num_nextn_predict_layers)` (DeepSeek-V3, GLM-4.5)
};

/** The sequence mixer of a hybrid family's non-attention layers. */
enum class Mixer : std::uint8_t { NONE, GATED_DELTANET, MAMBA2 };

/** How a fused gate/up expert tensor orders its 2·I outputs. */
enum class GateUpOrder : std::uint8_t {
  CONCATENATED,  ///< gate = outputs [0, I), up = [I, 2I)
  INTERLEAVED,   ///< gate = even outputs, up = odd (gpt-oss)
};

/** Which layers of a MoE family carry routed experts (config keys read as the family's loader does). */
enum class MoeLayers : std::uint8_t {
  NONE,           ///< dense family
  ALL,            ///< every decoder layer (Mixtral, gpt-oss, Qwen3.5-MoE, Granite, Gemma-4 with enable_moe_block)
  SPARSE_STEP,    ///< Qwen2/3-MoE: decoder_sparse_step and mlp_only_layers
  FIRST_K_DENSE,  ///< DeepSeek / GLM: first_k_dense_replace, moe_layer_freq
  INTERLEAVE,     ///< Llama-4: interleave_moe_layer_step (or an explicit moe_layers list)
};

struct FamilySpec {
  Family family = Family::UNKNOWN;
  std::string_view id;       ///< stable id in --json ("qwen3_moe")
  std::string_view display;  ///< "Qwen3-MoE"
  std::vector<std::string_view> model_types;        ///< exact model_type values (top level or text_config)
  std::vector<std::string_view> architectures;      ///< main-model classes vLLM registers
  std::vector<std::string_view> mtp_architectures;  ///< vLLM's speculative-decoding (MTP) classes
  std::string_view wrapper_architecture;            ///< the multimodal wrapper class ("" if none)
  std::vector<std::string_view> text_prefixes;      ///< text-stack tensor prefixes, preferred first
  Mixer mixer = Mixer::NONE;
  /** The mixer's projections may be quantized by schemes of at least this many bits (0: never). GatedDeltaNet:
   * 8 (kept at 4 bits, architectures.md §5.3); Mamba-2: never. */
  int mixer_quant_bits = 0;
  /** Leaf modules vLLM cannot load block-quantized (GatedDeltaNet `in_proj_ba` has no blockwise FP8): kept
   * under FP8_BLOCK. */
  std::vector<std::string_view> no_block_quant;
  bool attn_output_gate = false;                    ///< default of attn_output_gate (q_proj doubled)
  std::int64_t full_attention_interval = 0;         ///< default when layer_types is absent (hybrids)
  MtpForm mtp = MtpForm::NONE;
  bool tie_default = false;                         ///< tie_word_embeddings when the config omits it
  MoeLayers moe_layers = MoeLayers::NONE;
  std::vector<std::string_view> dense_intermediate_keys;   ///< dense MLP width, first present wins
  std::vector<std::string_view> expert_intermediate_keys;  ///< routed-expert width
  std::vector<std::string_view> shared_intermediate_keys;  ///< shared-expert width ("" = none)
  std::string_view shared_count_key;  ///< shared width = this count × expert width (DeepSeek, GLM)
  std::vector<std::string_view> num_experts_keys;
  GateUpOrder gate_up_order = GateUpOrder::CONCATENATED;
  /** Non-empty: vLLM cannot load this family's routed experts as compressed-tensors NVFP4; quantize
   * refuses to quantize them and says why. */
  std::string_view experts_refusal;
  bool mla = false;  ///< multi-head latent attention (q_a/q_b/kv_a/kv_b projections)
  /** Leaf names vLLM's expert mapping expects per expert (gate, up, down): fused experts are split into
   * `<key>.<e>.<leaf>` with these (Mixtral: w1, w3, w2). */
  std::array<std::string_view, 3> expert_leaves{"gate_proj", "up_proj", "down_proj"};
  /** Module-path rewrites vLLM applies when it matches `ignore` (checkpoint component -> vLLM prefix
   * component; Granite's `mamba` mixer is prefixed `mixer`). Kept modules under the first are also
   * listed under the second. */
  std::vector<std::pair<std::string_view, std::string_view>> ignore_aliases;
};

/** A vLLM packed (fused-at-load) layer: its members share one global scale (R1). */
struct FusedRule {
  std::string_view kind;                   ///< "qkv", "gate_up", "q_a_kv_a", "w1_w3", "in_proj_qkvz", ...
  std::vector<std::string_view> members;  ///< sibling leaf names, in canonical order
  /** The leaf vLLM names the fused layer with (`<parent>.<vllm_name>`: "qkv_proj", "gate_up_proj",
   * "fused_qkv_a_proj", ...; the key of its packed_modules_mapping); "" where the members load into FusedMoE
   * (Mixtral's w1/w3), which has no Linear of its own. */
  std::string_view vllm_name;
};

/** vLLM's packed_modules_mapping entries that fuse sibling checkpoint modules, for every family. */
std::span<const FusedRule> fused_rules() noexcept;

/** The vLLM fused-layer leaf of a fused-set kind (FusedRule::vllm_name; Gemma-4's "qk" loads as "qkv_proj");
 * "" for an unknown kind or one loaded into FusedMoE. */
std::string_view vllm_fused_leaf(std::string_view kind) noexcept;

/** Every registered family, in a stable order (UNKNOWN excluded). */
std::span<const FamilySpec> families() noexcept;

/** The row of `f`; the UNKNOWN row (empty lists) for Family::UNKNOWN. */
const FamilySpec& family_spec(Family f) noexcept;

/** "gemma4", "qwen3_5", ..., "unknown". */
std::string_view family_name(Family f) noexcept;

/**
 * The family of a config, by exact match (never by prefix): the top-level model_type, then the
 * architecture, then the text model_type. When the wrapper's family and the text config's family differ
 * and the text family registers the config's architecture, the text family wins (a Qwen3.5 wrapper
 * around a MoE text config).
 */
Family detect_family(std::string_view model_type, std::string_view text_model_type,
                     std::string_view architecture) noexcept;

/** The first of `keys` present as an integer in `j` (0 when none). */
std::int64_t first_int(const nlohmann::ordered_json& j, std::span<const std::string_view> keys);

/** True when decoder layer `i` of a `num_layers`-layer text config carries routed experts (the family's
 * MoeLayers rule on the text config). */
bool layer_is_moe(const FamilySpec& spec, const nlohmann::ordered_json& text, std::int64_t i,
                  std::int64_t num_layers);

/** The names vLLM gives `module` when it matches `ignore` (the family's ignore_aliases applied), not
 * including `module` itself; empty for most families. */
std::vector<std::string> vllm_ignore_aliases(const FamilySpec& spec, std::string_view module);

/** True when `a` is one of the architectures vLLM registers for some family (main or MTP). */
bool vllm_registers(std::string_view a) noexcept;

}  // namespace fp4forge
