// The quantize planner (quantize/plan.h): make_plan as the ordered steps of one PlanBuilder (plan_builder.h),
// from the tensors' roles to the shards and the config. This file holds the plan proper: inputs, decisions,
// candidates, units, schemes, scale groups, ignore list, shards, index and config, and make_plan, the order the
// steps run in; the patterns are in plan_patterns.cc, the keep/refuse rules in plan_rules.cc, the summary in
// plan_summary.cc.
#include "plan_builder.h"

namespace fp4forge::quant::plan_internal {

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
    case Role::LINEAR_ATTN:
      return "linear attention: kept in 16 bits (architectures.md 5.3)";
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

namespace {

/** "<...>.experts." (the trailing dot: as blk.key + "."), "" for a name outside routed experts. */
std::string experts_prefix_of(std::string_view module) {
  const std::string_view key = experts_key_of(module);
  return key.empty() ? std::string() : std::string(key) + ".";
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

Status PlanBuilder::check_inputs() {
  {
    plan.quant_scheme = opts.scheme;
    plan.scheme = std::string(quant_scheme_name(plan.quant_scheme));
    plan.observer = opts.observer.value_or(default_observer(plan.quant_scheme));
    FP4FORGE_TRY(check_observer(plan.quant_scheme, plan.observer));
    cands.push_back(PlanScheme{"", plan.quant_scheme, plan.observer, {}, {}, 0, 0, {}});
    for (const SchemeRule& r : opts.scheme_for) {
      FP4FORGE_ASSIGN_OR_RETURN(CompiledRule c, compile_rule(r));
      std::size_t k = 0;
      while (k < cands.size() && (cands[k].scheme != c.scheme || cands[k].observer != c.observer)) ++k;
      if (k == cands.size()) cands.push_back(PlanScheme{"", c.scheme, c.observer, {}, {}, 0, 0, {}});
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

void PlanBuilder::settle_schemes() {
  for (const auto& u : plan.units) {
    ++cands[u.scheme].units;
    cands[u.scheme].params += u.rows * u.cols;
  }
  for (const Mod& m : mods)
    if (!m.quant && (m.rule == Rule::K_NOT_ALIGNED || m.rule == Rule::N_NOT_ALIGNED || m.rule == Rule::FUSED_SET))
      ++cands[m.scheme].kept[m.rule];
  for (std::size_t k = 1; k < cands.size(); ++k)
    if (cands[k].units == 0)
      // (When it kept none, it selected none that reached a scheme: no "the modules it selects are kept" beside the
      // "selects no module" warning, issue 55 tryout.)
      plan.warnings.push_back(fmt::format(
          "{}: no quantized module takes {}{}", format_list(cands[k].rules), quant_scheme_preset(cands[k].scheme),
          cands[k].kept.empty() ? std::string()
                                : " (the modules it selects are kept: " + kept_by_rule(cands[k]) + ")"));
  // The rules took every module the default would: said (issue 55 tryout: last_n_layers=5 on a 2-layer model made the
  // whole model FP8 with no word of it).
  if (cands.size() > 1 && cands[0].units == 0 && !plan.units.empty()) {
    std::vector<std::string> rules;
    for (std::size_t k = 1; k < cands.size(); ++k)
      if (cands[k].units > 0) rules.push_back(format_list(cands[k].rules));
    plan.warnings.push_back(
        fmt::format("the default scheme {} takes no module: {} {} every module it would "
                    "(a selector as large as the model, such as last_n_layers=K with K at least "
                    "its layer count?)",
                    quant_scheme_preset(cands[0].scheme), fmt::join(rules, " and "),
                    rules.size() == 1 ? "selects" : "select"));  // one verb per subject (issue 55 tryout H)
  }
  std::vector<std::size_t> remap(cands.size(), SIZE_MAX);
  for (std::size_t k = 0; k < cands.size(); ++k) {
    if (cands[k].units == 0 && !(k == 0 && plan.units.empty())) {  // nothing quantized: the default stays
      if (k > 0) plan.unused_schemes.push_back(cands[k]);
      continue;
    }
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

}  // namespace fp4forge::quant::plan_internal

namespace fp4forge::quant {

using plan_internal::elem_bytes;
using plan_internal::PlanBuilder;

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
  if (b.plan.output_bytes > b.plan.source_bytes) {
    // A release stored in fewer bits than the plan writes (DeepSeek-V4's FP4 experts and FP8 rest, issue 55): the
    // "quantized" output grows, said with both densities instead of a silent larger folder.
    std::uint64_t params = 0;
    for (const auto& t : in.tensors) params += st::shape_numel(t.shape);
    const double per = params > 0 ? 8.0 / static_cast<double>(params) : 0.0;
    b.plan.warnings.push_back(fmt::format(
        "the output's weights ({}) are more than the source's ({}): the source stores {:.2f} bits per parameter, the "
        "output "
        "{:.2f} ({} weights take {:.2f} bits, kept tensors are written in 16 bits); the source is a release in fewer "
        "bits than {} writes: serve it as it is where vLLM reads its format, or quantize its BF16 original",
        format_bytes(b.plan.output_bytes), format_bytes(b.plan.source_bytes),
        static_cast<double>(b.plan.source_bytes) * per, static_cast<double>(b.plan.output_bytes) * per, b.plan.scheme,
        b.plan.bits_per_weight(), b.plan.scheme));
  }
  FP4FORGE_TRY(b.check_invariants());
  return std::move(b.plan);
}

}  // namespace fp4forge::quant
