// Quantized (third-party or ours) checkpoints: `ignore` regex evaluation under compressed-tensors
// re.match semantics (F23), then verify's structural checks (F1, F3, F6, F9-F16, F20, F22: stale
// entries are verify's `ignore-unmatched`).
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge::doctor {

void check_fp8_claims(const Context& ctx, FindingSink& out) {
  if (ctx.ckpt == nullptr) return;
  std::vector<std::string> fp8;
  // FP8 weights, not the FP8 group scales of NVFP4 (`weight_scale`): an NVFP4 output whose quantization_config was
  // lost is verify's quant-config-missing, not an FP8 release (issue 55 tryout J).
  for (const auto& [name, meta] : ctx.tensors)
    if ((meta.dtype == "F8_E4M3" || meta.dtype == "F8_E5M2") && !name.ends_with("_scale")) fp8.push_back(name);
  auto hfq = read_hf_quant_config(*ctx.ckpt);
  const bool has_hfq = hfq.ok() && hfq->has_value();
  const bool has_qc = find_quant_config(ctx.config) != nullptr;
  if (!fp8.empty() && !has_qc && !has_hfq) {
    FindingFields f;
    f.key = "quantization_config";
    f.expected = "a quantization_config (or hf_quant_config.json) that says how to read the FP8 weights";
    f.actual = fmt::format("{} FP8 tensor(s), no quantization config", fp8.size());
    f.tensors = fp8;
    f.message = fmt::format("{} tensor(s) are stored as FP8 (e.g. '{}') but config.json has no quantization_config "
                            "and there is no hf_quant_config.json: vLLM and transformers read the bytes as "
                            "unquantized weights (or refuse them), without their scales",
                            fp8.size(), fp8.front());
    f.hint = "restore the release's quantization_config (a re-save dropped it), or quantize from the original";
    out.add(finding_kind("fp8-without-config"), std::move(f));
  }
  if (has_hfq && fp8.empty()) {
    const auto& j = **hfq;
    const std::string algo = j.is_object() && j.contains("quantization") ? str_of(j.at("quantization"), "quant_algo")
                                                                           : std::string();
    if (algo.rfind("FP8", 0) == 0) {
      out.add(finding_kind("fp8-claim-without-fp8-weights"),
              {.message =
                   fmt::format("hf_quant_config.json says quant_algo {} but no tensor is FP8: a loader that trusts the "
                               "file builds FP8 layers over 16-bit weights",
                               algo),
               .key = "hf_quant_config.json",
               .expected = "FP8 (F8_E4M3) weight tensors",
               .actual = "no FP8 tensor",
               .hint = "remove the stale hf_quant_config.json (the weights were dequantized or replaced)"});
    }
  }
}

void check_quantized(const Context& ctx, FindingSink& out) {
  if (!ctx.quantized) return;
  std::string qkey = "quantization_config";
  const Json* qj = find_quant_config(ctx.config, &qkey);
  if (qj != nullptr) {
    auto qc = parse_quant_config(*qj, qkey);
    if (qc.ok()) {
      // Module names on disk (tensor name without its last component).
      std::set<std::string> modules;
      for (const auto& [name, meta] : ctx.tensors)
        if (name.find('.') != std::string::npos) modules.insert(std::string(names::module_of(name)));
      auto matcher = IgnoreMatcher::compile(qc->ignore);
      if (!matcher.ok()) {
        out.add(finding_kind("ignore-regex"),
                {.severity = Severity::ERROR,
                 .message = fmt::format("{}.ignore cannot be evaluated: {}", qkey, matcher.error().message),
                 .key = qkey + ".ignore",
                 .expected = "entries that compressed-tensors and vLLM can evaluate",
                 .actual = matcher.error().message});
      } else {
        for (std::size_t i = 0; i < matcher->size(); ++i) {
          std::vector<std::string> hit;
          for (const auto& m : modules)
            if (matcher->entry_matches(i, m)) hit.push_back(m);
          const std::string& entry = matcher->entry(i);
          if (matcher->is_regex(i)) {
            // Full-match semantics (used by some third-party engines) for comparison.
            std::vector<std::string> prefix_only;
            if (auto re = Regex::compile(std::string_view(entry).substr(3)); re.ok())
              for (const auto& m : hit)
                if (!re->full_match(m)) prefix_only.push_back(m);
            FindingFields f;
            f.severity = prefix_only.empty() ? Severity::INFO : Severity::WARNING;
            f.key = fmt::format("{}.ignore[{}]", qkey, i);
            f.actual = fmt::format("{} module(s) matched", hit.size());
            f.expected = "on-disk modules (re.match: anchored at the start only)";
            f.tensors = hit;
            f.message = fmt::format(
                "ignore entry '{}' matches {} on-disk module(s) under compressed-tensors re.match "
                "semantics{}",
                entry, hit.size(), hit.empty() ? "" : fmt::format(" (e.g. {})", hit.front()));
            if (!prefix_only.empty()) {
              f.message += fmt::format("; under full-match semantics {} of them (e.g. {}) are NOT matched, so an "
                                       "engine that full-matches would quantize or mis-load them (F23)",
                                       prefix_only.size(), prefix_only.front());
              f.hint = "config.json is the authority; prefer exact module names (or patterns ending in .*)";
            }
            out.add(finding_kind("ignore-regex"), std::move(f));
          }
        }
      }
    }
  }
  // quantize's preflight: a quantized source is re-encoded, not served as it is (DiagnoseOptions::as_source).
  if (ctx.ckpt == nullptr || ctx.as_source || ctx.skip_structure) return;
  // A format fp4forge neither reads nor writes is a warning here (doctor checks any checkpoint; verify, which
  // cannot prove it, keeps it an error).
  VerifyOptions vo;
  vo.foreign_is_warning = true;
  vo.config_shapes = false;  // run_checks ran them (check_config_shapes)
  VerifyStats st;
  for (auto& f : verify_structure(*ctx.ckpt, ctx.info, vo, &st)) out.add(std::move(f));
}

}  // namespace fp4forge::doctor
