// The quantize plan as text and JSON (quantize/plan.h to_text / to_json).
#include "fp4forge/quantize/plan.h"

#include "fp4forge/codec/observer.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/safetensors/index.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/safetensors/header.h"

namespace fp4forge::quant {

using ojson = nlohmann::ordered_json;
using util::ends_with;
using util::starts_with;

namespace {

/** Scale groups of schemes that share a global scale (NVFP4A16's fused sets and singletons). */
std::size_t global_scale_groups(const QuantPlan& plan) {
  return static_cast<std::size_t>(std::count_if(plan.groups.begin(), plan.groups.end(), [&](const ScaleGroup& g) {
    return g.scheme < plan.schemes.size() && has_global_scale(plan.schemes[g.scheme].scheme);
  }));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

namespace {

/** Element encodes the searched observers run: each searched group's parameters times its search's steps (the
 * full count: `memoryless_mse` may stop early). 0 when no group searches. */
std::uint64_t search_trials(const QuantPlan& plan) {
  std::uint64_t n = 0;
  for (const PlanScheme& ps : plan.schemes)
    if (const auto spec = search_spec(ps.observer)) n += ps.params * static_cast<std::uint64_t>(spec->total_steps());
  return n;
}

int max_search_steps(const QuantPlan& plan) {
  int steps = 0;
  for (const PlanScheme& ps : plan.schemes)
    if (const auto spec = search_spec(ps.observer); spec && ps.params > 0) steps = std::max(steps, spec->total_steps());
  return steps;
}

}  // namespace

std::string to_text(const QuantPlan& plan, bool verbose) {
  // Names, config values, rules and warnings come from files and arguments: each written escaped (R4-B5).
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };
  std::string s;
  s += fmt::format("plan: {} ({}), scheme {}, observer {}\n", plan.info.architecture.empty() ? "?" : esc(plan.info.architecture),
                   family_name(plan.info.family), plan.scheme, plan.observers);
  const std::size_t gs_groups = global_scale_groups(plan);
  s += fmt::format("  {} source tensors in {} shard(s): {} quantized weights{}\n", format_count(plan.decisions.size()),
                   plan.shards.size(), format_count(plan.units.size()),
                   gs_groups > 0 ? fmt::format(" in {} global-scale groups", format_count(gs_groups)) : std::string());
  if (plan.schemes.size() > 1)
    for (const PlanScheme& ps : plan.schemes)
      s += fmt::format("  {} {} (observer {}): {} weights, {} parameters; {}; {} target(s)\n", ps.group,
                       quant_scheme_preset(ps.scheme), observer_option(ps.observer), format_count(ps.units),
                       format_count(ps.params),
                       ps.rules.empty() ? std::string("the default scheme") : esc(fmt::format("{}", fmt::join(ps.rules, ", "))),
                       ps.targets.size());
  if (plan.fp8_source)
    s += fmt::format("  source: {}; read as its bf16 expansion (docs/fp8-sources.md)\n", esc(plan.fp8_source->label));
  for (const auto& l : plan.summary) s += "  " + esc(l) + "\n";
  // Tensor data, as the index's total_size counts it: the files written add their JSON headers (issue 55 tryout F:
  // two sizes of one output, unlabelled).
  s += fmt::format(
      "  size of the tensor data: {} -> {} ({:.3f} bits per quantized weight; the shard files add their "
      "headers)\n",
      format_bytes(plan.source_bytes), format_bytes(plan.output_bytes), plan.bits_per_weight());
  // The ignore list also holds fused expert blocks and vLLM's prefix aliases: its length is not the count of
  // Linear-like weights kept, which verify reports (tryout note: 6 here beside verify's 4).
  const auto kept_linear = std::count_if(plan.decisions.begin(), plan.decisions.end(), [](const TensorDecision& d) {
    return d.action == Action::KEEP && d.linear_like;
  });
  s += fmt::format("  ignore: {} entr{} in quantization_config.ignore: {} Linear-like weight(s) kept in 16 bits{}\n",
                   plan.ignore.size(), plan.ignore.size() == 1 ? "y" : "ies", kept_linear,
                   plan.ignore.size() != static_cast<std::size_t>(kept_linear)
                       ? ", and the fused expert blocks kept and the names vLLM matches them under"
                       : "");
  if (const std::uint64_t trials = search_trials(plan); trials > 0) {  // issue 55: the search's cost was not said
    // The measured 8B figure is NVFP4A16's mse search's; another search is said by its count alone (issue 55
    // tryout: memoryless-mse and W4A16 were quoted the mse run's 62 s).
    const bool measured = std::any_of(plan.schemes.begin(), plan.schemes.end(), [](const PlanScheme& ps) {
      return ps.params > 0 && ps.observer == Observer::NVFP4_EXPANDED_MSE;
    });
    s += fmt::format("  cost: the searched observer tries up to {} scales per group: {} element encodes against min-max's "
                     "{}, compute-bound ({}); --observer minmax for a quick run\n",
                     max_search_steps(plan), format_count(trials), format_count(plan.quantized_params),
                     measured ? "an 8B NVFP4A16 with mse: about 62 s on 16 cores against 10 s with min-max, "
                                "docs/performance.md"
                              : "no 8B run of this observer is measured; the count is an upper bound: the search may "
                                "stop early");
  }
  // Kept-with-reason table: reasons grouped, with counts and an example.
  std::map<std::string, std::pair<std::size_t, std::string>> by_reason;
  for (const auto& d : plan.decisions) {
    if (d.action != Action::KEEP) continue;
    auto& e = by_reason[d.reason];
    if (e.first++ == 0) e.second = d.name;
  }
  s += "  kept (count, reason, example):\n";
  for (const auto& [reason, e] : by_reason) s += fmt::format("    {:>6}  {}  e.g. {}\n", e.first, esc(reason), esc(e.second));
  if (verbose) {
    s += "  decisions:\n";
    // Per tensor, like llama-quantize: dtype, shape and bytes (a quantized weight: source -> what the
    // scheme writes for it).
    for (const auto& d : plan.decisions) {
      const std::uint64_t n = st::shape_numel(d.shape), in = n * dtype_bits(d.dtype) / 8;
      const std::string bytes =
          d.action == Action::QUANTIZE
              ? fmt::format("{} -> {}", format_bytes(in),
                            format_bytes(linear_bytes(d.scheme, d.shape[0], d.shape[1], d.dtype)))
              : format_bytes(in);
      s += fmt::format("    {:<8} {:<22} {}  {} {}  {}  ({})\n", action_name(d.action), role_name(d.cls.role), esc(d.name),
                       dtype_name(d.dtype), format_shape(d.shape), bytes, esc(d.reason));
    }
  }
  for (const auto& w : plan.warnings) s += "  warning: " + esc(w) + "\n";
  return s;
}

nlohmann::ordered_json to_json(const QuantPlan& plan) {
  ojson j = ojson::object();
  j["scheme"] = plan.scheme;
  j["observer"] = plan.observers;
  j["search_element_encodes"] = search_trials(plan);  // 0: no group searches
  j["architecture"] = plan.info.architecture;
  j["family"] = std::string(family_name(plan.info.family));
  j["source_tensors"] = plan.decisions.size();
  j["quantized_weights"] = plan.units.size();
  j["global_scale_groups"] = global_scale_groups(plan);
  ojson schemes = ojson::array();
  for (const PlanScheme& ps : plan.schemes) {
    ojson kept = ojson::object();  // rule label -> count (an empty object when the group keeps none)
    for (const auto& [rule, n] : ps.kept) kept[rule_label(rule, ps.scheme)] = n;
    schemes.push_back({{"group", ps.group},
                       {"scheme", std::string(quant_scheme_name(ps.scheme))},
                       {"observer", std::string(observer_option(ps.observer))},
                       {"rules", ps.rules},
                       {"targets", ps.targets},
                       {"quantized_weights", ps.units},
                       {"quantized_params", ps.params},
                       {"kept", std::move(kept)}});
  }
  j["schemes"] = std::move(schemes);
  ojson unused = ojson::array();  // rules' schemes no module took: no config group (issue 55 tryout)
  for (const PlanScheme& ps : plan.unused_schemes) {
    ojson kept = ojson::object();
    for (const auto& [rule, n] : ps.kept) kept[rule_label(rule, ps.scheme)] = n;
    unused.push_back({{"scheme", std::string(quant_scheme_name(ps.scheme))},
                      {"observer", std::string(observer_option(ps.observer))},
                      {"rules", ps.rules},
                      {"kept", std::move(kept)}});
  }
  j["unused_schemes"] = std::move(unused);
  j["source_bytes"] = plan.source_bytes;
  j["source_format"] = plan.fp8_source ? fp8_source_json(*plan.fp8_source) : ojson(nullptr);
  j["output_bytes"] = plan.output_bytes;
  j["quantized_params"] = plan.quantized_params;
  j["passthrough_weights"] = plan.passthrough_units;
  j["text_linear_params"] = plan.text_params;
  j["text_quantized_share"] = plan.text_quantized_share();
  j["unroled"] = plan.unroled;
  j["bits_per_weight"] = plan.bits_per_weight();
  ojson roles = ojson::object();
  for (int r = 0; r < kRoleCount; ++r) {
    const auto& c = plan.counts[static_cast<std::size_t>(r)];
    if (c.quantized == 0 && c.kept == 0) continue;
    roles[std::string(role_name(static_cast<Role>(r)))] = {{"quantized", c.quantized}, {"kept", c.kept}};
  }
  j["roles"] = std::move(roles);
  j["summary"] = plan.summary;
  ojson kept = ojson::array();
  for (const auto& d : plan.decisions) {
    if (d.action != Action::KEEP) continue;
    ojson k = ojson::object();
    k["name"] = d.name;
    k["role"] = std::string(role_name(d.cls.role));
    k["rule"] = rule_label(d.rule, d.scheme);
    k["reason"] = d.reason;
    kept.push_back(std::move(k));
  }
  j["kept"] = std::move(kept);
  j["ignore"] = plan.ignore;
  j["forced"] = plan.forced;
  ojson shards = ojson::array();
  for (const auto& s : plan.shards)
    shards.push_back({{"name", s.name}, {"tensors", s.layout.tensors.size()}, {"bytes", s.layout.file_size}});
  j["shards"] = std::move(shards);
  j["warnings"] = plan.warnings;
  return j;
}


}  // namespace fp4forge::quant
