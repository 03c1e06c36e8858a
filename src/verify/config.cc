// verify: the quantization-config room, what the structural pass reads first: the quantization_config (its groups,
// schemes, observers, ignore list), a checkpoint in a foreign quantization format, an FP8 release read as a source.
#include "verify/internal.h"
#include "fp4forge/model/synth.h"

namespace fp4forge::verify_internal {
namespace {

/** No quantization_config: a checkpoint a quantizer wrote without its config, or an unquantized one. */
void missing_quant_config(const Checkpoint& q, Structure& s, FindingSink& sink) {
  // Without a config, a checkpoint holding no tensor a quantizer writes (a packed weight, a scale, an 8-bit or
  // 4-bit dtype) is an unquantized one: said as that once, with the command that makes what verify proves
  // (issue 55: it read "the quantizer did not write its config" and "its source with a quantization config").
  s.unquantized = std::none_of(q.tensors().begin(), q.tensors().end(), [](const TensorRef& t) {
    const std::string_view n = t.name;
    return n.ends_with("_packed") || n.ends_with("_scale") || n.ends_with("_scale_inv") ||
           n.ends_with("weight_global_scale") || dtype_bits(t.info->dtype) <= 8;
  });
  if (s.unquantized)
    sink.add(finding_kind("quant-config-missing"),
             {.message =
                  "this checkpoint is not quantized: config.json has no "
                  "quantization_config and every weight is stored unquantized (no weight_packed, no scale, no 8-bit or "
                  "4-bit dtype): verify proves a quantized output",
              .key = "quantization_config",
              .expected = "a compressed-tensors quantization_config",
              .actual = "(absent)",
              // A synth --header-only folder reads as zeros: quantize refuses it, so the hint says what it is for
              // (issue 55 tryout: the hint led into quantize's header-only refusal).
              .hint = header_only_synth(q)
                          ? std::string("the shards were written by `synth --header-only` (they read as zeros): no "
                                        "quantization of them is served; use the folder to size seats (fp4forge plan) "
                                        "and check layouts (inspect, doctor)")
                          : fmt::format("fp4forge quantize {0} OUT, then fp4forge verify OUT --against {0}",
                                        q.dir().string())});
  else
    sink.add(finding_kind("quant-config-missing"),
             {.message = "config.json has no quantization_config: vLLM "
                         "loads the checkpoint as unquantized and cannot map weight_packed / weight_scale",
              .key = "quantization_config",
              .expected = "a compressed-tensors quantization_config",
              .actual = "(absent)",
              .hint = "the quantizer did not write its config; " + std::string(kHintRequant)});
}

/** One config group as verify reads it: its preset (or, for a group that names none, the closest preset: the
 * tensors are checked as it and the group is reported) and its weights' observer. */
SchemeGroup read_group(const ConfigGroup& g, const QuantConfig& c, const std::string& key, const std::string& presets,
                       Structure& s, FindingSink& sink) {
  SchemeGroup sg;
  sg.name = g.name;
  const SchemeInfo si = detect_scheme(g, c.format);
  const std::string label = scheme_label(g, c.format);
  if (si.scheme == Scheme::NVFP4) s.scheme = Scheme::NVFP4;
  const std::string gkey = fmt::format("{}.config_groups.{}", key, g.name);
  auto qs = quant_scheme_of(g, c.format);
  if (qs.ok()) {
    sg.preset = true;
    sg.layout = layout_of(*qs);
    if (const auto mism = scheme_mismatches(*qs, g, c.format); !mism.empty())
      sink.add(
          finding_kind("quant-config-unsupported"),
          {.group = gkey,
           .message = fmt::format("{}: scheme is {} ({}), but not exactly the {} preset: {}", gkey, label, si.detail,
                                  label, fmt::join(mism, "; ")),
           .key = gkey,
           .expected = fmt::format("the {} preset (docs/schemes.md)", label),
           .actual = fmt::format("{}", fmt::join(mism, "; ")),
           .hint =
               "vLLM picks and builds its kernel from these fields; verify proves the presets as compressed-tensors "
               "writes them"});
    if (g.weights) {  // the weights' observer
      const std::string& name = g.weights->observer;
      const auto o = name.empty() ? std::optional<Observer>(Observer::MINMAX) : observer_from_config(name);
      sg.observer_name = name.empty() ? std::string(observer_config_name(Observer::MINMAX)) : name;
      // observer_kwargs change the search (expand, grid, norm, ...): fp4forge reproduces the defaults only.
      sg.observer_known = o.has_value() && observer_supported(*qs, *o) && !g.weights->observer_kwargs;
      if (g.weights->observer_kwargs) sg.observer_name += " with observer_kwargs";
      if (sg.observer_known) sg.observer = *o;
    }
    return sg;
  }
  // Not a preset: name the closest one (fewest mismatching fields, same format first) and what differs.
  std::optional<QuantScheme> best;
  std::vector<std::string> best_mism;
  for (QuantScheme p : kQuantSchemes) {
    auto mm = scheme_mismatches(p, g, c.format);
    if (!best || mm.size() < best_mism.size()) {
      best = p;
      best_mism = std::move(mm);
    }
  }
  sg.layout = layout_of(*best);
  const std::string closest = fmt::format("as {}: {}", quant_scheme_preset(*best), fmt::join(best_mism, "; "));
  if (si.scheme == Scheme::UNKNOWN) {
    sink.add(
        finding_kind("quant-config-unsupported"),
        {.group = gkey,
         .message = fmt::format("{}: unknown quantization scheme ({}); not one of the schemes verify proves ({}); {}",
                                gkey, si.detail, presets, closest),
         .key = gkey,
         .expected = presets,
         .actual = "unknown",
         .hint = "verify does not guess schemes it cannot name"});
  } else {
    sink.add(
        finding_kind("quant-config-unsupported"),
        {.group = gkey,
         .message = fmt::format("{}: scheme is {} ({}), not one of the schemes verify proves ({}); {}", gkey, label,
                                si.detail, presets, closest),
         .key = gkey,
         .expected = presets,
         .actual = label,
         .hint = "verify proves the five weight presets fp4forge writes (docs/schemes.md); other schemes are named, "
                 "not proven"});
  }
  return sg;
}

/** The scheme and observer lines of the report (VerifyStats::groups, scheme, observer). */
void summarize_groups(const QuantConfig& c, const Structure& s, VerifyStats& st) {
  // Scheme and observer as pairs, one per distinct (scheme, observer) in scheme order, so that the i-th observer
  // is the i-th scheme's ("FP8_DYNAMIC+NVFP4A16" with "memoryless_minmax+nvfp4_expanded_mse"; issue 55: they were
  // joined in two orders). Each group's line says its name and the option spellings quantize takes.
  std::set<std::pair<std::string, std::string>> pairs;
  st.groups.clear();
  for (std::size_t i = 0; i < c.groups.size(); ++i) {
    const std::string label = scheme_label(c.groups[i], c.format);
    const bool named = s.groups[i].preset && c.groups[i].weights;
    pairs.emplace(label, named ? s.groups[i].observer_name : std::string());
    // The spelling as quantize's options, said as such (issue 55 tryout J: "(--scheme fp8-block)" beside a recipe's
    // group read as flags the user had passed).
    std::string line = fmt::format("{} {}", c.groups[i].name, label), spelled;
    if (const auto qs = quant_scheme_of(c.groups[i], c.format); qs && s.groups[i].preset)
      spelled = fmt::format("--scheme {}", quant_scheme_name(*qs));
    if (named) {
      line += fmt::format(", observer {}", s.groups[i].observer_name);
      if (s.groups[i].observer_known)
        spelled += fmt::format("{}--observer {}", spelled.empty() ? "" : " ", observer_option(s.groups[i].observer));
    }
    if (!spelled.empty()) line += fmt::format(" (quantize {})", spelled);
    st.groups.push_back(std::move(line));
  }
  std::vector<std::string> labels, names;
  for (const auto& [label, obs] : pairs) {
    labels.push_back(label);
    if (!obs.empty()) names.push_back(obs);
  }
  st.scheme = labels.empty() ? std::string("none") : fmt::format("{}", fmt::join(labels, "+"));
  st.observer = fmt::format("{}", fmt::join(names, "+"));
}

}  // namespace

void check_quant_config(const Checkpoint& q, Structure& s, FindingSink& sink, VerifyStats& st) {
  std::string key = "quantization_config";
  const Json* qcj = find_quant_config(q.config(), &key);
  if (!qcj) {
    missing_quant_config(q, s, sink);
    st.scheme = "none";
    return;
  }
  auto parsed = parse_quant_config(*qcj, key);
  if (!parsed.ok()) {
    sink.add(
        finding_kind("quant-config-invalid"),
        {.message = parsed.error().message, .key = key, .hint = "vLLM cannot parse this quantization_config either"});
    st.scheme = "invalid";
    return;
  }
  s.qc = std::move(parsed).value();
  const QuantConfig& c = *s.qc;
  if (c.quant_method != "compressed-tensors") {
    sink.add(finding_kind("quant-config-unsupported"),
             {.message = fmt::format("{}.quant_method is \"{}\", expected \"compressed-tensors\"", key, c.quant_method),
              .key = key + ".quant_method",
              .expected = "compressed-tensors",
              .actual = c.quant_method,
              .hint = "verify checks compressed-tensors checkpoints; convert ModelOpt exports first "
                      "(compressed-tensors ModelOptNvfp4Converter)"});
  }
  if (c.groups.empty()) {
    sink.add(finding_kind("quant-config-invalid"),
             {.message = fmt::format("{}.config_groups is empty or absent: no module is declared quantized", key),
              .key = key + ".config_groups",
              .expected = "one config group",
              .actual = "(none)",
              .hint = kHintRequant});
  }
  std::string presets;
  for (QuantScheme p : kQuantSchemes) presets += (presets.empty() ? "" : ", ") + std::string(quant_scheme_preset(p));
  // One SchemeGroup per config group, in file order: its preset (or, for a group that names none, the closest
  // preset: the tensors are checked as it and the group is reported) and its weights' observer.
  s.groups.clear();
  for (const ConfigGroup& g : c.groups) s.groups.push_back(read_group(g, c, key, presets, s, sink));
  if (s.groups.empty()) s.groups.emplace_back();
  summarize_groups(c, s, st);
  if (auto gm = GroupMatcher::compile(c); gm.ok()) s.matcher = std::move(*gm);  // else check_targets reports it
  if (c.groups.size() > 1) {
    sink.add(
        finding_kind("quant-config-multi-group"),
        {.message = fmt::format("{}.config_groups has {} groups; some loaders (TensorRT-LLM PyTorch backend) keep "
                                "only one",
                                key, c.groups.size()),
         .key = key + ".config_groups",
         .expected = "1",
         .actual = fmt::format("{}", c.groups.size()),
         .hint = "vLLM loads each group with its own scheme; fp4forge writes several only when a recipe asks for them "
                 "(--scheme-for, --recipe) (F26)"});
  }
  if (!c.quantization_status.empty() && c.quantization_status != "compressed") {
    sink.add(finding_kind("quant-config-status"),
             {.message =
                  fmt::format("{}.quantization_status is \"{}\", expected \"compressed\"", key, c.quantization_status),
              .key = key + ".quantization_status",
              .expected = "compressed",
              .actual = c.quantization_status,
              .hint = "the tensors on disk are packed; a non-compressed status tells loaders otherwise"});
  }
  auto m = IgnoreMatcher::compile(c.ignore);
  if (!m.ok()) {
    sink.add(finding_kind("quant-config-invalid"), {.group = "ignore",
                                                    .message = m.error().message,
                                                    .key = key + ".ignore",
                                                    .hint = "coverage checks were skipped"});
  } else {
    s.ignore = std::move(m).value();
  }
}

/** A checkpoint quantized in a format fp4forge neither reads nor writes (GPTQ, AWQ, gpt-oss's MXFP4 release,
 * ModelOpt NVFP4, ...): one finding that says so and what was not checked, instead of compressed-tensors' structural
 * checks, which would call its every module wrong. True when it is one. */
bool foreign_format(const Checkpoint& q, FindingSink& sink, bool as_warning) {
  auto hfq = read_hf_quant_config(q);
  const auto foreign = foreign_quantization(q.config(), hfq.ok() && *hfq ? &**hfq : nullptr);
  if (!foreign) return false;
  sink.add(
      finding_kind("quant-format-foreign"),
      {.severity = as_warning ? Severity::WARNING : Severity::ERROR,
       .group = "quantization_config",
       .message =
           fmt::format("{}: not compressed-tensors, so fp4forge's checks of quantized tensors (packed shapes, scales, "
                       "ignore list, coverage) do not apply and none of them ran",
                       *foreign),
       .key = "quantization_config.quant_method",
       .expected = "compressed-tensors (or an FP8 release fp4forge reads)",
       .actual = *foreign,
       .hint = "vLLM serves this format with its own loader for the method; to check or re-quantize, start from the "
               "original BF16 weights (docs/fp8-sources.md#refused-sources)"});
  return true;
}

/** An FP8 release in the native (`quant_method: fp8`) or ModelOpt dialect, or a per-tensor
 * compressed-tensors FP8 checkpoint, is a source, not one of the five schemes: what can be checked is that
 * its FP8 weights are readable (model/fp8_source.h). True when it is one (the scheme checks are then
 * skipped). */
bool fp8_release(const Checkpoint& q, const ModelInfo& info, FindingSink& sink, bool scan_values) {
  auto src = read_fp8_source(q);
  if (!src.ok()) {
    // A source detection refuses: a CT checkpoint of another scheme is left to the structural checks.
    const Json* qc = find_quant_config(q.config());
    const std::string method = qc != nullptr ? str_of(*qc, "quant_method") : std::string();  // any JSON type
    if (method == "fp8" || method == "modelopt")
      sink.add(finding_kind("fp8-source-invalid"),
               {.group = "quantization_config",
                .message = src.error().message,
                .expected = "FP8 weights with their scales (docs/fp8-sources.md)",
                .actual = "unreadable",
                .hint = "the release is incomplete or inconsistent; vLLM fails to load it too"});
    return method == "fp8" || method == "modelopt";
  }
  if (!*src) return false;
  // compressed-tensors FP8 per channel or per block is FP8_DYNAMIC / FP8_BLOCK, checked by the structural
  // checks; per-tensor FP8 (the static FP8 preset and its kin) is no scheme fp4forge writes: a source.
  if ((*src)->dialect == Fp8Dialect::COMPRESSED_TENSORS &&
      std::none_of((*src)->weights.begin(), (*src)->weights.end(),
                   [](const Fp8Weight& w) { return w.grid.layout == fp8::ScaleLayout::TENSOR; }))
    return false;
  // What quantize checks before writing (R4-B7, R4-B11: storage beside experts, zero / negative scales), then the
  // values (issue 27 #8: NaN / Inf scales and NaN codes were called consistent): the scan quantize runs.
  if (Status c = check_fp8_source(q, **src, info); !c) {
    sink.add(
        finding_kind("fp8-source-invalid"),
        {.group = "quantization_config",
         .message = c.error().message,
         .expected = "FP8 weights with their scales (docs/fp8-sources.md)",
         .actual = "refused by fp4forge quantize",
         .hint = "the release is damaged or inconsistent; fp4forge quantize refuses the folder for the same reason"});
    return true;
  }
  if (scan_values)
    if (Status v = scan_fp8_values(q, **src); !v) {
      sink.add(finding_kind("fp8-source-invalid"),
               {.group = "values",
                .message = v.error().message,
                .expected = "finite FP8 weights and scales",
                .actual = "NaN or infinite",
                .hint = "vLLM serves NaN from such weights; fp4forge quantize refuses the folder for the same reason"});
      return true;
    }
  sink.add(finding_kind("fp8-source"),
           {.group = "quantization_config",
            .message = fmt::format(
                "an FP8 release, {}: its weights and scales are consistent{}; it is a source, not one of the "
                "schemes fp4forge writes, so their checks do not apply (fp4forge quantize reads it as its "
                "bf16 expansion)",
                (*src)->label, scan_values ? " and finite" : " (values not scanned)"),
            .hint = "quantize it: fp4forge quantize SRC DST (docs/fp8-sources.md)"});
  return true;
}

}  // namespace fp4forge::verify_internal
