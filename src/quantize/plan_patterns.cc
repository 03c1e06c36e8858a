// The planner's patterns (plan_builder.h): --ignore and --force-quantize compiled and applied to the candidate
// modules, the patterns and recipe rules that selected nothing, and a recipe's config groups as the `re:` targets
// vLLM matches, proven with vLLM's own group lookup before anything is written.
#include "plan_builder.h"

namespace fp4forge::quant::plan_internal {

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

}  // namespace fp4forge::quant::plan_internal
