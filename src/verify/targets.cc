// verify: the config groups' targets against what vLLM looks up (check_targets; issue 27 #11, issue 30).
#include "verify/internal.h"

#include "fp4forge/model/experts.h"
#include "fp4forge/model/registry.h"

namespace fp4forge::verify_internal {

/** Issue 27 #11: a group whose targets select no quantized module (an empty list, a `re:` target that matches
 * nothing on disk) declares packed tensors vLLM will not build as quantized. Issue 30: and a quantized module no
 * group selects (vllm_group_of: by name, then as a Linear class) has no scheme in vLLM to load it with. */
void check_targets(const Structure& s, FindingSink& sink) {
  if (!s.qc) return;
  // The names vLLM looks a scheme up by: the quantized modules, the fused layers they load into (packed names),
  // and the expert projections get_moe_method asks for (<experts>.0.gate_proj, ...).
  std::set<std::string> asked;
  std::vector<std::string> problems;  // one line each: a layer whose group is not its tensors'
  std::vector<std::string> problem_tensors;
  auto group_name = [&](long g) {
    return g < 0 ? std::string("no group") : fmt::format("'{}'", s.qc->groups[static_cast<std::size_t>(g)].name);
  };
  {
    std::vector<std::string> uncovered;
    std::size_t count = 0;
    for (const auto& [name, m] : s.modules) {
      if (!m.quantized()) continue;
      asked.insert(name);
      if (!s.matcher) break;  // a target that cannot be compiled: reported below
      if (s.matcher->match(name, "Linear").group >= 0) continue;
      if (uncovered.size() < 5) uncovered.push_back(name);
      ++count;
    }
    if (count > 0)
      sink.add(finding_kind("quant-config-invalid"),
               {.group = "quantization_config",
                .message = fmt::format(
                    "{} quantized module(s) match no config group's targets (e.g. {}): vLLM has no scheme to "
                    "load their packed weights with (docs/mixed-precision.md)",
                    count, fmt::join(uncovered, ", ")),
                .tensors = uncovered,
                .key = "quantization_config.config_groups.*.targets",
                .expected = "a group for every quantized module",
                .actual = fmt::format("{} uncovered", count),
                .hint = kHintRequant});
  }
  // A fused layer takes one group for all its shards (the first shard's when matched through them): a member
  // written in another group's scheme is loaded as the wrong one. Only a multi-group config can disagree.
  for (const FusedSet& set : s.sets) {
    const std::string_view leaf = vllm_fused_leaf(set.kind);
    if (leaf.empty()) continue;
    const bool all_q = std::all_of(set.members.begin(), set.members.end(), [&](const std::string& mem) {
      const auto it = s.modules.find(mem);
      return it != s.modules.end() && it->second.quantized();
    });
    if (!all_q) continue;
    const std::string layer = set.parent + "." + std::string(leaf);
    asked.insert(layer);
    if (!s.matcher || s.qc->groups.size() < 2) continue;
    const long g = s.matcher->match(layer, "Linear", set.members).group;
    for (const auto& mem : set.members) {
      const long mg = s.matcher->match(mem, "Linear").group;
      if (mg == g) continue;
      problems.push_back(fmt::format("fused layer '{}' takes group {} but its member '{}' is written for group {}",
                                     layer, group_name(g), mem, group_name(mg)));
      problem_tensors.push_back(s.modules.at(mem).payload->name);
      break;
    }
  }
  // A layer's routed experts: one FusedMoE, one group (get_moe_method).
  std::map<std::string, long> experts;  // "<...>.experts" -> the group of its first quantized expert module
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized() || m.cls.expert < 0) continue;
    const std::string key(experts_key_of(name));
    if (key.empty()) continue;
    const long mg = s.matcher ? s.matcher->match(name, "Linear").group : -1;
    const auto [it, fresh] = experts.emplace(key, mg);
    if (!fresh && it->second != mg && s.qc->groups.size() >= 2) {
      problems.push_back(fmt::format("experts '{}' are written for two groups ({} and {})", key,
                                     group_name(it->second), group_name(mg)));
      problem_tensors.push_back(m.payload->name);
    }
  }
  for (const auto& [key, mg] : experts) {
    for (const char* proj : {".0.gate_proj", ".0.up_proj", ".0.down_proj"}) asked.insert(key + proj);
    if (!s.matcher || !s.ignore || s.qc->groups.size() < 2) continue;
    auto g = s.matcher->moe(*s.ignore, key);
    if (!g.ok()) {
      problems.push_back(g.error().message);
    } else if (g->group != mg) {
      problems.push_back(fmt::format("experts '{}' load as FusedMoE with group {} but are written for group {}", key,
                                     group_name(g->group), group_name(mg)));
    }
  }
  if (!problems.empty())
    sink.add(finding_kind("quant-config-invalid"),
             {.group = "quantization_config",
              .message = fmt::format(
                  "{} layer(s) would be loaded with another config group than their tensors are written for: "
                  "{}{} (docs/mixed-precision.md §2)",
                  problems.size(), problems.front(), problems.size() > 1 ? ", ..." : ""),
              .tensors = problem_tensors,
              .key = "quantization_config.config_groups.*.targets",
              .expected = "each fused layer and experts block selected by the group its tensors are written for",
              .actual = fmt::format("{} mismatched", problems.size()),
              .hint = "name fused layers by their vLLM names in the group's targets (fp4forge quantize does); " +
                      std::string(kHintRequant)});
  for (const ConfigGroup& g : s.qc->groups) {
    const std::string gkey = fmt::format("quantization_config.config_groups.{}.targets", g.name);
    if (g.targets.empty()) {
      sink.add(finding_kind("quant-config-invalid"),
               {.group = gkey,
                .message =
                    fmt::format("{} is empty: vLLM applies the group to no module, so the packed weights are loaded as "
                                "if unquantized (and fail)",
                                gkey),
                .key = gkey,
                .expected = "[\"Linear\"] (or the modules' names)",
                .actual = "[]",
                .hint = kHintRequant});
      continue;
    }
    for (const std::string& t : g.targets) {
      if (t.rfind("re:", 0) != 0) continue;
      auto re = Regex::compile(std::string_view(t).substr(3));
      if (!re.ok()) {
        sink.add(finding_kind("quant-config-invalid"),
                 {.group = gkey,
                  .message = fmt::format("{}: target '{}' cannot be evaluated: {}", gkey, t, re.error().message),
                  .key = gkey,
                  .expected = "a pattern vLLM can evaluate",
                  .actual = t,
                  .hint = kHintRequant});
        continue;
      }
      const bool any =
          std::any_of(asked.begin(), asked.end(), [&](const std::string& n) { return re->match_prefix(n); });
      if (!any)
        sink.add(finding_kind("quant-config-invalid"),
                 {.group = gkey,
                  .message = fmt::format(
                      "{}: target '{}' matches no quantized module on disk: the group applies to nothing it "
                      "describes",
                      gkey, t),
                  .key = gkey,
                  .expected = "a target that selects the packed modules",
                  .actual = t,
                  .hint = kHintRequant});
    }
  }
}

}  // namespace fp4forge::verify_internal
