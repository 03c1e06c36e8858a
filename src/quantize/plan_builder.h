#pragma once
// The quantize planner's builder (private to src/quantize/): make_plan is the ordered steps of one PlanBuilder, from
// the tensors' roles to the shards and the config; each step reads what the earlier ones left and fills `plan`.
// The steps live by what they decide:
//   plan.cc          the plan proper: inputs, decisions, candidates, units, schemes, scale groups, ignore,
//                    shards, index and config; make_plan (the order the steps run in)
//   plan_patterns.cc the patterns: --ignore / --force-quantize, recipe rules that selected nothing, and the
//                    `re:` targets of a recipe's config groups, proven with vLLM's own lookup
//   plan_rules.cc    what keeps or refuses: shape rules, fused sets, expert uniformity, "nothing quantized",
//                    the invariants checked before any byte is written
//   plan_summary.cc  the counts, summary lines and the warnings they carry
// Names and inputs are in plan_names.cc, the text and JSON report in plan_report.cc.
#include "fp4forge/quantize/plan.h"

#include "fp4forge/model/serving_files.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/registry.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/safetensors/index.h"
#include "fp4forge/util/format.h"
#include "fp4forge/safetensors/header.h"
#include "fp4forge/util/strings.h"
#include "user_patterns.h"

namespace fp4forge::quant::plan_internal {

using ojson = nlohmann::ordered_json;

using util::ends_with;
using util::starts_with;

inline std::uint64_t elem_bytes(DType t) { return dtype_bits(t) / 8; }

/** Why the policy keeps a tensor of this role. */
std::string keep_reason(Role r, bool mtp, bool outside_text);

/** What a group keeps, by rule: "11 out_features not a multiple of 128, 6 fused with a member kept". */
std::string kept_by_rule(const PlanScheme& ps);

/** A candidate 2-D weight: a plain `.weight` matrix or one expert's part of a fused tensor. */
struct Mod {
  std::string module;
  std::size_t decision = 0;
  Role role = Role::OTHER;
  std::uint64_t rows = 0, cols = 0;
  MatrixSlice slice;
  bool quant = false;
  bool forced = false;
  Rule rule = Rule::POLICY;
  std::string reason;
  std::string pattern;
  std::string experts_key;  ///< "<...>.experts." for routed experts (with the dot), "" otherwise
  std::size_t scheme = 0;   ///< index into PlanBuilder::cands (the recipe's choice)
};

/** The last component of a module name ("in_proj_a" of "model.layers.0.linear_attn.in_proj_a"). */
inline std::string_view leaf_of(std::string_view module) {
  if (module.ends_with(".weight")) module.remove_suffix(7);
  return names::leaf_of(module);
}

/** MTP blocks are kept whatever role their tensors classify as (F7). */
inline bool is_mtp(const TensorDecision& d) { return d.cls.role == Role::MTP || starts_with(d.name, "mtp."); }

/** The config groups of the plan's schemes, as ct_quant_config writes them. */
inline std::vector<CtGroupSpec> ct_groups(const QuantPlan& plan) {
  std::vector<CtGroupSpec> groups;
  for (const PlanScheme& ps : plan.schemes) groups.push_back({ps.group, ps.scheme, ps.observer, ps.targets});
  return groups;
}

/** make_plan's state between its steps: each step reads what the earlier ones left and fills `plan`. */
struct PlanBuilder {
  PlanBuilder(const PlanInput& input, const PlanOptions& options) : in(input), opts(options) {}

  const PlanInput& in;
  const PlanOptions& opts;
  QuantPlan plan;
  PatternSet ign{{}, {}, "--ignore"}, frc{{}, {}, "--force-quantize"};
  std::vector<ExpertBlock> blocks;
  std::unordered_map<std::string_view, const ExpertBlock*> fused_block;  // fused tensor name -> its block
  std::vector<Mod> mods;
  std::vector<std::vector<std::size_t>> mods_of;  // decision -> its candidate modules
  std::unordered_map<std::string, std::size_t> mod_index;
  std::vector<FusedSet> sets;
  std::vector<std::size_t> unit_of;  // candidate module -> its unit, SIZE_MAX when kept
  nlohmann::json weight_map = nlohmann::json::object();
  // The schemes a module may get: [0] the default (--scheme), then one per distinct (scheme, observer) of the
  // rules; rule_cand[i] is rule i's entry, rule_hits[i] how many candidate modules it selected.
  std::vector<PlanScheme> cands;
  std::vector<CompiledRule> rules;
  std::vector<std::size_t> rule_cand, rule_hits;

  QuantScheme qs_of(const Mod& m) const { return cands[m.scheme].scheme; }
  /** The entry of `cands` a module gets: the first rule that selects it, else the default. */
  std::size_t pick_scheme(const std::vector<std::string>& names, Role role, const TensorDecision& d) {
    const SelectorSubject subj{names, role, d.cls.text_stack ? d.cls.layer : -1};
    for (std::size_t i = 0; i < rules.size(); ++i)
      for (const Selector& sel : rules[i].selectors)
        if (sel.matches(subj, plan.info.num_layers)) {
          ++rule_hits[i];
          return rule_cand[i];
        }
    return 0;
  }
  /** Whether the policy quantizes decision `d` (leaf `leaf`) under scheme `qs`. */
  bool policy_for(const TensorDecision& d, std::string_view leaf, QuantScheme qs) const {
    return policy_quantizes(d.cls.role, plan.info.spec(), qs, leaf) && d.cls.text_stack && !is_mtp(d);
  }

  /** Scheme, config and tensor list checks that come before any tensor is looked at. */
  Status check_inputs();
  /** Compiles the --ignore and --force-quantize patterns. */
  Status parse_patterns();
  /** One decision per source tensor, sorted by name, with its class: the skeleton the later steps fill. */
  Status make_decisions();
  /** The fused 3-D expert blocks and which tensors belong to them. */
  void find_fused_experts();
  /** Candidate modules (plain 2-D weights and split experts) with their policy decision. */
  Status add_candidates();
  /** The per-expert modules of fused tensor `di`; false when not split (a problem under --ignore). */
  Result<bool> add_expert_parts(std::size_t di, const ExpertBlock& blk, bool mtp);
  /** Applies --ignore and --force-quantize to the candidates. */
  Status apply_user_patterns();
  /** The names a user pattern selects candidate `m` of decision `di` by: its module, the fused tensor it is split
   * from, and a routed expert's block ("<...>.experts": one layer's experts, what the R3 hint names). */
  std::vector<std::string> pattern_names(std::size_t di, const Mod& m) const {
    std::vector<std::string> names{m.module};
    const auto& d = plan.decisions[di];
    if (mods_of[di].size() > 1 || m.module + ".weight" != d.name) names.push_back(d.name);
    if (const std::string_view key = experts_key_of(m.module); !key.empty()) names.emplace_back(key);
    return names;
  }
  /** Patterns that decided nothing (check_unused_patterns), asked after every step that consults them. */
  Status check_unused(PatternSet& ps);
  /** Families whose routed experts vLLM cannot serve quantized. */
  Status refuse_unservable_experts();
  /** Shape and dtype rules on everything selected for quantization. */
  Status apply_shape_rules();
  /** Fused sets (R1) and linear-attention pairs, all in or all out. */
  Status settle_fused_sets();
  /** One decision per fused expert tensor; the experts of one layer all quantized or all kept. */
  Status check_expert_uniformity();
  /** Each source tensor's final action, rule and reason. */
  void finalize_decisions();
  /** One quant unit per candidate module left quantized. */
  void make_units();
  /** Scale groups, a fused set's units together and every other unit alone. */
  Status make_scale_groups();
  /** The expanded ignore list (R2). */
  void expand_ignore();
  /** Output tensors per shard, laid out like the reference writer. */
  Status lay_out_shards();
  /** The output index and config.json. */
  void write_index_and_config();
  /** The quantized share of the text stack, and its Linear-like weights without a role. */
  void count_text_share();
  /** Per-role quantized and kept counts. */
  void count_roles();
  /** True when some module split from (or owning) decision `di` is quantized. */
  bool any_quantized(std::size_t di) const {
    return std::any_of(mods_of[di].begin(), mods_of[di].end(), [&](std::size_t k) { return mods[k].quant; });
  }
  /** Index of the decision for tensor `name` (decisions are sorted by name); decisions.size() when absent. */
  std::size_t decision_index(std::string_view name) const {
    const auto it = std::lower_bound(plan.decisions.begin(), plan.decisions.end(), name,
                                     [](const TensorDecision& d, std::string_view n) { return d.name < n; });
    return it != plan.decisions.end() && it->name == name ? static_cast<std::size_t>(it - plan.decisions.begin())
                                                          : plan.decisions.size();
  }
  /** "Nothing quantized" is never a success: refuse before writing, with the reasons the Linears were kept. */
  Status refuse_nothing_quantized();
  /** The summary lines and the forced-module warnings. */
  void summarize();
  /** Invariants; a failure here is a bug, reported before any byte is written. */
  Status check_invariants();
  /** Rules that selected nothing: an exact module name is a usage error, a role or pattern a warning. */
  Status check_rules();
  /** The schemes with quantized weights become plan.schemes (config groups); units and groups index them. */
  void settle_schemes();
  /** Each group's targets, proven to select exactly its modules the way vLLM matches them. */
  Status make_targets();
  /** FP8 source weights written in their own FP8 form: passed through (QuantUnit::passthrough). */
  void mark_passthrough();
};

}  // namespace fp4forge::quant::plan_internal
