// The quantize planner (quantize/plan.h): make_plan as the ordered steps of one PlanBuilder, from the
// tensors' roles to the shards and the config. Why one file of about 1,050 lines: the steps share the
// builder's state and read in the order they run, which is the order a reviewer checks a decision in;
// names and inputs are in plan_names.cc, the text and JSON report in plan_report.cc.
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
#include "fp4forge/util/strings.h"
#include "user_patterns.h"
#include "fp4forge/safetensors/header.h"

namespace fp4forge::quant {
namespace {

using ojson = nlohmann::ordered_json;

using util::ends_with;
using util::starts_with;



std::uint64_t elem_bytes(DType t) { return dtype_bits(t) / 8; }


/** Why the policy keeps a tensor of this role. */
std::string keep_reason(Role r, bool mtp, bool outside_text) {
  if (mtp) return "MTP block (mtp.*): never quantized (F7)";
  switch (r) {
    case Role::LM_HEAD: return "lm_head: never quantized (F6)";
    case Role::EMBEDDING: return "embedding: never quantized";
    case Role::ROUTER: return "router/gate: never quantized (vLLM builds it unquantized; F1)";
    case Role::ROUTER_AUX: return "router parameter: not a Linear";
    case Role::ATTN_SINK: return "attention sink: not a Linear";
    case Role::EXPERT_PROJ_BIAS: return "expert projection bias: not a Linear's weight";
    case Role::NORM: return "norm: not a Linear";
    case Role::LINEAR_ATTN: return "linear attention: kept at 4 bits (architectures.md 5.3)";
    case Role::LINEAR_ATTN_CONV: return "linear-attention conv1d: not a Linear";
    case Role::LINEAR_ATTN_PARAM: return "linear-attention parameter: not a Linear";
    case Role::MAMBA: return "Mamba mixer projection: kept in 16 bits (like linear attention)";
    case Role::VISION: return "vision tower: never quantized";
    case Role::AUDIO: return "audio tower: never quantized";
    case Role::PROJECTOR: return "multimodal projector: never quantized";
    case Role::MTP: return "MTP block (mtp.*): never quantized (F7)";
    case Role::PLE: return "per-layer embedding (PLE): never quantized";
    case Role::SCALAR: return "scalar parameter";
    default: break;
  }
  if (outside_text) return "outside the text stack: never quantized";
  return "not a quantization target";
}

/** Noun (singular, plural) for the per-role summary lines. */
std::pair<std::string_view, std::string_view> role_noun(Role r) {
  switch (r) {
    case Role::ROUTER: return {"router", "routers"};
    case Role::ROUTER_AUX: return {"router parameter", "router parameters"};
    case Role::ATTN_SINK: return {"attention sink", "attention sinks"};
    case Role::EXPERT_PROJ_BIAS: return {"expert projection bias", "expert projection biases"};
    case Role::EMBEDDING: return {"embedding", "embeddings"};
    case Role::LM_HEAD: return {"lm_head", "lm_heads"};
    case Role::NORM: return {"norm", "norms"};
    case Role::LINEAR_ATTN: return {"linear-attention projection", "linear-attention projections"};
    case Role::LINEAR_ATTN_CONV: return {"conv1d kernel", "conv1d kernels"};
    case Role::LINEAR_ATTN_PARAM: return {"linear-attention parameter", "linear-attention parameters"};
    case Role::MAMBA: return {"Mamba projection", "Mamba projections"};
    case Role::VISION: return {"vision-tower tensor", "vision-tower tensors"};
    case Role::AUDIO: return {"audio-tower tensor", "audio-tower tensors"};
    case Role::PROJECTOR: return {"projector tensor", "projector tensors"};
    case Role::MTP: return {"MTP tensor", "MTP tensors"};
    case Role::PLE: return {"PLE tensor", "PLE tensors"};
    case Role::SCALAR: return {"scalar", "scalars"};
    default: return {"", ""};
  }
}

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

/** "<...>.experts." (the trailing dot: as blk.key + "."), "" for a name outside routed experts. */
std::string experts_prefix_of(std::string_view module) {
  const std::string_view key = experts_key_of(module);
  return key.empty() ? std::string() : std::string(key) + ".";
}

/** The last component of a module name ("in_proj_a" of "model.layers.0.linear_attn.in_proj_a"). */
std::string_view leaf_of(std::string_view module) {
  if (module.ends_with(".weight")) module.remove_suffix(7);
  return names::leaf_of(module);
}

OutKind out_kind(LinearPart p) {
  switch (p) {
    case LinearPart::PAYLOAD: return OutKind::PACKED;
    case LinearPart::SCALE: return OutKind::SCALE;
    case LinearPart::GLOBAL_SCALE: return OutKind::GLOBAL_SCALE;
    case LinearPart::SHAPE: return OutKind::SHAPE;
  }
  return OutKind::PACKED;
}

std::string dump_config(const ojson& j) {
  return j.dump(2, ' ', false, nlohmann::detail::error_handler_t::replace) + "\n";
}

}  // namespace

namespace {

/** MTP blocks are kept whatever role their tensors classify as (F7). */
bool is_mtp(const TensorDecision& d) { return d.cls.role == Role::MTP || starts_with(d.name, "mtp."); }

/** The config groups of the plan's schemes, as ct_quant_config writes them. */
std::vector<CtGroupSpec> ct_groups(const QuantPlan& plan) {
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

Status PlanBuilder::check_inputs() {
  {
    FP4FORGE_ASSIGN_OR_RETURN(plan.quant_scheme, parse_quant_scheme(opts.scheme));
    plan.scheme = std::string(quant_scheme_name(plan.quant_scheme));
    if (opts.observer.empty()) {
      plan.observer = default_observer(plan.quant_scheme);
    } else {
      FP4FORGE_ASSIGN_OR_RETURN(plan.observer, parse_observer(opts.observer));
    }
    FP4FORGE_TRY(check_observer(plan.quant_scheme, plan.observer));
    cands.push_back(PlanScheme{"", plan.quant_scheme, plan.observer, {}, {}, 0, 0});
    for (const SchemeRule& r : opts.scheme_for) {
      FP4FORGE_ASSIGN_OR_RETURN(CompiledRule c, compile_rule(r));
      std::size_t k = 0;
      while (k < cands.size() && (cands[k].scheme != c.scheme || cands[k].observer != c.observer)) ++k;
      if (k == cands.size()) cands.push_back(PlanScheme{"", c.scheme, c.observer, {}, {}, 0, 0});
      cands[k].rules.push_back(c.origin);
      rule_cand.push_back(k);
      rules.push_back(std::move(c));
    }
    rule_hits.assign(rules.size(), 0);
  }
  if (!in.config.is_object())
    return make_error(Errc::BAD_INPUT, "config.json is not a JSON object; expected the model config");
  FP4FORGE_ASSIGN_OR_RETURN(plan.info, read_model_info(in.config));
  {
    std::vector<NamedShape> named;
    named.reserve(in.tensors.size());
    for (const auto& t : in.tensors) named.push_back({t.name, t.shape});
    read_structure_into(plan.info, named);
  }
  const ModelInfo& info = plan.info;
  plan.warnings.insert(plan.warnings.end(), in.notes.begin(), in.notes.end());  // e.g. a stale total_size
  std::string qkey;
  if (find_quant_config(in.config, &qkey) != nullptr || !info.quant_method.empty())
    return make_error(Errc::BAD_INPUT,
                      "config.json already has a {} (quant_method '{}'); expected an unquantized bf16/fp16/fp32 "
                      "checkpoint; quantize the original weights instead",
                      qkey.empty() ? std::string("quantization_config") : qkey, info.quant_method);
  if (in.tensors.empty()) return make_error(Errc::BAD_INPUT, "checkpoint has no tensors; nothing to quantize");
  return {};
}

Status PlanBuilder::parse_patterns() {
  for (const auto& p : opts.ignore) {
    FP4FORGE_ASSIGN_OR_RETURN(auto np, NamePattern::parse(p));
    ign.pats.push_back(std::move(np));
  }
  for (const auto& p : opts.force_quantize) {
    FP4FORGE_ASSIGN_OR_RETURN(auto np, NamePattern::parse(p));
    frc.pats.push_back(std::move(np));
  }
  ign.used.assign(ign.pats.size(), false);
  frc.used.assign(frc.pats.size(), false);
  return {};
}

Status PlanBuilder::make_decisions() {
  std::vector<SourceTensor> src = in.tensors;
  std::sort(src.begin(), src.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < src.size(); ++i)
    if (src[i].name == src[i - 1].name)
      return make_error(Errc::BAD_INPUT, "tensor '{}' appears twice in the checkpoint", src[i].name);
  plan.counts.assign(kRoleCount, RoleCount{});
  plan.decisions.reserve(src.size());
  for (const auto& t : src) {
    if (t.shard >= in.shard_names.size())
      return make_error(Errc::INTERNAL, "tensor '{}' refers to shard {} of {}", t.name, t.shard,
                        in.shard_names.size());
    TensorDecision d;
    d.name = t.name;
    d.shard = t.shard;
    d.dtype = t.dtype;
    d.shape = t.shape;
    d.cls = classify(t.name, t.shape, plan.info);
    if (d.cls.quant_param)
      return make_error(Errc::BAD_INPUT,
                        "tensor '{}' is already a compressed-tensors parameter; expected an unquantized "
                        "checkpoint",
                        t.name);
    d.linear_like = ends_with(t.name, ".weight") && t.shape.size() == 2;
    plan.decisions.push_back(std::move(d));
    plan.source_bytes += st::shape_numel(t.shape) * elem_bytes(t.dtype);
    plan.total_params += st::shape_numel(t.shape);
  }
  return {};
}

void PlanBuilder::find_fused_experts() {
  std::vector<NamedShape> named;
  named.reserve(plan.decisions.size());
  for (const auto& d : plan.decisions) named.push_back({d.name, d.shape});
  blocks = find_expert_blocks(named, plan.info, opts.experts);
  // `fused_block` points into `blocks`, which stays as it is from here on.
  for (const auto& b : blocks) {
    if (b.storage != ExpertStorage::FUSED) continue;
    for (const std::string* t : {&b.gate_up, &b.gate, &b.up, &b.down})  // views into `blocks`: no temporaries
      if (!t->empty()) fused_block[*t] = &b;
  }
}

Status PlanBuilder::add_candidates() {
  mods_of.assign(plan.decisions.size(), {});
  for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
    auto& d = plan.decisions[di];
    const bool mtp = is_mtp(d);
    const std::string_view leaf = leaf_of(d.cls.module.empty() ? d.name : d.cls.module);
    const auto fb = fused_block.find(d.name);
    if (fb != fused_block.end() && !mtp) {
      FP4FORGE_ASSIGN_OR_RETURN(const bool split, add_expert_parts(di, *fb->second, mtp));
      if (split) continue;
    }
    if (!d.linear_like) continue;
    Mod m;
    m.module = d.name.substr(0, d.name.size() - 7);
    m.scheme = pick_scheme({m.module}, d.cls.role, d);
    const bool policy_quant = policy_for(d, leaf, qs_of(m));
    m.decision = di;
    m.role = d.cls.role;
    m.rows = d.shape[0];
    m.cols = d.shape[1];
    m.slice = {0, m.rows, m.cols, m.cols, 1};
    m.quant = policy_quant;
    m.reason = policy_quant ? fmt::format("{}: quantized by policy", role_name(d.cls.role))
                            : keep_reason(d.cls.role, mtp, !d.cls.text_stack);
    if (!policy_quant && !mtp && d.cls.text_stack)
      if (std::string why = scheme_keep_reason(d.cls.role, plan.info.spec(), qs_of(m), leaf); !why.empty())
        m.reason = std::move(why);
    if (policy_quant) m.experts_key = experts_prefix_of(m.module);
    mods_of[di].push_back(mods.size());
    mods.push_back(std::move(m));
  }
  return {};
}

Result<bool> PlanBuilder::add_expert_parts(std::size_t di, const ExpertBlock& blk, bool mtp) {
  const ModelInfo& info = plan.info;
  const auto& d = plan.decisions[di];
  const bool user_kept = ign.take({d.name, blk.key});
  if (!blk.problem.empty() && !user_kept)
    return make_error(Errc::BAD_INPUT, "{}; or pass --ignore '{}' to keep these experts unquantized (R3)",
                      blk.problem, blk.key);
  if (!blk.problem.empty()) return false;
  const auto E = static_cast<std::uint64_t>(std::max<std::int64_t>(info.num_experts, 0));
  const auto Im = static_cast<std::uint64_t>(std::max<std::int64_t>(info.moe_intermediate_size, 0));
  const auto H = static_cast<std::uint64_t>(std::max<std::int64_t>(info.hidden_size, 0));
  if (!user_kept && ((E != 0 && blk.num_experts != E) || (Im != 0 && blk.intermediate != Im) ||
                     (H != 0 && blk.hidden != H)))
    return make_error(Errc::BAD_INPUT,
                      "fused expert tensor '{}' {} reads as {} experts of width {} over hidden size {} "
                      "({}), but the config says num_experts = {}, expert width = {}, hidden_size = {}; "
                      "refusing to split (R3)",
                      d.name, format_shape(d.shape), blk.num_experts, blk.intermediate, blk.hidden,
                      orientation_name(blk.orientation), E, Im, H);
  for (const ExpertPart& part : blk.parts) {
    if (part.tensor != d.name) continue;
    Mod m;
    m.module = part.module;
    m.decision = di;
    m.role = part.role;
    m.rows = part.slice.rows;
    m.cols = part.slice.cols;
    m.slice = part.slice;
    m.scheme = pick_scheme({m.module, d.name}, m.role, d);
    const bool policy_quant = policy_for(d, leaf_of(d.cls.module.empty() ? d.name : d.cls.module), qs_of(m));
    m.quant = policy_quant;
    m.experts_key = blk.key + ".";
    m.reason = policy_quant ? fmt::format("routed expert (split from fused 3-D tensor, {})",
                                          orientation_name(blk.orientation))
                            : keep_reason(d.cls.role, mtp, !d.cls.text_stack);
    mods_of[di].push_back(mods.size());
    mods.push_back(std::move(m));
  }
  return true;
}

Status PlanBuilder::apply_user_patterns() {
  // A fused expert tensor matches by its own name or any module it splits into.
  for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
    auto& d = plan.decisions[di];
    for (std::size_t k : mods_of[di]) {
      Mod& m = mods[k];
      const std::vector<std::string> names = pattern_names(di, m);
      const int gi = ign.match(names);
      const int fi = frc.match(names);
      if (gi >= 0 && fi >= 0)
        return make_error(Errc::USAGE, "module '{}' matches both --ignore '{}' and --force-quantize '{}'",
                          m.module, ign.pats[static_cast<std::size_t>(gi)].text(),
                          frc.pats[static_cast<std::size_t>(fi)].text());
      if (gi >= 0) {
        if (m.quant) {
          m.quant = false;
          m.rule = Rule::USER_IGNORE;
          m.pattern = ign.pats[static_cast<std::size_t>(gi)].text();
          m.reason = fmt::format("user --ignore '{}'", m.pattern);
        }
      } else if (fi >= 0) {
        const auto& pat = frc.pats[static_cast<std::size_t>(fi)];
        if (!m.quant) {
          const Role base = d.cls.role == Role::MTP ? d.cls.base_role : d.cls.role;
          const bool prot = role_is_protected(d.cls.role) || role_is_protected(base) || d.cls.role == Role::MTP;
          if (prot && pat.is_regex())
            return make_error(Errc::BAD_INPUT,
                              "--force-quantize '{}' matches protected {} module '{}'; protected roles are "
                              "quantized only when named exactly (--force-quantize {})",
                              pat.text(), role_name(d.cls.role), m.module, m.module);
          m.quant = true;
          m.forced = true;
          m.rule = Rule::USER_FORCE;
          m.pattern = pat.text();
          m.reason = fmt::format("user --force-quantize '{}' (policy: {})", m.pattern, m.reason);
        }
      }
    }
  }
  return {};
}

Status PlanBuilder::check_unused(PatternSet& ps) {
  return check_unused_patterns(ps, plan.decisions, plan.info.tie_word_embeddings, [&](const NamePattern& p) {
    for (std::size_t di = 0; di < plan.decisions.size(); ++di)
      for (std::size_t k : mods_of[di])
        for (const std::string& n : pattern_names(di, mods[k]))
          if (p.matches(n)) return true;
    return false;
  }, plan.warnings);
}

Status PlanBuilder::refuse_unservable_experts() {
  const ModelInfo& info = plan.info;
  if (const std::string_view why = info.spec().experts_refusal; !why.empty()) {
    for (const auto& m : mods)
      if (m.quant && !m.experts_key.empty())
        return make_error(Errc::BAD_INPUT,
                          "{} routed experts cannot be served quantized: {}; pass --ignore 're:.*experts' to "
                          "quantize the attention only",
                          info.spec().display, why);
  }
  return {};
}

Status PlanBuilder::apply_shape_rules() {
  // A layer's routed experts load into one FusedMoE with one scheme (F10; vLLM's "All MoE projections need to
  // have same quantization scheme"): a rule that gives part of them another scheme is refused.
  {
    std::map<std::string, const Mod*> first_of;
    for (const auto& m : mods) {
      if (!m.quant || m.experts_key.empty()) continue;
      const auto [it, fresh] = first_of.emplace(m.experts_key, &m);
      if (fresh || it->second->scheme == m.scheme) continue;
      return make_error(Errc::USAGE,
                        "the routed experts of '{}' would get two schemes ({} for '{}', {} for '{}'); vLLM loads a "
                        "layer's experts with one scheme (F10); select all of them or none ({})",
                        m.experts_key.substr(0, m.experts_key.size() - 1), quant_scheme_preset(qs_of(*it->second)),
                        it->second->module, quant_scheme_preset(qs_of(m)), m.module,
                        format_list(cands[m.scheme].rules.empty() ? cands[it->second->scheme].rules : cands[m.scheme].rules));
    }
  }
  std::vector<std::string> misaligned;
  std::set<QuantScheme> misaligned_schemes;
  for (auto& m : mods) {
    if (!m.quant) continue;
    const ShapeRule rule = shape_rule(qs_of(m));
    const std::string_view preset = quant_scheme_preset(qs_of(m));
    const auto& d = plan.decisions[m.decision];
    if (!is_source_dtype(d.dtype))
      return make_error(Errc::BAD_INPUT, "tensor '{}' has dtype {}; {} quantizes BF16, F16 or F32 weights", d.name,
                        dtype_name(d.dtype), preset);
    if (m.rows == 0 || m.cols == 0)
      return make_error(Errc::BAD_INPUT, "tensor '{}' has shape {} with a zero dimension; expected a non-empty "
                        "weight (damaged or truncated export?)",
                        d.name, format_shape(d.shape));
    const bool k_bad = m.cols % rule.k_multiple != 0, n_bad = m.rows % rule.n_multiple != 0;
    if (!k_bad && !n_bad) continue;
    const std::string what = k_bad ? fmt::format("in_features {} not a multiple of {}", m.cols, rule.k_multiple)
                                   : fmt::format("out_features {} not a multiple of {}", m.rows, rule.n_multiple);
    if (m.forced)
      return make_error(Errc::BAD_INPUT, "--force-quantize '{}': module '{}' has {}; {} cannot quantize it ({}) and "
                        "never pads",
                        m.pattern, m.module, what, preset, rule.why);
    misaligned.push_back(fmt::format("{} ({}={})", m.module, k_bad ? "K" : "N", k_bad ? m.cols : m.rows));
    misaligned_schemes.insert(qs_of(m));
    m.quant = false;
    m.rule = k_bad ? Rule::K_NOT_ALIGNED : Rule::N_NOT_ALIGNED;
    m.reason = fmt::format("{}: kept ({})", what, rule.why);
  }
  // A layer's routed experts share one scheme (F10): one expert weight that cannot be quantized keeps them all.
  std::map<std::string, std::string> blocked;  // experts key -> the module that keeps it
  std::map<std::string, QuantScheme> blocked_scheme;
  for (const auto& m : mods)
    if (!m.experts_key.empty() && (m.rule == Rule::K_NOT_ALIGNED || m.rule == Rule::N_NOT_ALIGNED)) {
      blocked.emplace(m.experts_key, m.module);
      blocked_scheme.emplace(m.experts_key, qs_of(m));
    }
  for (auto& m : mods) {
    const auto it = blocked.find(m.experts_key);
    if (!m.quant || m.experts_key.empty() || it == blocked.end()) continue;
    m.quant = false;
    m.rule = Rule::FUSED_SET;
    m.reason = fmt::format("routed expert kept with its layer: '{}' does not fit {} and a layer's experts share one "
                           "scheme (F10)",
                           it->second, quant_scheme_preset(blocked_scheme.at(m.experts_key)));
  }
  if (!blocked.empty()) {
    const auto& [key, mod] = *blocked.begin();
    plan.warnings.push_back(fmt::format("routed experts of {} layer(s) kept unquantized because one of their weights "
                                        "does not fit {} (e.g. '{}' in '{}')",
                                        blocked.size(), quant_scheme_preset(blocked_scheme.at(key)), mod,
                                        key.substr(0, key.size() - 1)));
  }
  if (!misaligned.empty()) {
    // One scheme's rule names the need; several schemes (a recipe) are named each.
    const QuantScheme first = *misaligned_schemes.begin();
    const ShapeRule rule = shape_rule(first);
    std::vector<std::string_view> names;
    for (QuantScheme q : misaligned_schemes) names.push_back(quant_scheme_preset(q));
    const std::string preset = fmt::format("{}", fmt::join(names, ", "));
    const std::string need =
        misaligned_schemes.size() > 1 ? std::string("shapes that do not fit their scheme")
        : rule.n_multiple <= 1 ? fmt::format("in_features not a multiple of {}", rule.k_multiple)
        : rule.n_multiple == rule.k_multiple
            ? fmt::format("in_features or out_features not a multiple of {}", rule.k_multiple)
            : fmt::format("in_features not a multiple of {} or out_features not a multiple of {}", rule.k_multiple,
                          rule.n_multiple);
    if (opts.strict)
      return make_error(Errc::BAD_INPUT, "{} weight(s) have {} ({}, --strict): {}", misaligned.size(), need, preset,
                        fmt::join(misaligned, ", "));
    plan.warnings.push_back(fmt::format("{} weight(s) kept unquantized because of {} ({}): {}", misaligned.size(), need,
                                        preset, format_list(misaligned)));
  }
  return {};
}

Status PlanBuilder::settle_fused_sets() {
  std::vector<std::string> mod_names;
  for (std::size_t k = 0; k < mods.size(); ++k) {
    mod_index[mods[k].module] = k;
    mod_names.push_back(mods[k].module);
  }
  sets = fused_sets(mod_names, plan.info);
  std::vector<int> set_of(mods.size(), -1);
  for (std::size_t si = 0; si < sets.size(); ++si) {
    const auto& s = sets[si];
    std::vector<std::size_t> ks;
    for (const auto& mn : s.members) {
      auto it = mod_index.find(mn);
      if (it == mod_index.end())
        return make_error(Errc::INTERNAL, "fused set '{}' names unknown module '{}'", s.parent, mn);
      ks.push_back(it->second);
    }
    bool any_q = false, any_k = false;
    for (auto k : ks) (mods[k].quant ? any_q : any_k) = true;
    // vLLM loads a fused layer with the scheme of its first shard (docs/mixed-precision.md §2): members of two
    // schemes would be served as one, so a rule that splits a set is refused here, for every fused set alike,
    // also where one member's scheme keeps it (GatedDeltaNet's in_proj_a at 8 bits, in_proj_b at NVFP4: R4-B17).
    for (auto k : ks) {
      const Mod& a = mods[ks.front()];
      const Mod& b = mods[k];
      if ((!a.quant && !b.quant) || a.scheme == b.scheme) continue;
      const auto& why = cands[b.scheme].rules.empty() ? cands[a.scheme].rules : cands[b.scheme].rules;
      const auto as = [&](const Mod& m) {
        return fmt::format("{} for '{}'{}", quant_scheme_preset(qs_of(m)), m.module, m.quant ? "" : ", which keeps it");
      };
      return make_error(Errc::USAGE,
                        "fused set {} of '{}' would get two schemes ({}, {}); vLLM loads a fused layer with one "
                        "scheme; select every member or none ({})",
                        s.kind, s.parent, as(a), as(b), format_list(why));
    }
    if (any_q && any_k) {
      const Mod* user = nullptr;
      for (auto k : ks)
        if (mods[k].rule == Rule::USER_IGNORE || mods[k].rule == Rule::USER_FORCE) user = &mods[k];
      std::vector<std::string> q, kept;
      for (auto k : ks) (mods[k].quant ? q : kept).push_back(mods[k].module.substr(s.parent.size() + 1));
      const std::string desc = fmt::format("fused set {} of '{}' ({} quantized, {} kept)", s.kind, s.parent,
                                           fmt::join(q, "+"), fmt::join(kept, "+"));
      if (user)
        return make_error(Errc::USAGE,
                          "{} '{}' splits the {}; its members share one global scale and must all be quantized "
                          "or all kept (R1, F9); match every member or none",
                          user->rule == Rule::USER_IGNORE ? "--ignore" : "--force-quantize", user->pattern, desc);
      bool misalign = false;
      for (auto k : ks) misalign = misalign || mods[k].rule == Rule::K_NOT_ALIGNED || mods[k].rule == Rule::N_NOT_ALIGNED;
      if (!misalign) {  // one scheme, one policy, two answers: each member's own reason, as the policy gave it
        const auto q_it = std::find_if(ks.begin(), ks.end(), [&](std::size_t k) { return mods[k].quant; });
        const auto k_it = std::find_if(ks.begin(), ks.end(), [&](std::size_t k) { return !mods[k].quant; });
        return make_error(Errc::BAD_INPUT, "the keep policy splits the {}: '{}' {}, '{}' {}; its members share one "
                          "global scale and must be all quantized or all kept (R1)",
                          desc, mods[*q_it].module, mods[*q_it].reason, mods[*k_it].module, mods[*k_it].reason);
      }
      for (auto k : ks)
        if (mods[k].quant) {
          mods[k].quant = false;
          mods[k].rule = Rule::FUSED_SET;
          mods[k].reason = fmt::format("fused {} partner's shape does not fit {}: kept", s.kind,
                                       quant_scheme_preset(qs_of(mods[ks.front()])));
        }
      plan.warnings.push_back(fmt::format("{} kept whole: a member's shape does not fit {}", desc,
                                          quant_scheme_preset(qs_of(mods[ks.front()]))));
    }
    for (auto k : ks) {
      if (set_of[k] >= 0)
        return make_error(Errc::INTERNAL, "module '{}' is in two fused sets", mods[k].module);
      set_of[k] = static_cast<int>(si);
    }
  }
  return {};
}

Status PlanBuilder::check_expert_uniformity() {
  for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
    if (mods_of[di].size() <= 1) continue;
    std::size_t nq = 0;
    for (auto k : mods_of[di]) nq += mods[k].quant ? 1 : 0;
    if (nq != 0 && nq != mods_of[di].size()) {
      std::string pat;
      for (auto k : mods_of[di])
        if (!mods[k].pattern.empty()) pat = mods[k].pattern;
      return make_error(Errc::USAGE,
                        "pattern '{}' selects only part of the fused expert tensor '{}' ({} of {} expert "
                        "modules quantized); a layer's experts are all quantized or all kept (F10)",
                        pat, plan.decisions[di].name, nq, mods_of[di].size());
    }
  }
  // Every stored tensor of a fused block is split the same way: a block whose down projections are split
  // while its gate/up stay 3-D (or the reverse) is a model vLLM cannot load and our verify rejects.
  for (const ExpertBlock& b : blocks) {
    if (b.storage != ExpertStorage::FUSED || b.mtp) continue;
    std::vector<std::string> split, kept;
    for (const std::string& t : b.stored()) {
      const std::size_t di = decision_index(t);
      if (di == plan.decisions.size()) continue;
      (any_quantized(di) ? split : kept).push_back(t);
    }
    if (!split.empty() && !kept.empty())
      return make_error(Errc::BAD_INPUT,
                        "experts '{}': {} would be split and quantized while {} stay 3-D; vLLM cannot load a "
                        "layer whose experts are half split, so nothing was written; hint: --ignore '{}' keeps "
                        "the whole block unquantized",
                        b.key, fmt::join(split, ", "), fmt::join(kept, ", "), b.key);
  }
  // A family outside the registry: the order of a fused gate_up stack is an assumption (registry
  // gate_up_order), and a fused expert bias stays 3-D beside the split weights. Said, not silent.
  if (plan.info.family == Family::UNKNOWN) {
    std::vector<std::string> assumed;
    bool biased = false;
    for (const ExpertBlock& b : blocks) {
      if (b.storage != ExpertStorage::FUSED || b.mtp || b.gate_up.empty()) continue;
      const std::size_t di = decision_index(b.gate_up);
      if (di == plan.decisions.size()) continue;
      if (!any_quantized(di)) continue;
      assumed.push_back(b.key);
      biased = biased || decision_index(b.gate_up + "_bias") != plan.decisions.size();
    }
    if (!assumed.empty())
      plan.warnings.push_back(fmt::format(
          "experts-order-assumed: the fused gate_up experts of {} layer(s) (e.g. '{}') of a family outside the "
          "registry were split as {}{}; prove the output against the model's own class (scripts/check_logits.py) "
          "before serving it",
          assumed.size(), assumed.front(), kAssumedGateUpOrder,
          biased ? ", and the fused expert biases stay 3-D beside the split weights, which a per-expert vLLM "
                   "loader does not map" : ""));
  }
  // A 3-D stack beside quantized experts that fp4forge did not read as experts (an unknown storage form).
  {
    std::set<std::string> quant_keys;
    for (const auto& m : mods)
      if (m.quant && !m.experts_key.empty()) quant_keys.insert(m.experts_key.substr(0, m.experts_key.size() - 1));
    for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
      const auto& d = plan.decisions[di];
      if (d.shape.size() != 3 || !mods_of[di].empty() || !is_source_dtype(d.dtype) || !d.cls.text_stack) continue;
      if (fused_block.count(d.name) != 0) continue;
      const std::string parent = d.cls.module;
      for (const auto& k : quant_keys) {
        const std::string kparent(names::module_of(k));
        if (parent == k || parent == kparent || parent.rfind(k + ".", 0) == 0) {
          if (ign.take({d.name})) break;
          return make_error(Errc::BAD_INPUT,
                            "3-D tensor '{}' {} sits beside the quantized experts of '{}' but is not a storage form "
                            "fp4forge reads as experts; quantizing the rest would write a half-quantized MoE layer, "
                            "so nothing was written; hint: --ignore '{}' and --ignore 're:^{}\\..*' keep the "
                            "layer's experts unquantized",
                            d.name, format_shape(d.shape), k, d.name, k);
        }
      }
    }
  }
  std::map<std::string, std::pair<std::size_t, std::size_t>> layer;  // key -> (quantized, kept)
  std::map<std::string, std::string> pat_of;
  for (const auto& m : mods) {
    if (m.experts_key.empty()) continue;
    auto& c = layer[m.experts_key];
    (m.quant ? c.first : c.second) += 1;
    if (!m.pattern.empty()) pat_of[m.experts_key] = m.pattern;
  }
  for (const auto& [key, c] : layer)
    if (c.first && c.second)
      return make_error(Errc::USAGE,
                        "the routed experts of '{}' would be partly quantized ({} quantized, {} kept{}); vLLM "
                        "needs one scheme for all experts of a layer (F10); match all of them or none",
                        key.substr(0, key.size() - 1), c.first, c.second,
                        pat_of.count(key) ? fmt::format(", pattern '{}'", pat_of[key]) : std::string());
  return {};
}

void PlanBuilder::finalize_decisions() {
  for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
    auto& d = plan.decisions[di];
    d.scheme = plan.quant_scheme;
    if (mods_of[di].empty()) {
      d.action = Action::KEEP;
      const bool mtp = is_mtp(d);
      if (role_is_quantizable(d.cls.role) && !mtp && d.cls.text_stack) {
        d.rule = Rule::NOT_A_MATRIX;
        d.reason = ends_with(d.name, ".weight")
                       ? fmt::format("{}-D weight {}: only 2-D weights are quantized", d.shape.size(), format_shape(d.shape))
                       : fmt::format("'{}' parameter of a Linear: copied", d.cls.param);
      } else {
        d.rule = Rule::POLICY;
        d.reason = keep_reason(d.cls.role, mtp, !d.cls.text_stack);
      }
      continue;
    }
    const Mod& m0 = mods[mods_of[di].front()];
    d.scheme = qs_of(m0);
    const bool split = mods_of[di].size() > 1 || m0.module + ".weight" != d.name;
    d.action = m0.quant ? (split ? Action::SPLIT : Action::QUANTIZE) : Action::KEEP;
    d.rule = m0.rule;
    d.reason = m0.reason;
    d.pattern = m0.pattern;
    if (split && d.action == Action::SPLIT)
      d.reason = fmt::format("split into {} per-expert 2-D weights, each quantized", mods_of[di].size());
  }
}

void PlanBuilder::make_units() {
  unit_of.assign(mods.size(), SIZE_MAX);
  for (std::size_t k = 0; k < mods.size(); ++k) {
    const Mod& m = mods[k];
    if (!m.quant) continue;
    QuantUnit u;
    u.module = m.module;
    u.decision = m.decision;
    u.shard = plan.decisions[m.decision].shard;
    u.dtype = plan.decisions[m.decision].dtype;
    u.rows = m.rows;
    u.cols = m.cols;
    u.slice = m.slice;
    u.role = m.role;
    u.forced = m.forced;
    u.scheme = m.scheme;  // an index into cands until settle_schemes
    unit_of[k] = plan.units.size();
    plan.units.push_back(std::move(u));
    if (m.forced)
      plan.forced.push_back(fmt::format("{} ({}{})", m.module, role_name(plan.decisions[m.decision].cls.role),
                                        role_is_protected(plan.decisions[m.decision].cls.role) ? ", PROTECTED" : ""));
  }
}

void PlanBuilder::mark_passthrough() {
  if (!opts.fp8_passthrough || !plan.fp8_source) return;
  plan.lossless_casts = true;
  for (auto& u : plan.units) {
    const Fp8Weight* f = plan.fp8_of(u.decision);
    if (f == nullptr) continue;
    const Fp8Weight& w = *f;
    if (!fp8_passthrough_form(w, plan.schemes[u.scheme].scheme) || w.shape.size() != 2) continue;
    u.passthrough = true;
    u.scale_dtype = fp8::is_e8m0_scale(w.grid.scale_dtype) ? DType::F32 : w.grid.scale_dtype;
    ++plan.passthrough_units;
  }
}

Status PlanBuilder::make_scale_groups() {
  std::vector<bool> grouped(plan.units.size(), false);
  // Only NVFP4 shares a scale across a fused set; every other scheme's units stand alone.
  for (std::size_t si = 0; si < sets.size(); ++si) {
    if (!has_global_scale(qs_of(mods[mod_index[sets[si].members.front()]]))) continue;
    ScaleGroup g;
    g.name = sets[si].parent;
    g.kind = sets[si].kind;
    for (const auto& mn : sets[si].members) {
      const std::size_t u = unit_of[mod_index[mn]];
      if (u == SIZE_MAX) break;
      g.units.push_back(u);
    }
    if (g.units.size() != sets[si].members.size()) continue;  // kept set
    g.scheme = plan.units[g.units.front()].scheme;
    for (auto u : g.units) {
      grouped[u] = true;
      plan.units[u].group = plan.groups.size();
      g.source_bytes += plan.units[u].rows * plan.units[u].cols * elem_bytes(plan.units[u].dtype);
    }
    plan.groups.push_back(std::move(g));
  }
  for (std::size_t u = 0; u < plan.units.size(); ++u) {
    if (grouped[u]) continue;
    ScaleGroup g;
    g.name = plan.units[u].module;
    g.kind = "single";
    g.units = {u};
    g.scheme = plan.units[u].scheme;
    g.source_bytes = plan.units[u].rows * plan.units[u].cols * elem_bytes(plan.units[u].dtype);
    plan.units[u].group = plan.groups.size();
    plan.groups.push_back(std::move(g));
  }
  // Members of a group must share the dtype (the global scale is computed in it).
  for (const auto& g : plan.groups)
    for (auto u : g.units)
      if (plan.units[u].dtype != plan.units[g.units.front()].dtype)
        return make_error(Errc::BAD_INPUT, "fused set '{}' mixes dtypes ({} and {}); expected one dtype", g.name,
                          dtype_name(plan.units[u].dtype), dtype_name(plan.units[g.units.front()].dtype));
  return {};
}

void PlanBuilder::expand_ignore() {
  // Every kept 2-D weight, named as on disk.
  for (std::size_t k = 0; k < mods.size(); ++k)
    if (!mods[k].quant && mods_of[mods[k].decision].size() == 1 &&
        mods[k].module + ".weight" == plan.decisions[mods[k].decision].name)
      plan.ignore.push_back(mods[k].module);
  // Fused 3-D experts that stay unquantized (e.g. MTP experts) are one FusedMoE module, the block key
  // (`<prefix>.experts`), which vLLM must see as ignored or it expects per-expert weight_packed.
  for (const auto& b : blocks) {
    if (b.storage != ExpertStorage::FUSED) continue;
    for (const std::string& t : b.stored()) {
      const std::size_t di = decision_index(t);
      if (di != plan.decisions.size() && plan.decisions[di].action == Action::KEEP) {
        plan.ignore.push_back(b.key);
        break;
      }
    }
  }
  // The same modules under the prefixes vLLM matches `ignore` with (registry ignore_aliases).
  for (std::size_t i = 0, n = plan.ignore.size(); i < n; ++i)
    for (auto& a : vllm_ignore_aliases(plan.info.spec(), plan.ignore[i])) plan.ignore.push_back(std::move(a));
  std::sort(plan.ignore.begin(), plan.ignore.end());
  plan.ignore.erase(std::unique(plan.ignore.begin(), plan.ignore.end()), plan.ignore.end());
}

Status PlanBuilder::lay_out_shards() {
  std::vector<std::vector<st::OutTensor>> out(in.shard_names.size());
  std::vector<std::unordered_map<std::string, OutSource>> out_src(in.shard_names.size());
  for (std::size_t di = 0; di < plan.decisions.size(); ++di) {
    const auto& d = plan.decisions[di];
    if (d.action != Action::KEEP) continue;
    out[d.shard].push_back({d.name, d.dtype, d.shape});
    out_src[d.shard][d.name] = {OutKind::PASSTHROUGH, di};
  }
  for (std::size_t u = 0; u < plan.units.size(); ++u) {
    const auto& un = plan.units[u];
    const QuantScheme qs = plan.schemes[un.scheme].scheme;
    // A passthrough unit's scale keeps the source's dtype; every other FP8/W4A16 scale is in the weight's dtype.
    for (const LinearTensorSpec& t : linear_tensors(qs, un.rows, un.cols, un.out_dtype())) {
      st::OutTensor ot{fmt::format("{}.{}", un.module, t.suffix), t.dtype, t.shape};
      if (out_src[un.shard].count(ot.name))
        return make_error(Errc::BAD_INPUT, "output tensor '{}' collides with a source tensor of the same name",
                          ot.name);
      out_src[un.shard][ot.name] = {out_kind(t.part), u};
      out[un.shard].push_back(std::move(ot));
    }
    plan.quantized_params += un.rows * un.cols;
    plan.quantized_out_bytes += linear_bytes(qs, un.rows, un.cols, un.out_dtype());
  }
  for (std::size_t s = 0; s < in.shard_names.size(); ++s) {
    OutShard os;
    os.name = in.shard_names[s];
    if (s < in.shard_metadata.size()) os.metadata = in.shard_metadata[s];
    FP4FORGE_ASSIGN_OR_RETURN(os.layout, st::layout_shard(std::move(out[s]), os.metadata));
    for (const auto& t : os.layout.tensors) {
      const OutSource& from = out_src[s].at(t.name);
      os.sources.push_back(from);
      if (from.kind == OutKind::PACKED) plan.units[from.index].packed_begin = t.begin;
      if (from.kind == OutKind::SCALE) plan.units[from.index].scale_begin = t.begin;
      if (from.kind == OutKind::GLOBAL_SCALE) plan.units[from.index].global_scale_begin = t.begin;
      if (from.kind == OutKind::SHAPE) plan.units[from.index].shape_begin = t.begin;
      if (weight_map.contains(t.name))
        return make_error(Errc::BAD_INPUT, "output tensor '{}' would appear in two shards", t.name);
      weight_map[t.name] = os.name;
      plan.output_bytes += t.nbytes();
    }
    plan.shards.push_back(std::move(os));
  }
  return {};
}

void PlanBuilder::write_index_and_config() {
  plan.index_name = in.index_file.value_or("model.safetensors.index.json");
  plan.index_text = st::index_text(weight_map, plan.output_bytes);  // a copy: check_invariants reads the map too
  plan.config = in.config;
  // One scheme is the one-group config ({"group_0", S, observer, ["Linear"]}: ct_quant_config(S, ...) byte for byte).
  plan.config["quantization_config"] = ct_quant_config(ct_groups(plan), plan.ignore);
  plan.config_text = dump_config(plan.config);
}

void PlanBuilder::count_text_share() {
  for (const auto& m : mods) {
    const auto& d = plan.decisions[m.decision];
    if (!d.cls.text_stack) continue;
    plan.text_params += m.rows * m.cols;
    if (m.quant) plan.text_quantized_params += m.rows * m.cols;
    if (!m.quant && d.cls.role == Role::OTHER && d.linear_like) plan.unroled.push_back(m.module);
  }
  if (!plan.unroled.empty()) {
    std::vector<std::string> shown(plan.unroled.begin(), plan.unroled.begin() + std::min<std::size_t>(plan.unroled.size(), 8));
    plan.warnings.push_back(fmt::format(
        "KEPT UNQUANTIZED: {} Linear-like text-stack weight(s) have no role fp4forge knows ({}{}); they stay in "
        "16 bits. If vLLM builds them with the quantization config, quantize them by name with "
        "--force-quantize",
        plan.unroled.size(), fmt::join(shown, ", "), plan.unroled.size() > shown.size() ? ", ..." : ""));
  }
}

Status PlanBuilder::refuse_nothing_quantized() {
  if (!plan.units.empty() || opts.allow_nothing_quantized) return {};
  std::size_t kept_linear = 0;
  std::map<std::string, std::size_t> why;
  for (const auto& m : mods) {
    if (!plan.decisions[m.decision].cls.text_stack) continue;
    ++kept_linear;
    ++why[m.rule == Rule::K_NOT_ALIGNED || m.rule == Rule::N_NOT_ALIGNED ? "shape does not fit the scheme"
          : m.rule == Rule::USER_IGNORE                                 ? "--ignore"
          : plan.decisions[m.decision].cls.role == Role::OTHER          ? "no role fp4forge knows"
                                                                         : "kept by policy"];
  }
  std::vector<std::string> parts;
  for (const auto& [w, n] : why) parts.push_back(fmt::format("{}: {}", w, n));
  return make_error(Errc::BAD_INPUT,
                    "nothing to quantize: no text-stack Linear weight would be quantized with {} ({} Linear-like "
                    "weight(s) in the text stack{}{}); writing a copy of the source is not a quantization, so "
                    "nothing was written; hint: 'fp4forge inspect' shows the roles; another --scheme or "
                    "--force-quantize may fit",
                    plan.scheme, kept_linear, parts.empty() ? "" : ": ", fmt::format("{}", fmt::join(parts, ", ")));
}

void PlanBuilder::count_roles() {
  for (const auto& d : plan.decisions) {
    auto& c = plan.counts[static_cast<std::size_t>(d.cls.role)];
    if (d.action == Action::KEEP) {
      ++c.kept;
      if (d.linear_like) ++c.kept_linear;
    }
  }
  for (const auto& u : plan.units) ++plan.counts[static_cast<std::size_t>(u.role)].quantized;
}

void PlanBuilder::summarize() {
  // Issue 29: a re-save that lost its MTP layers quantized without a word (only doctor said so).
  if (plan.info.mtp_num_hidden_layers > 0 && !opts.allow_nothing_quantized &&
      std::none_of(plan.decisions.begin(), plan.decisions.end(),
                   [](const TensorDecision& d) { return d.cls.role == Role::MTP; }))
    plan.warnings.push_back(fmt::format(
        "config.json declares {} MTP layer(s) but the checkpoint has no MTP tensors (a re-save that dropped them?): "
        "the output cannot serve speculative decoding; 'fp4forge doctor --fix --mtp-from ORIGINAL' splices them "
        "back, or quantize the original release",
        plan.info.mtp_num_hidden_layers));
  std::uint64_t attn = 0, mlp = 0, expert = 0, shared = 0, linear_attn = 0, other = 0;
  for (const auto& u : plan.units) {
    // Counted by the group of its role when that role is a per-module Linear (role table); the rest was forced.
    const RoleTraits& rt = role_traits(u.role);
    switch (rt.linear && !rt.expert_stack ? rt.group : RoleGroup::OTHER) {
      case RoleGroup::ATTENTION: ++attn; break;
      case RoleGroup::DENSE_MLP: ++mlp; break;
      case RoleGroup::EXPERTS: ++expert; break;
      case RoleGroup::SHARED_EXPERTS: ++shared; break;
      case RoleGroup::LINEAR_ATTENTION: ++(u.forced ? other : linear_attn); break;
      default: ++other; break;
    }
  }
  auto line = [&](std::uint64_t n, std::string_view what) {
    if (n) plan.summary.push_back(fmt::format("{} {} Linear{} quantized", format_count(n), what, n == 1 ? "" : "s"));
  };
  line(attn, "attention");
  line(mlp, "MLP");
  line(expert, "expert");
  line(shared, "shared-expert");
  line(linear_attn, "linear-attention");
  line(other, "forced");
  for (int r = 0; r < kRoleCount; ++r) {
    const auto& c = plan.counts[static_cast<std::size_t>(r)];
    const auto [one, many] = role_noun(static_cast<Role>(r));
    if (c.kept == 0 || one.empty()) continue;
    plan.summary.push_back(fmt::format("{} {} kept", format_count(c.kept), c.kept == 1 ? one : many));
  }
  std::uint64_t other_kept = 0;
  for (int r = 0; r < kRoleCount; ++r)
    if (role_noun(static_cast<Role>(r)).first.empty()) other_kept += plan.counts[static_cast<std::size_t>(r)].kept;
  if (other_kept)
    plan.summary.push_back(fmt::format("{} other tensor{} kept (biases, unaligned or ignored weights, ...)",
                                       format_count(other_kept), other_kept == 1 ? "" : "s"));
  if (plan.passthrough_units > 0)
    plan.summary.push_back(fmt::format("{} FP8 weight{} passed through losslessly (payload copied, scale renamed)",
                                       format_count(plan.passthrough_units), plan.passthrough_units == 1 ? "" : "s"));
  if (plan.schemes.size() > 1)
    for (const PlanScheme& ps : plan.schemes)
      plan.summary.push_back(fmt::format("{}: {} {} weight{} ({})", ps.group, format_count(ps.units),
                                         quant_scheme_preset(ps.scheme), ps.units == 1 ? "" : "s",
                                         ps.rules.empty() ? std::string("the default scheme")
                                                          : fmt::format("{}", fmt::join(ps.rules, ", "))));
  if (plan.text_params > 0)
    plan.summary.push_back(fmt::format("{:.1f} % of the text stack's Linear parameters quantized",
                                       100.0 * plan.text_quantized_share()));
  for (const auto& f : plan.forced)
    plan.warnings.push_back(fmt::format("FORCED: quantizing {} against the never-quantize policy "
                                        "(--force-quantize); vLLM may refuse or mis-serve it",
                                        f));
}

Status PlanBuilder::check_invariants() {
  auto fail = [](std::string what) { return make_error(Errc::INTERNAL, "plan invariant failed: {}", what); };
  std::set<std::string> ign_set(plan.ignore.begin(), plan.ignore.end());
  std::set<std::string> passthrough;
  for (const auto& sh : plan.shards)
    for (std::size_t i = 0; i < sh.sources.size(); ++i)
      if (sh.sources[i].kind == OutKind::PASSTHROUGH) passthrough.insert(sh.layout.tensors[i].name);
  for (const auto& u : plan.units) {
    const auto& d = plan.decisions[u.decision];
    if (u.scheme >= plan.schemes.size()) return fail(u.module + ": scheme index");
    const QuantScheme qs = plan.schemes[u.scheme].scheme;
    const ShapeRule rule = shape_rule(qs);
    if (plan.groups[u.group].scheme != u.scheme) return fail(u.module + ": a scale group of two schemes");
    if (u.cols % rule.k_multiple != 0 || u.rows % rule.n_multiple != 0 || u.cols == 0 || u.rows == 0)
      return fail(u.module + ": shape does not fit the scheme");
    if (!is_source_dtype(u.dtype)) return fail(u.module + ": dtype");
    if (ign_set.count(u.module)) return fail(u.module + ": quantized and in ignore");
    if (!u.forced && !policy_quantizes(d.cls.role, plan.info.spec(), qs, leaf_of(u.module)))
      return fail(u.module + ": protected role " + std::string(role_name(d.cls.role)) + " in the quantize set");
    if (passthrough.count(d.name)) return fail(d.name + ": quantized source weight still written");
  }
  for (const auto& d : plan.decisions)
    if (d.action == Action::KEEP && d.linear_like && !ign_set.count(d.name.substr(0, d.name.size() - 7)))
      return fail(d.name + ": kept 2-D weight missing from ignore");
  for (const auto& s : sets) {
    std::size_t nq = 0;
    for (const auto& mn : s.members) nq += mods[mod_index[mn]].quant ? 1 : 0;
    if (nq != 0 && nq != s.members.size()) return fail("fused set " + s.parent + " split");
  }
  for (const auto& g : plan.groups)
    for (auto u : g.units)
      if (plan.units[u].group != static_cast<std::size_t>(&g - plan.groups.data())) return fail("group index");
  std::uint64_t total = 0;
  for (const auto& s : plan.shards) total += s.layout.tensors.empty() ? 0 : s.layout.tensors.back().end;
  if (total != plan.output_bytes) return fail("total_size");
  return {};
}


Status PlanBuilder::check_rules() {
  std::vector<std::string> idle;  // one warning for them all: a recipe of 10,000 rules is not 10,000 lines (R4-B19)
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (rule_hits[i] > 0) continue;
    for (const Selector& sel : rules[i].selectors) {
      if (!sel.is_exact()) continue;
      const bool exists = std::any_of(mods.begin(), mods.end(), [&](const Mod& m) {
        return m.module == sel.text() || plan.decisions[m.decision].name == sel.text();
      });
      if (!exists)
        return make_error(Errc::USAGE,
                          "{}: '{}' matches no module of the checkpoint; give a module name as on disk (without "
                          "'.weight'), a role ({}) or re:REGEX",
                          rules[i].origin, sel.text(), fmt::join(selector_roles(), ", "));
    }
    idle.push_back(rules[i].origin);
  }
  if (idle.size() == 1)
    plan.warnings.push_back(fmt::format("{} selects no module (an earlier rule or nothing matched)", idle[0]));
  else if (!idle.empty())
    plan.warnings.push_back(fmt::format("{} rules select no module (an earlier rule or nothing matched): {}",
                                        format_count(idle.size()), format_list(idle)));
  return {};
}

void PlanBuilder::settle_schemes() {
  for (const auto& u : plan.units) {
    ++cands[u.scheme].units;
    cands[u.scheme].params += u.rows * u.cols;
  }
  for (std::size_t k = 1; k < cands.size(); ++k)
    if (cands[k].units == 0)
      plan.warnings.push_back(fmt::format("{}: no quantized module takes {} (the modules it selects are kept)",
                                          format_list(cands[k].rules), quant_scheme_preset(cands[k].scheme)));
  std::vector<std::size_t> remap(cands.size(), SIZE_MAX);
  for (std::size_t k = 0; k < cands.size(); ++k) {
    if (cands[k].units == 0 && !(k == 0 && plan.units.empty())) continue;  // nothing quantized: the default stays
    remap[k] = plan.schemes.size();
    plan.schemes.push_back(cands[k]);
  }
  std::vector<std::string_view> names, observers;
  for (std::size_t i = 0; i < plan.schemes.size(); ++i) {
    PlanScheme& ps = plan.schemes[i];
    ps.group = fmt::format("group_{}", i);
    // The default scheme's group targets Linear (what no rule selects); every other group names its modules.
    if (plan.schemes.size() == 1 || (i == 0 && remap[0] == 0)) ps.targets = {"Linear"};
    names.push_back(quant_scheme_name(ps.scheme));
    observers.push_back(observer_option(ps.observer));
  }
  plan.scheme = fmt::format("{}", fmt::join(names, "+"));
  plan.observers = fmt::format("{}", fmt::join(observers, "+"));
  for (auto& u : plan.units) u.scheme = remap[u.scheme];
}

namespace {

/**
 * A module name as a `re:` target of every name of its form: from the component before its first index (the
 * `layers` of `model.layers.0...`) on, digit-only components (layer and expert indices) as \d+, the rest literal,
 * anchored at the end; any prefix before it. vLLM renames the prefixes of targets with the model's
 * hf_to_vllm_mapper (`apply_vllm_mapper`: target_scheme_map keys and ignore, read in the code index; release
 * inferred), which rewrites exact names but not a pattern's text: the pattern therefore does not spell the prefix
 * (`model.language_model.` on disk, `language_model.model.` in vLLM). "" for a name without an index (written
 * exactly).
 */
std::string generalize(std::string_view name) {
  std::vector<std::string_view> parts;
  for (std::size_t i = 0; i <= name.size();) {
    std::size_t j = name.find('.', i);
    if (j == std::string_view::npos) j = name.size();
    parts.push_back(name.substr(i, j - i));
    i = j + 1;
  }
  auto numeric = [](std::string_view p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::size_t first = 0;
  while (first < parts.size() && !numeric(parts[first])) ++first;
  if (first == parts.size() || first == 0) return {};
  std::string out = "(?:.*\\.)?";
  for (std::size_t k = first - 1; k < parts.size(); ++k) {
    if (k >= first) out += "\\.";
    if (numeric(parts[k])) {
      out += "\\d+";
      continue;
    }
    for (char c : parts[k]) {
      if (std::string_view("\\.^$|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
  }
  return out + "$";
}

}  // namespace

Status PlanBuilder::make_targets() {
  if (plan.schemes.size() <= 1) return {};
  auto fail = [](std::string what) { return make_error(Errc::INTERNAL, "plan invariant failed: {}", what); };
  // Every name vLLM looks a scheme up by, with its group: the quantized modules, the fused layers they load
  // into, and the expert projections get_moe_method asks for (<experts>.0.gate_proj, ...), each also under
  // the prefixes vLLM renames (registry ignore_aliases).
  std::map<std::string, std::size_t> owner;
  std::string clash;
  auto add = [&](const std::string& name, std::size_t sc) {
    std::vector<std::string> all = vllm_ignore_aliases(plan.info.spec(), name);
    all.push_back(name);
    for (const auto& n : all) {
      const auto [it, fresh] = owner.emplace(n, sc);
      if (!fresh && it->second != sc && clash.empty()) clash = n;
    }
  };
  for (const auto& u : plan.units) add(u.module, u.scheme);
  struct Fused {
    std::string layer;
    std::vector<std::string> members;
    std::size_t scheme;
  };
  std::vector<Fused> fused;
  for (const auto& set : sets) {
    const std::string_view leaf = vllm_fused_leaf(set.kind);
    const std::size_t u0 = unit_of[mod_index[set.members.front()]];
    if (leaf.empty() || u0 == SIZE_MAX) continue;
    fused.push_back({set.parent + "." + std::string(leaf), set.members, plan.units[u0].scheme});
    add(fused.back().layer, fused.back().scheme);
  }
  std::map<std::string, std::size_t> experts;  // "<...>.experts" -> scheme
  for (std::size_t k = 0; k < mods.size(); ++k)
    if (mods[k].quant && !mods[k].experts_key.empty() && unit_of[k] != SIZE_MAX)
      experts.emplace(mods[k].experts_key.substr(0, mods[k].experts_key.size() - 1), plan.units[unit_of[k]].scheme);
  for (const auto& [key, sc] : experts)
    for (const char* p : {".0.gate_proj", ".0.up_proj", ".0.down_proj"}) add(key + p, sc);
  if (!clash.empty()) return fail(fmt::format("'{}' is asked for in two config groups", clash));
  // Per group: one `re:` target per name form, or the exact names where the form also selects another group's.
  for (std::size_t g = 0; g < plan.schemes.size(); ++g) {
    PlanScheme& ps = plan.schemes[g];
    if (!ps.targets.empty()) continue;  // the Linear group
    std::map<std::string, std::vector<std::string>> by_form;
    for (const auto& [n, sc] : owner)
      if (sc == g) by_form[generalize(n)].push_back(n);
    for (auto& [form, names] : by_form) {
      if (form.empty()) {  // no index to generalize: the names themselves
        ps.targets.insert(ps.targets.end(), names.begin(), names.end());
        continue;
      }
      FP4FORGE_ASSIGN_OR_RETURN(const Regex re, Regex::compile(form));
      const bool clean = std::all_of(owner.begin(), owner.end(),
                                     [&](const auto& o) { return o.second == g || !re.match_prefix(o.first); });
      if (clean) ps.targets.push_back("re:" + form);
      else ps.targets.insert(ps.targets.end(), names.begin(), names.end());
    }
  }
  // Proof: vLLM's own lookup (model/quant_config.h GroupMatcher) over the config as written gives every module,
  // fused layer and experts block the group the plan quantized it in.
  FP4FORGE_ASSIGN_OR_RETURN(const QuantConfig qc, parse_quant_config(ct_quant_config(ct_groups(plan), plan.ignore)));
  FP4FORGE_ASSIGN_OR_RETURN(const GroupMatcher gm, GroupMatcher::compile(qc));
  FP4FORGE_ASSIGN_OR_RETURN(const IgnoreMatcher ign_m, IgnoreMatcher::compile(plan.ignore));
  std::vector<std::size_t> of_file(qc.groups.size(), SIZE_MAX);  // file-order group -> plan.schemes index
  for (std::size_t i = 0; i < qc.groups.size(); ++i)
    for (std::size_t g = 0; g < plan.schemes.size(); ++g)
      if (plan.schemes[g].group == qc.groups[i].name) of_file[i] = g;
  auto group_of = [&](const GroupMatch& m) { return m.group < 0 ? SIZE_MAX : of_file[static_cast<std::size_t>(m.group)]; };
  auto name_of = [&](std::size_t g) { return g == SIZE_MAX ? std::string("no group") : plan.schemes[g].group; };
  for (const auto& u : plan.units)
    if (const std::size_t got = group_of(gm.match(u.module, "Linear")); got != u.scheme)
      return fail(fmt::format("vLLM would give '{}' {} instead of {}", u.module, name_of(got), name_of(u.scheme)));
  for (const auto& f : fused)
    if (const std::size_t got = group_of(gm.match(f.layer, "Linear", f.members)); got != f.scheme)
      return fail(fmt::format("vLLM would give fused layer '{}' {} instead of {}", f.layer, name_of(got),
                              name_of(f.scheme)));
  for (const auto& [key, sc] : experts) {
    FP4FORGE_ASSIGN_OR_RETURN(const GroupMatch m, gm.moe(ign_m, key));
    if (group_of(m) != sc)
      return fail(fmt::format("vLLM would give experts '{}' {} instead of {}", key, name_of(group_of(m)), name_of(sc)));
  }
  return {};
}

}  // namespace

bool fp8_passthrough_form(const Fp8Weight& w, QuantScheme s) noexcept {
  const fp8::ScaleGrid& g = w.grid;
  if (g.payload != fp8::Payload::E4M3) return false;
  // E8M0 scales (F8_E8M0, U8 exponents) are written as their exact F32 values.
  if (g.scale_dtype != DType::F32 && g.scale_dtype != DType::BF16 && g.scale_dtype != DType::F8_E8M0 &&
      g.scale_dtype != DType::U8)
    return false;
  const SchemeTraits& t = scheme_traits(s);
  if (((t.passthrough_layouts >> static_cast<unsigned>(g.layout)) & 1u) == 0) return false;
  // Blocks must be the scheme's own (vLLM's 128 x 128).
  return g.layout != fp8::ScaleLayout::BLOCK || (g.block_rows == fp8::kBlock && g.block_cols == fp8::kBlock);
}

namespace {

/** The planner input of an FP8 source's bf16 expansion: FP8 weights as BF16 tensors of their shape, their
 * scales and the dropped activation scales gone, the quantization config removed. */
PlanInput expanded_input(const PlanInput& in, const Fp8Source& fp8) {
  PlanInput out;
  out.config = expanded_config(in.config);
  out.shard_names = in.shard_names;
  out.index_file = in.index_file;
  out.shard_metadata = in.shard_metadata;
  out.notes = in.notes;
  for (const auto& t : in.tensors) {
    if (fp8.consumed(t.name)) continue;
    SourceTensor e = t;
    if (const Fp8Weight* w = fp8.find(t.name)) {
      e.dtype = DType::BF16;
      e.shape = w->shape;  // a packed FP4 payload expands to twice its stored width
    }
    out.tensors.push_back(std::move(e));
  }
  return out;
}

}  // namespace

Result<QuantPlan> make_plan(const PlanInput& in0, const PlanOptions& opts) {
  std::optional<Fp8Source> fp8;
  {
    std::vector<Fp8TensorInfo> ts;
    ts.reserve(in0.tensors.size());
    for (const auto& t : in0.tensors) ts.push_back({t.name, t.dtype, t.shape});
    FP4FORGE_ASSIGN_OR_RETURN(fp8, detect_fp8_source(in0.config, in0.hf_quant_config ? &*in0.hf_quant_config : nullptr, ts));
  }
  std::optional<PlanInput> expanded;
  if (fp8) expanded = expanded_input(in0, *fp8);
  const PlanInput& in = expanded ? *expanded : in0;
  PlanBuilder b(in, opts);
  FP4FORGE_TRY(b.check_inputs());
  FP4FORGE_TRY(b.parse_patterns());
  FP4FORGE_TRY(b.make_decisions());
  if (fp8) {
    for (auto& d : b.plan.decisions)
      if (const Fp8Weight* w = fp8->find(d.name)) d.fp8 = static_cast<std::size_t>(w - fp8->weights.data());
    b.plan.source_bytes = 0;
    for (const auto& t : in0.tensors) b.plan.source_bytes += st::shape_numel(t.shape) * elem_bytes(t.dtype);
    b.plan.warnings.insert(b.plan.warnings.begin(), fp8->warnings.begin(), fp8->warnings.end());
    if (!fp8->dropped.empty())
      b.plan.warnings.push_back(fmt::format(
          "{} activation/KV-cache scale tensor(s) of the FP8 source not carried over (e.g. '{}'): the output keeps "
          "activations and the KV cache in 16 bits",
          fp8->dropped.size(), fp8->dropped.front()));
    b.plan.fp8_source = std::move(fp8);
  }
  b.find_fused_experts();
  FP4FORGE_TRY(b.add_candidates());
  FP4FORGE_TRY(b.apply_user_patterns());
  FP4FORGE_TRY(b.refuse_unservable_experts());
  FP4FORGE_TRY(b.apply_shape_rules());
  FP4FORGE_TRY(b.settle_fused_sets());
  FP4FORGE_TRY(b.check_expert_uniformity());
  FP4FORGE_TRY(b.check_unused(b.ign));  // after every step that asks the patterns
  FP4FORGE_TRY(b.check_unused(b.frc));
  b.finalize_decisions();
  b.make_units();
  FP4FORGE_TRY(b.check_rules());
  b.settle_schemes();
  b.mark_passthrough();
  FP4FORGE_TRY(b.make_scale_groups());
  b.expand_ignore();
  FP4FORGE_TRY(b.make_targets());
  FP4FORGE_TRY(b.lay_out_shards());
  b.write_index_and_config();
  b.count_text_share();
  FP4FORGE_TRY(b.refuse_nothing_quantized());
  b.count_roles();
  b.summarize();
  FP4FORGE_TRY(b.check_invariants());
  return std::move(b.plan);
}


}  // namespace fp4forge::quant
