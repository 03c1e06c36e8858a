// The quantize planner's names and inputs (quantize/plan.h): actions and rules by name, name patterns,
// the planner's input read from a checkpoint; make_plan itself is in plan.cc.
#include "fp4forge/quantize/plan.h"

#include "fp4forge/model/structure.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

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

// ---------------------------------------------------------------------------------------------------

std::string_view action_name(Action a) noexcept {
  switch (a) {
    case Action::QUANTIZE: return "quantize";
    case Action::KEEP: return "keep";
    case Action::SPLIT: return "split";
  }
  return "keep";
}

std::string_view rule_name(Rule r) noexcept {
  switch (r) {
    case Rule::POLICY: return "policy";
    case Rule::USER_IGNORE: return "user_ignore";
    case Rule::USER_FORCE: return "user_force";
    case Rule::K_NOT_ALIGNED: return "k_not_aligned";
    case Rule::N_NOT_ALIGNED: return "n_not_aligned";
    case Rule::FUSED_SET: return "fused_set";
    case Rule::NOT_A_MATRIX: return "not_a_matrix";
  }
  return "policy";
}

std::string rule_label(Rule r, QuantScheme s) {
  if (r == Rule::K_NOT_ALIGNED) return fmt::format("k_not_multiple_of_{}", shape_rule(s).k_multiple);
  if (r == Rule::N_NOT_ALIGNED) return fmt::format("n_not_multiple_of_{}", shape_rule(s).n_multiple);
  return std::string(rule_name(r));
}

double QuantPlan::bits_per_weight() const noexcept {
  return quantized_params == 0 ? 0.0
                               : 8.0 * static_cast<double>(quantized_out_bytes) /
                                     static_cast<double>(quantized_params);
}

double QuantPlan::text_quantized_share() const noexcept {
  return text_params == 0 ? 0.0 : static_cast<double>(text_quantized_params) / static_cast<double>(text_params);
}

Result<NamePattern> NamePattern::parse(std::string_view text) {
  NamePattern p;
  p.text_ = std::string(text);
  if (text.empty()) return make_error(Errc::USAGE, "empty module pattern; give a module name or re:REGEX");
  if (starts_with(text, "re:")) {
    p.regex_ = true;
    auto re = Regex::compile(text.substr(3));
    if (!re.ok())
      return make_error(Errc::USAGE, "invalid regular expression '{}': {}", text, re.error().message);
    p.re_ = std::move(*re);
  }
  return p;
}

bool NamePattern::matches(std::string_view name) const {
  if (!regex_) return name == text_;
  return re_->match_prefix(name);
}

PlanInput plan_input(const Checkpoint& ckpt) {
  PlanInput in;
  in.config = ckpt.config();
  in.shard_names = ckpt.shard_names();
  in.index_file = ckpt.index_file();
  for (const auto& t : ckpt.tensors()) in.tensors.push_back({t.name, t.shard, t.info->dtype, t.info->shape});
  for (const auto& s : ckpt.shards()) in.shard_metadata.push_back(s.header().metadata);
  for (const auto& n : ckpt.notes()) in.notes.push_back(n.message);
  return in;
}

Result<PlanInput> read_plan_input(const Checkpoint& ckpt) {
  PlanInput in = plan_input(ckpt);
  FP4FORGE_ASSIGN_OR_RETURN(in.hf_quant_config, read_hf_quant_config(ckpt));
  return in;
}

Result<QuantPlan> make_plan(const Checkpoint& ckpt, const PlanOptions& opts) {
  FP4FORGE_ASSIGN_OR_RETURN(PlanInput in, read_plan_input(ckpt));
  FP4FORGE_ASSIGN_OR_RETURN(QuantPlan plan, make_plan(in, opts));
  // An FP8 / packed FP4 source's checks that read no payload (zero / negative scales, storage beside experts): the
  // ones verify and doctor run (model/fp8_source.h), before anything is written (a dry run refuses too).
  if (plan.fp8_source) FP4FORGE_TRY(check_fp8_source(ckpt, *plan.fp8_source, plan.info));
  return plan;
}


}  // namespace fp4forge::quant
