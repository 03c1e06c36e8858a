// The planner's keep and refuse rules (plan_builder.h): experts vLLM cannot serve quantized, the shape rules of
// each scheme, fused sets all in or all out, a layer's experts with one scheme, "nothing quantized" refused, and
// the invariants checked before any byte is written.
#include "plan_builder.h"

namespace fp4forge::quant::plan_internal {

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
      // Said as the outcome (issue 55 tryout: "(q_proj quantized, k_proj+v_proj kept) kept whole" read as if q_proj
      // stayed quantized).
      plan.warnings.push_back(fmt::format(
          "fused set {} of '{}' kept whole in 16 bits ({} too): {}'s shape does not "
          "fit {}, and vLLM loads the members as one module",
          s.kind, s.parent, fmt::join(q, "+"), fmt::join(kept, "+"), quant_scheme_preset(qs_of(mods[ks.front()]))));
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
                        "needs one scheme for all experts of a layer (F10); match all of them or none; hint: "
                        "--ignore {} keeps this layer's experts",
                        key.substr(0, key.size() - 1), c.first, c.second,
                        pat_of.count(key) ? fmt::format(", pattern '{}'", pat_of[key]) : std::string(),
                        key.substr(0, key.size() - 1));
  return {};
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

}  // namespace fp4forge::quant::plan_internal
