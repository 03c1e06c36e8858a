#pragma once
/**
 * The quantization plan: a pure function from (config, tensor list, options) to every decision and
 * every output byte position, made before any byte is written (nvfp4a16-format.md §3-§5, §10;
 * architectures.md §5.3).
 *
 * - Every source tensor gets a decision (quantize / keep / split) with its role and the reason: the
 *   policy rule, a user pattern (`--ignore`, `--force-quantize`) or the scheme's shape rule
 *   (shape_rule: K a multiple of the scheme's group, 16 for NVFP4A16, 32 MXFP4A16, 128 W4A16; FP8_BLOCK's K
 *   and N multiples of 128).
 * - Fused 3-D experts are split per expert in the orientation their shapes show (model/experts.h);
 *   ambiguous shapes and shapes that disagree with E / expert width / hidden_size are refused.
 * - Fused sets (R1) share one global scale and are all quantized or all kept; a user pattern that
 *   splits a set is an error naming the set. The experts of one layer are all quantized or all kept.
 * - Output shards mirror the input shard names (R5); each shard is laid out as the reference writer
 *   does (st::layout_shard), so every offset is final.
 * - The new config.json keeps the source config (key order included) and adds `quantization_config`
 *   (§4.4) with the expanded, explicit `ignore` list (R2).
 *
 * Patterns: an exact module name, or `re:REGEX` (ECMAScript), matched like compressed-tensors:
 * `re.match`, anchored at the start only. Modules are the tensor name without its final `.weight`;
 * a fused 3-D expert tensor is matched by its own name and by each per-expert module it splits into.
 */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/codec/observer.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/experts.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/tensor_role.h"
#include "fp4forge/quantize/name_pattern.h"
#include "fp4forge/quantize/recipe.h"
#include "fp4forge/safetensors/shard_writer.h"

namespace fp4forge::quant {

struct PlanOptions {
  std::vector<std::string> ignore;          ///< keep these modules (exact name or `re:REGEX`)
  std::vector<std::string> force_quantize;  ///< quantize these even against the policy (loud warning)
  bool strict = false;                      ///< a policy-quantized weight whose shape misses the scheme's rule is an error
  /** The default scheme and weight observer, parsed at the edge (the CLI, a recipe): the library never re-reads
   * their text. observer nullopt: the scheme's default_observer (codec/observer.h). */
  QuantScheme scheme = QuantScheme::NVFP4A16;
  std::optional<Observer> observer;
  /** Per-module schemes (quantize/recipe.h): the first rule that selects a module gives its scheme, `scheme`
   * the rest. Fused partners and a layer's routed experts must get one scheme (USAGE naming the rule). */
  std::vector<SchemeRule> scheme_for;
  ExpertLayoutOptions experts;              ///< settles an ambiguous fused-expert orientation
  /** An FP8 source weight whose target is its own FP8 form (block 128x128 -> FP8_BLOCK; channel -> FP8_DYNAMIC;
   * one scale per tensor -> either, the scale repeated) is passed through: payload bytes copied, the scale
   * renamed (fp8_passthrough_form). false: re-encoded from its bf16 expansion like any other weight. */
  bool fp8_passthrough = true;
  /** Plan a subset whose share may be nothing (the MTP splice plans the MTP tensors alone to learn their
   * ignore entries). A quantize run never sets it: "nothing quantized" is refused there. */
  bool allow_nothing_quantized = false;
  /** quantize --mtp-from: the MTP layers the source lacks are spliced into the output (quantize/mtp_splice.h), so
   * their absence from the source is no warning about the output. */
  bool mtp_spliced = false;
};

/** One source tensor, as the planner sees it. */
struct SourceTensor {
  std::string name;
  std::size_t shard = 0;  ///< index into PlanInput::shard_names
  DType dtype = DType::BF16;
  std::vector<std::uint64_t> shape;
};

/** Everything make_plan reads: no file system. */
struct PlanInput {
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  std::vector<std::string> shard_names;
  std::optional<std::string> index_file;  ///< the source index name, if any
  std::vector<SourceTensor> tensors;      ///< any order; the plan sorts by name
  /** Per source shard, its `__metadata__` (copied to the output shard). Empty vector = none. */
  std::vector<std::vector<std::pair<std::string, std::string>>> shard_metadata;
  std::vector<std::string> notes;  ///< Checkpoint::notes() messages, repeated as plan warnings
  /** hf_quant_config.json (ModelOpt), when the checkpoint has one: read by FP8 source detection. */
  std::optional<nlohmann::ordered_json> hf_quant_config;
};

/** Builds the planner input from an opened checkpoint (config, tensors, shards; no other file). */
PlanInput plan_input(const Checkpoint& ckpt);
/** plan_input plus the files FP8 source detection reads (hf_quant_config.json). */
Result<PlanInput> read_plan_input(const Checkpoint& ckpt);

enum class Action : std::uint8_t {
  QUANTIZE,  ///< a 2-D `.weight`, replaced by the scheme's tensors (codec/scheme.h linear_tensors)
  KEEP,      ///< copied bit for bit
  SPLIT,     ///< a fused 3-D expert tensor, split per expert and each part quantized
};
std::string_view action_name(Action a) noexcept;  ///< "quantize", "keep", "split"

/** Which rule decided. */
enum class Rule : std::uint8_t {
  POLICY,          ///< the default policy for the role
  USER_IGNORE,     ///< --ignore
  USER_FORCE,      ///< --force-quantize
  K_NOT_ALIGNED,   ///< in_features not a multiple of the scheme's K multiple (model/scheme_policy.h)
  N_NOT_ALIGNED,   ///< out_features not a multiple of the scheme's N multiple (FP8_BLOCK: 128)
  FUSED_SET,       ///< kept because another member of its fused set must be kept
  NOT_A_MATRIX,    ///< not a 2-D `.weight` (bias, scalar, conv, 1-D parameter, ...)
};
std::string_view rule_name(Rule r) noexcept;  ///< "policy", "user_ignore", ..., "k_not_aligned"
/** rule_name with the scheme's multiple spelled out, as --json shows it: "k_not_multiple_of_16" (NVFP4A16),
 * "k_not_multiple_of_128", "n_not_multiple_of_128"; rule_name otherwise. */
std::string rule_label(Rule r, QuantScheme s);

struct TensorDecision {
  std::string name;  ///< source tensor name
  std::size_t shard = 0;
  DType dtype = DType::BF16;
  std::vector<std::uint64_t> shape;
  TensorClass cls;   ///< role, layer, expert, module, param
  Action action = Action::KEEP;
  Rule rule = Rule::POLICY;
  std::string reason;   ///< one line, e.g. "router: never quantized (vLLM builds it unquantized)"
  std::string pattern;  ///< the user pattern that decided, if any
  bool linear_like = false;  ///< a 2-D `.weight` (listed in `ignore` when kept)
  QuantScheme scheme = QuantScheme::NVFP4A16;  ///< the scheme it was decided under (a recipe's choice, else --scheme)
  /** An FP8 source weight (index into QuantPlan::fp8_source->weights), planned as its bf16 expansion:
   * `dtype` is BF16, quantized from or written as the dequantized values. kNoFp8 otherwise. */
  std::size_t fp8 = kNoFp8;
  static constexpr std::size_t kNoFp8 = ~std::size_t{0};
};

/** One 2-D weight to quantize (a plain `.weight`, or one expert's part of a fused 3-D tensor). */
struct QuantUnit {
  std::string module;     ///< output module name, e.g. "model.layers.0.self_attn.q_proj"
  std::size_t decision = 0;  ///< index into QuantPlan::decisions (the source tensor)
  std::size_t shard = 0;  ///< source shard = output shard (R5)
  DType dtype = DType::BF16;
  std::uint64_t rows = 0, cols = 0;  ///< N (out_features), K (in_features)
  MatrixSlice slice;                 ///< the [N, K] matrix inside the source tensor (elements)
  Role role = Role::OTHER;           ///< EXPERT_GATE/UP/DOWN for split experts
  std::size_t group = 0;             ///< index into QuantPlan::groups
  std::size_t scheme = 0;            ///< index into QuantPlan::schemes
  bool forced = false;
  /** An FP8 source weight written as it is stored (PlanOptions::fp8_passthrough): its payload copied, its scale
   * in the source's dtype (`scale_dtype`), never re-encoded. */
  bool passthrough = false;
  DType scale_dtype = DType::BF16;   ///< dtype of the scale written for a passthrough unit
  /** The dtype linear_tensors / linear_bytes take for the unit's outputs: a passthrough unit's scale dtype, else
   * the weight's (FP8 and W4A16 store their scales in it). */
  DType out_dtype() const noexcept { return passthrough ? scale_dtype : dtype; }               ///< quantized through --force-quantize
  /** Where the unit's output tensors start in its shard's data section (from the layout): the payload
   * (`weight_packed`, or FP8's `weight`), `weight_scale`, `weight_global_scale` (NVFP4A16) and
   * `weight_shape` (W4A16). */
  std::uint64_t packed_begin = 0, scale_begin = 0, global_scale_begin = 0, shape_begin = 0;
};

/** Units that share one global scale: a fused set (R1), or a single unit. Schemes without global scales
 * (all but NVFP4A16) have one group per unit. */
struct ScaleGroup {
  std::string name;  ///< the parent module for a fused set, the module for a singleton
  std::string kind;  ///< "qkv", "qk", "gate_up", "q_a_kv_a", "w1_w3", ... or "single"
  std::vector<std::size_t> units;
  std::uint64_t source_bytes = 0;
  std::size_t scheme = 0;  ///< index into QuantPlan::schemes (a group's units share it)
};

/** One scheme of the plan: one config group of the output (several with --scheme-for / --recipe). */
struct PlanScheme {
  std::string group;  ///< config group name: "group_0" (the default scheme), "group_1", ...
  QuantScheme scheme = QuantScheme::NVFP4A16;
  Observer observer = Observer::MINMAX;
  std::vector<std::string> rules;    ///< origins of the rules that chose it; empty for the default
  std::vector<std::string> targets;  ///< the group's targets as written ("Linear", exact names, `re:` patterns)
  std::uint64_t units = 0;           ///< quantized 2-D weights
  std::uint64_t params = 0;          ///< their elements
  /** 2-D weights this group's scheme was chosen for that stay unquantized, by rule: K_NOT_ALIGNED / N_NOT_ALIGNED
   * (a shape the scheme cannot take) and FUSED_SET (kept with a member of its fused set). Said in the summary's
   * line of the group and in --json (`kept`, keyed by rule_label). */
  std::map<Rule, std::uint64_t> kept;
};

/** PACKED is the payload of any scheme (`weight_packed`, or FP8's `weight`); SHAPE is W4A16's `weight_shape`. */
enum class OutKind : std::uint8_t { PASSTHROUGH, PACKED, SCALE, GLOBAL_SCALE, SHAPE };

/** What produces one output tensor: a source tensor (PASSTHROUGH) or a quant unit. */
struct OutSource {
  OutKind kind = OutKind::PASSTHROUGH;
  std::size_t index = 0;  ///< decision index (PASSTHROUGH) or unit index
};

struct OutShard {
  std::string name;         ///< file name (same as the source shard)
  st::ShardLayout layout;   ///< final header and offsets
  std::vector<OutSource> sources;  ///< parallel to layout.tensors
  std::vector<std::pair<std::string, std::string>> metadata;
};

struct RoleCount {
  std::uint64_t quantized = 0;  ///< quantized 2-D weights (split experts count per expert part)
  std::uint64_t kept = 0;       ///< tensors kept
  std::uint64_t kept_linear = 0;  ///< kept 2-D weights (Linear-like modules)
};

struct QuantPlan {
  ModelInfo info;
  std::string scheme = "nvfp4a16";        ///< quant_scheme_name(quant_scheme); "mixed" with several schemes
  QuantScheme quant_scheme = QuantScheme::NVFP4A16;  ///< the default scheme (--scheme)
  Observer observer = Observer::MINMAX;   ///< the default scheme's observer (written as the weights' observer)
  /** observer_option of each config group's observer, in group order, joined by '+' as `scheme` joins the schemes
   * ("minmax+mse"): the one summary the plan's report and the run's both print (R4-B23). */
  std::string observers = "minmax";
  /** Every scheme with quantized weights, one config group each, in group order (a single entry without
   * rules; the default first when it has weights). Units and scale groups index it. */
  std::vector<PlanScheme> schemes;
  /** The schemes rules chose that no module took (every module they select kept: shape rules, fused sets): no config
   * group, but said in the summary and in --json `unused_schemes` (issue 55 tryout: such a rule vanished). */
  std::vector<PlanScheme> unused_schemes;
  std::vector<TensorDecision> decisions;  ///< one per source tensor, sorted by name
  std::vector<QuantUnit> units;
  std::vector<ScaleGroup> groups;
  std::vector<OutShard> shards;           ///< in source shard order
  std::vector<std::string> ignore;        ///< expanded, explicit (R2), sorted
  std::vector<std::string> warnings;      ///< one line each
  std::vector<std::string> forced;        ///< protected / off-policy modules quantized by name
  std::vector<RoleCount> counts;          ///< indexed by Role
  std::vector<std::string> summary;       ///< "11,520 expert Linears quantized", "30 routers kept"
  nlohmann::ordered_json config;          ///< the new config.json
  std::string config_text;                ///< serialized config.json (indent 2, trailing newline)
  std::string index_name;                 ///< output index file name
  std::string index_text;                 ///< serialized index (indent 2, sorted keys)
  std::uint64_t source_bytes = 0;         ///< sum of source tensor bytes (as stored: FP8 payloads and their scales)
  std::uint64_t output_bytes = 0;         ///< sum of output tensor bytes (index total_size)
  std::uint64_t quantized_params = 0;     ///< weights quantized
  std::uint64_t passthrough_units = 0;    ///< FP8 source weights passed through losslessly (QuantUnit::passthrough)
  /** Packed FP4 source weights may be cast losslessly into a scheme that takes them (SchemeTraits::e2m1_cast;
   * decided per fused set from its scales when written: quantize/run.h). PlanOptions::fp8_passthrough. */
  bool lossless_casts = false;
  std::uint64_t quantized_out_bytes = 0;  ///< bytes of the tensors written for quantized weights
  std::uint64_t total_params = 0;         ///< all source elements
  std::uint64_t text_params = 0;          ///< elements of Linear-like text-stack weights (2-D, fused experts)
  std::uint64_t text_quantized_params = 0;  ///< of those, quantized
  std::vector<std::string> unroled;       ///< Linear-like text weights kept for lack of a role
  /** An FP8 source (model/fp8_source.h): its FP8 weights are planned as their bf16 expansion (the
   * decisions' `fp8`), its scales and activation scales are not output tensors, and `source_bytes`
   * counts the stored bytes. */
  std::optional<Fp8Source> fp8_source;

  /** Share of the text stack's Linear-like parameters that is quantized (0 when there are none). */
  double text_quantized_share() const noexcept;

  /** Bits per quantized weight (packed + scales + global scales). */
  double bits_per_weight() const noexcept;

  /** The FP8 / packed FP4 source weight decision `d` is planned from, or nullptr for any other decision. */
  const Fp8Weight* fp8_of(std::size_t d) const noexcept {
    const std::size_t i = decisions[d].fp8;
    return i == TensorDecision::kNoFp8 || !fp8_source ? nullptr : &fp8_source->weights[i];
  }
};

/**
 * Whether FP8 source weight `w` can be written as scheme `s` without touching its payload (lossless): an FP8
 * scheme whose scale layout holds the source's (block 128x128 for FP8_BLOCK, one scale per row for FP8_DYNAMIC;
 * one scale per tensor for either, repeated), a 2-D weight, and an F32 or BF16 scale (an F16 scale dequantizes
 * through an F16 rounding vLLM's float32 scale parameters do not make). vLLM builds FP8 scale parameters in
 * float32 (fp8_utils.py create_fp8_scale_parameter, read in the code index; release inferred), so the source's
 * scale loads as it is.
 */
bool fp8_passthrough_form(const Fp8Weight& w, QuantScheme s) noexcept;

/** Makes the plan. BAD_INPUT for refusals (unknown fused-expert family, split fused set, protected
 * role matched by a regex, NaN-free checks are in run()), USAGE for bad patterns / scheme,
 * INTERNAL when an invariant fails. */
Result<QuantPlan> make_plan(const PlanInput& in, const PlanOptions& opts);
Result<QuantPlan> make_plan(const Checkpoint& ckpt, const PlanOptions& opts);

/** Human-readable plan: per-role counts, warnings, the kept-with-reason table. */
std::string to_text(const QuantPlan& plan, bool verbose = false);
/** JSON form of the plan (documented in docs/cli/quantize.md). */
nlohmann::ordered_json to_json(const QuantPlan& plan);


}  // namespace fp4forge::quant
