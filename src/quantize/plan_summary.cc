// The planner's counts and summary (plan_builder.h): the quantized share of the text stack, the per-role counts,
// the summary lines plan_report.cc prints and the warnings that go with them (forced modules, missing MTP).
#include "fp4forge/core/finding_kinds.h"
#include "plan_builder.h"

namespace fp4forge::quant::plan_internal {

namespace {

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

}  // namespace

std::string kept_by_rule(const PlanScheme& ps) {
  const ShapeRule sr = shape_rule(ps.scheme);
  std::vector<std::string> parts;
  for (const auto& [rule, n] : ps.kept)
    parts.push_back(rule == Rule::K_NOT_ALIGNED   ? fmt::format("{} in_features not a multiple of {}", format_count(n), sr.k_multiple)
                    : rule == Rule::N_NOT_ALIGNED ? fmt::format("{} out_features not a multiple of {}", format_count(n), sr.n_multiple)
                                                  : fmt::format("{} fused with a member kept", format_count(n)));
  return fmt::format("{}", fmt::join(parts, ", "));
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
  // With --mtp-from the output gets them (issue 55 tryout L: the splice line, then this warning, in one run).
  if (plan.info.mtp_num_hidden_layers > 0 && !opts.allow_nothing_quantized && !opts.mtp_spliced &&
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
  // One line per group when there are several, with what the group's scheme was chosen for and keeps (issue 55:
  // `--scheme-for attention=fp8-block` on shapes FP8_BLOCK cannot take kept them with no word in the summary).
  if (plan.schemes.size() > 1)
    for (const PlanScheme& ps : plan.schemes) {
      std::uint64_t kept = 0;
      for (const auto& [rule, n] : ps.kept) kept += n;
      plan.summary.push_back(fmt::format(
          "{}: {} {} weight{} ({}){}", ps.group, format_count(ps.units), quant_scheme_preset(ps.scheme),
          ps.units == 1 ? "" : "s",
          ps.rules.empty() ? std::string("the default scheme") : fmt::format("{}", fmt::join(ps.rules, ", ")),
          kept == 0 ? std::string() : fmt::format("; {} more kept in 16 bits: {}", format_count(kept), kept_by_rule(ps))));
    }
  // A rule whose modules were all kept (a rule that selects none has its own warning, check_rules).
  for (const PlanScheme& ps : plan.unused_schemes) {
    std::uint64_t kept = 0;
    for (const auto& [rule, n] : ps.kept) kept += n;
    if (kept > 0)
      plan.summary.push_back(
          fmt::format("{}: no {} weight, no config group ({} module(s) it selects kept in 16 "
                      "bits: {})",
                      format_list(ps.rules), quant_scheme_preset(ps.scheme), format_count(kept), kept_by_rule(ps)));
  }
  if (plan.text_params > 0)
    plan.summary.push_back(fmt::format("{:.1f} % of the text stack's Linear parameters quantized",
                                       100.0 * plan.text_quantized_share()));
  // What verify will say of the output, said now (issue 55 tryout J: quantize was silent, verify then warned).
  if (plan.text_params > 0 && plan.text_quantized_share() > 0.0 && plan.text_quantized_share() < kLowQuantizedShare)
    plan.warnings.push_back(
        fmt::format("only {:.1f} % of the text stack's Linear parameters are quantized: most of the model "
                    "stays in 16 bits (verify warns the same: low-quantized-share)",
                    100.0 * plan.text_quantized_share()));
  for (const auto& f : plan.forced)
    plan.warnings.push_back(fmt::format("FORCED: quantizing {} against the never-quantize policy "
                                        "(--force-quantize); vLLM may refuse or mis-serve it",
                                        f));
}

}  // namespace fp4forge::quant::plan_internal
