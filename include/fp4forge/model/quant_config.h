#pragma once
/**
 * compressed-tensors `quantization_config` (nvfp4a16-format.md §4): parsing, scheme detection and
 * `ignore` matching exactly as vLLM / compressed-tensors read them.
 *
 * - parse_quant_config() is strict about types (a key of the wrong JSON type is BAD_INPUT naming its
 *   key path, e.g. "quantization_config.config_groups.group_0.weights.num_bits") and lenient about
 *   extra keys (vLLM ignores them too). It never guesses: a missing field stays empty / nullopt.
 * - detect_scheme() names the scheme of one config group the way vLLM's detectors would select it
 *   (`_is_fp4a16_nvfp4`, `_is_fp4a4_nvfp4`, `_is_fp8_w8a8`, `_is_wNa16_group_channel`, ...). A group it
 *   cannot name is Scheme::UNKNOWN with the reason, never approximated.
 * - IgnoreMatcher matches module names like CT `match_name` / vLLM `check_equal_or_regex_match`: an
 *   entry is an exact name, or `re:` + a regex applied with Python `re.match` semantics (anchored at
 *   the start only, so `re:.*router` matches `model.layers.0.router.proj`). vLLM's fused-layer rule
 *   (`should_ignore_layer`: all shards of a fused layer must agree) is `vllm_should_ignore()`.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include "fp4forge/util/regex.h"
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/codec/observer.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/core/error.h"

namespace fp4forge {

/** `weights` / `input_activations` / `output_activations` of a config group (CT QuantizationArgs). */
struct QuantArgs {
  std::optional<std::int64_t> num_bits;
  std::string type;      ///< "float", "int" ("" when absent)
  std::string strategy;  ///< "tensor_group", "group", "channel", "tensor", "block", "token", ...
  std::optional<std::int64_t> group_size;
  std::optional<bool> symmetric;
  std::string dynamic;   ///< "false", "true", "local" ("" when absent)
  std::string observer;
  bool observer_kwargs = false;  ///< a non-empty observer_kwargs object (observer defaults changed)
  std::string scale_dtype;
  std::vector<std::int64_t> block_structure;
};

struct ConfigGroup {
  std::string name;
  std::vector<std::string> targets;
  std::optional<QuantArgs> weights;
  std::optional<QuantArgs> input_activations;   ///< nullopt when null/absent
  std::optional<QuantArgs> output_activations;  ///< nullopt when null/absent
  std::string format;  ///< per-group format ("" when absent)
};

/** Schemes vLLM can select, by name. */
enum class Scheme {
  NVFP4A16,     ///< weight-only NVFP4 (fp4forge's default scheme; it writes and verifies four more)
  NVFP4,        ///< NVFP4 W4A4 (input_activations float 4-bit tensor_group)
  MXFP4A16,     ///< MX FP4 weight-only (group 32, E8M0 scales)
  MXFP4,        ///< MX FP4 W4A4
  FP8_W8A8,     ///< FP8 weights and activations (static or dynamic, per tensor/channel/block)
  FP8_W8A16,    ///< FP8 weight-only
  WNA16_INT,    ///< integer weight-only (W4A16 / W8A16, group or channel)
  W8A8_INT,     ///< INT8 weights and activations
  UNKNOWN,
};
std::string_view scheme_name(Scheme s) noexcept;  ///< "NVFP4A16", "NVFP4", ..., "unknown"

struct SchemeInfo {
  Scheme scheme = Scheme::UNKNOWN;
  std::string detail;  ///< e.g. "int 4-bit group 128" or why it is unknown
};

/** The scheme of one group (global `format` is used when the group has none). */
SchemeInfo detect_scheme(const ConfigGroup& g, std::string_view global_format);

/**
 * The preset name of one group, the one spelling every command prints (inspect, verify, diff):
 * NVFP4A16, NVFP4, MXFP4A16, MXFP4, FP8_DYNAMIC / FP8_BLOCK / FP8 (static), FP8A16, W4A16 / W8A16 (integer
 * weight-only, by num_bits), W8A8-INT8, or "unknown".
 */
std::string scheme_label(const ConfigGroup& g, std::string_view global_format);

/**
 * The fp4forge scheme (one of the five presets quantize writes) a group is named as: scheme_label() equal
 * to the preset (NVFP4A16, MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16). The label names the family of the
 * preset only; whether every field is the preset's is scheme_mismatches(). BAD_INPUT naming the label
 * (NVFP4 W4A4, static FP8, W8A16, unknown ...) when the group is none of them.
 */
Result<QuantScheme> quant_scheme_of(const ConfigGroup& g, std::string_view global_format);

/**
 * Why a group is not exactly what ct_quant_config(s) writes, one reason per mismatching field that vLLM
 * reads to pick and build its kernel (empty = it is): `format`; weights `num_bits`, `type`, `strategy`,
 * `group_size`, `block_structure` (when the preset has one), `symmetric`, `dynamic`; `input_activations`
 * present or null as the preset, and then its `num_bits`, `type`, `strategy`, `group_size`, `dynamic`,
 * `symmetric`. Cosmetic fields (`observer`, `observer_kwargs`, `scale_dtype`, `actorder` null) are not
 * compared.
 */
std::vector<std::string> scheme_mismatches(QuantScheme s, const ConfigGroup& g, std::string_view global_format);

/** scheme_mismatches(QuantScheme::NVFP4A16, g, global_format). */
std::vector<std::string> nvfp4a16_mismatches(const ConfigGroup& g, std::string_view global_format);

struct QuantConfig {
  std::string quant_method;         ///< "compressed-tensors" for CT
  std::string format;               ///< global format ("" when absent)
  std::string quantization_status;  ///< "compressed", "frozen", ...
  std::string version;
  std::vector<ConfigGroup> groups;  ///< config_groups in file order
  std::vector<std::string> ignore;
  bool kv_cache_scheme = false;     ///< kv_cache_scheme present and not null
  bool sparsity_config = false;     ///< sparsity_config present, non-null and non-empty
  bool transform_config = false;    ///< transform_config present, non-null and non-empty
};

/**
 * Parses a `quantization_config` object. `key_path` prefixes every key in error messages.
 * BAD_INPUT when `qc` or a known key has the wrong JSON type.
 */
Result<QuantConfig> parse_quant_config(const nlohmann::ordered_json& qc,
                                       std::string_view key_path = "quantization_config");

/** The scheme labels of every group (scheme_label), sorted, unique, joined by '+': "NVFP4A16",
 * "FP8_DYNAMIC+W4A16"; "none" without groups. The one spelling verify's and diff's scheme lines print. */
std::string scheme_labels(const QuantConfig& qc);

/** The compressed-tensors version string fp4forge writes (compressed-tensors 0.18, format spec §4.1). */
inline constexpr std::string_view kCompressedTensorsVersion = "0.18.0";

/**
 * The `quantization_config` fp4forge writes for scheme `s`, as compressed-tensors 0.18 serializes the
 * preset (keys sorted, as transformers saves config.json; one config group `group_0` targeting
 * `Linear`, docs/schemes.md), with `ignore` as given (the on-disk module names). Parsed back by
 * parse_quant_config, detect_scheme/scheme_label name it as the preset. The weights' `observer` is the
 * name llm-compressor registers for `observer` (codec/observer.h; `memoryless_minmax` by default).
 */
nlohmann::ordered_json ct_quant_config(QuantScheme s, const std::vector<std::string>& ignore,
                                       Observer observer = Observer::MINMAX);

/** One config group of a multi-group (mixed-precision) config: its name, preset, observer and targets. */
struct CtGroupSpec {
  std::string name;  ///< "group_0", ...
  QuantScheme scheme = QuantScheme::NVFP4A16;
  Observer observer = Observer::MINMAX;
  std::vector<std::string> targets;  ///< "Linear", exact module names, `re:` patterns
};

/**
 * The `quantization_config` of several groups, as llm-compressor writes a mixed config (docs/mixed-precision.md
 * §1): every group is its preset exactly as the one-group form writes it (its own `format` included) with the
 * given targets, groups in name order (json.dump sort_keys), and the top-level `format` the one every group
 * shares, else `mixed-precision`. One group {"group_0", s, observer, ["Linear"]} is ct_quant_config(s, ...)
 * byte for byte.
 */
nlohmann::ordered_json ct_quant_config(std::span<const CtGroupSpec> groups, const std::vector<std::string>& ignore);

/**
 * The one lookup of a checkpoint's quantization config, as vLLM finds it (every command uses it):
 * 1. config.json's `quantization_config`, 2. its `compression_config` (the older name, still accepted),
 * 3. `text_config.quantization_config` of a multimodal wrapper. vLLM detects 3 from PR #24131 (merged
 * 2025-09-10, commit f17a6aa4e: "Check the text config as well for multi-modal models"; before it only 1 and 2,
 * so 3 needs `--quantization` there) and builds it since PR #7187 (`get_quant_config`); transformers does not
 * hoist it (docs/quant-config-lookup.md). A null value counts as absent; any other JSON type is returned for the
 * caller's typed parse to refuse. `key_out` gets the dotted key ("quantization_config", "compression_config",
 * "text_config.quantization_config"), `path_out` the same as JSON object keys (for edits).
 */
const nlohmann::ordered_json* find_quant_config(const nlohmann::ordered_json& config,
                                                std::string* key_out = nullptr,
                                                std::vector<std::string>* path_out = nullptr);

/** One compiled `ignore` list. */
class IgnoreMatcher {
 public:
  /** Compiles every entry with the linear-time engine (util/regex.h: Python re syntax less backreferences
   * and lookaround). An entry it cannot compile is BAD_INPUT naming the entry index. */
  static Result<IgnoreMatcher> compile(const std::vector<std::string>& entries);

  std::size_t size() const noexcept { return entries_.size(); }
  const std::string& entry(std::size_t i) const { return entries_[i].text; }
  bool is_regex(std::size_t i) const { return entries_[i].regex.has_value(); }

  /** True when entry `i` matches `name` (exact, or re.match semantics). */
  bool entry_matches(std::size_t i, std::string_view name) const;
  /** True when any entry matches `name`. */
  bool matches(std::string_view name) const;
  /** Index of the first matching entry, or -1. */
  long first_match(std::string_view name) const;

 private:
  struct Entry {
    std::string text;
    std::optional<Regex> regex;
  };
  std::vector<Entry> entries_;
};


/**
 * vLLM `should_ignore_layer` for one fused layer whose shards are `shard_names` (on-disk module
 * names): the layer is ignored when its shards are; shards that disagree are the vLLM load error
 * "Found a different quantization schemes ..." (returned as CHECK_FAILED naming the shards).
 * A single-element list is the unfused rule.
 */
Result<bool> vllm_should_ignore(const IgnoreMatcher& ignore, const std::vector<std::string>& shard_names);

/**
 * Which config group vLLM applies to a layer, as compressed-tensors' `CompressedTensorsConfig` does for a
 * multi-group (mixed-precision) checkpoint (docs/mixed-precision.md cites the code read):
 * - the targets of every group form one map in file order, keyed by the target string (a target named by two
 *   groups keeps its first position and takes the later group: Python's dict assignment);
 * - `find_matched_target`: the first target equal to `layer_name` or whose `re:` pattern matches it (re.match);
 *   else the first target that is a case-insensitive substring of `class_name` (`Linear` matches every
 *   `*ParallelLinear`; a `re:` target is matched against the class name); else, for a fused layer, every
 *   shard of `shard_names` must match a target by name and the first shard's target is used;
 * - routed experts: vllm_moe_group_of.
 * Ignore is decided before this (vllm_should_ignore). Returns the group's index in `qc.groups` and the target
 * that matched; group -1 when no target matches (vLLM has no scheme for the layer: older releases fail with a
 * KeyError, newer ones leave it unquantized; inferred from two index copies, docs/mixed-precision.md).
 * BAD_INPUT when a `re:` target cannot be compiled.
 */
struct GroupMatch {
  long group = -1;     ///< index into QuantConfig::groups, -1 = none
  std::string target;  ///< the target that matched
};

/** vllm_group_of / vllm_moe_group_of with the target map compiled once (a checkpoint's thousands of modules). */
class GroupMatcher {
 public:
  /** BAD_INPUT when a `re:` target cannot be compiled. */
  static Result<GroupMatcher> compile(const QuantConfig& qc);
  /** vllm_group_of for one layer. */
  GroupMatch match(std::string_view layer_name, std::string_view class_name,
                   const std::vector<std::string>& shard_names = {}) const;
  /** vllm_moe_group_of for one experts module. */
  Result<GroupMatch> moe(const IgnoreMatcher& ignore, std::string_view experts) const;
  /** The group bound to the `Linear` target, -1 without one. */
  long linear_group() const noexcept { return linear_; }

 private:
  struct Target {
    std::string text, lower;
    long group = -1;
    std::optional<Regex> re;
  };
  std::vector<Target> targets_;
  std::vector<std::string> names_;
  long linear_ = -1;
  bool has_fused_moe_ = false;
};
Result<GroupMatch> vllm_group_of(const QuantConfig& qc, std::string_view layer_name, std::string_view class_name,
                                 const std::vector<std::string>& shard_names = {});

/**
 * The group vLLM's `get_moe_method` applies to the routed experts under `experts` ("model.layers.3.mlp.experts"):
 * it looks up `<experts>.0.gate_proj`, `.0.up_proj` and `.0.down_proj` one by one (ignored ones have no scheme)
 * by name, then by the class name `FusedMoE`, which a `Linear` target also selects (vLLM adds a `FusedMoE` entry
 * bound to `Linear`'s group after the others unless one exists). The three must agree, else CHECK_FAILED with
 * vLLM's "All MoE projections need to have same quantization scheme". group -1: ignored, or no target.
 */
Result<GroupMatch> vllm_moe_group_of(const QuantConfig& qc, const IgnoreMatcher& ignore, std::string_view experts);

}  // namespace fp4forge
