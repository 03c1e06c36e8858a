// Gemma-4 flat global KV fields vs per_layer_config (architectures.md §3.2, §3.3; F27, F28, F29, F32).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "fp4forge/model/vllm_config_forms.h"

namespace fp4forge::doctor {
namespace {

std::vector<std::size_t> full_layers(const std::vector<std::string>& layer_types) {
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < layer_types.size(); ++i)
    if (layer_types[i] == "full_attention") v.push_back(i);
  return v;
}

std::string key_path(const Context& ctx, std::string_view key) {
  return ctx.info.wrapper ? fmt::format("text_config.{}", key) : std::string(key);
}

}  // namespace

GlobalKvDerivation derive_global_kv(const Context& ctx, const Json& config) {
  GlobalKvDerivation d;
  auto info_r = read_model_info(config);
  if (!info_r.ok()) {
    d.problem = info_r.error().message;
    return d;
  }
  const ModelInfo& info = *info_r;
  const Json& tc = text_config(config);
  const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
  const std::int64_t A = info.num_heads, H = info.hidden_size;
  const std::int64_t dsl = integral_of(tc, "head_dim").value_or(0);
  const std::int64_t kvsl = integral_of(tc, "num_key_value_heads").value_or(0);
  const std::size_t N = info.layer_types.size();
  const std::int64_t shared = info.num_kv_shared_layers;
  std::set<std::int64_t> dgs, kvgs;
  std::vector<std::string> problems;
  bool sliding_seen = false;
  for (std::size_t i = 0; i < N; ++i) {
    const std::string base = fmt::format("{}layers.{}.self_attn.", ctx.text_prefix, i);
    const auto q = ctx.linear_shape(base + "q_proj");
    const auto k = ctx.linear_shape(base + "k_proj");
    const auto* qn = ctx.tensor(base + "q_norm.weight");
    const auto* kn = ctx.tensor(base + "k_norm.weight");
    const bool is_shared = shared > 0 && static_cast<std::int64_t>(i) >= static_cast<std::int64_t>(N) - shared;
    if (info.layer_types[i] == "full_attention") {
      std::int64_t dg = 0;
      if (qn != nullptr && qn->shape.size() == 1) {
        dg = static_cast<std::int64_t>(qn->shape[0]);
        if (dgs.empty()) d.evidence.push_back(base + "q_norm.weight");
      } else if (q && A > 0 && q->first % A == 0) {
        dg = q->first / A;
      }
      if (dg <= 0) {
        problems.push_back(fmt::format("full-attention layer {} has neither q_norm nor q_proj", i));
        continue;
      }
      if (q) {
        if (dgs.empty()) d.evidence.push_back(base + "q_proj");
        if (q->first != A * dg)
          problems.push_back(fmt::format("layer {} q_proj has {} rows, expected num_attention_heads·{} = {}",
                                         i, q->first, dg, A * dg));
      }
      dgs.insert(dg);
      if (k_eq_v && !is_shared) {
        if (!k) {
          problems.push_back(fmt::format("full-attention layer {} has no k_proj", i));
          continue;
        }
        if (kvgs.empty()) d.evidence.push_back(base + "k_proj");
        if (k->first % dg != 0) {
          problems.push_back(fmt::format("layer {} k_proj rows {} are not a multiple of the head dim {}", i,
                                         k->first, dg));
          continue;
        }
        kvgs.insert(k->first / dg);
        if (ctx.linear_shape(base + "v_proj"))
          problems.push_back(fmt::format("full-attention layer {} has a v_proj although attention_k_eq_v "
                                         "is true", i));
        if (kn != nullptr && kn->shape.size() == 1 && static_cast<std::int64_t>(kn->shape[0]) != dg)
          problems.push_back(fmt::format("layer {} k_norm has length {}, q_norm says head dim {}", i,
                                         kn->shape[0], dg));
      }
    } else if (info.layer_types[i] == "sliding_attention" && !is_shared && k) {
      if (!sliding_seen) d.evidence.push_back(base + "k_proj");
      sliding_seen = true;
      if (dsl > 0 && kvsl > 0 && k->first != kvsl * dsl)
        problems.push_back(fmt::format("sliding layer {} k_proj has {} rows, expected num_key_value_heads·"
                                       "head_dim = {}·{} = {}", i, k->first, kvsl, dsl, kvsl * dsl));
      if (q && dsl > 0 && q->first != A * dsl)
        problems.push_back(fmt::format("sliding layer {} q_proj has {} rows, expected num_attention_heads·"
                                       "head_dim = {}", i, q->first, A * dsl));
    }
  }
  (void)H;
  if (dgs.empty() && problems.empty()) problems.push_back("no full-attention layer tensors to derive from");
  if (dgs.size() > 1) problems.push_back(fmt::format("full-attention layers disagree on the head dim: {}",
                                                     fmt::join(dgs, ", ")));
  if (kvgs.size() > 1) problems.push_back(fmt::format("full-attention layers disagree on the kv heads: {}",
                                                      fmt::join(kvgs, ", ")));
  if (dgs.size() == 1) d.global_head_dim = *dgs.begin();
  if (k_eq_v) {
    if (kvgs.size() == 1) d.num_global_kv_heads = *kvgs.begin();
    else if (kvgs.empty() && problems.empty()) problems.push_back("no full-attention k_proj to derive the kv heads from");
    if (d.num_global_kv_heads > 0 && A > 0 && A % d.num_global_kv_heads != 0)
      problems.push_back(fmt::format("num_attention_heads {} is not divisible by the derived kv heads {}", A,
                                     d.num_global_kv_heads));
  }
  if (!problems.empty()) d.problem = fmt::format("{}", fmt::join(problems, "; "));
  return d;
}

bool prove_per_layer_config_redundant(const Json& config, const std::vector<std::string>& layer_types,
                                      std::string* why_not) {
  auto fail = [&](std::string s) {
    if (why_not != nullptr) *why_not = std::move(s);
    return false;
  };
  const Json& tc = text_config(config);
  auto it = tc.find("per_layer_config");
  if (it == tc.end() || !it->is_object() || it->empty()) return fail("per_layer_config is absent or empty");
  const Json& plc = *it;
  const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
  const auto gd = integral_of(tc, "global_head_dim");
  const auto gkv = integral_of(tc, "num_global_key_value_heads");
  if (!gd) return fail("the flat global_head_dim is absent");
  if (k_eq_v && !gkv) return fail("the flat num_global_key_value_heads is absent (attention_k_eq_v is true)");
  std::set<std::string> want;
  for (auto i : full_layers(layer_types)) want.insert(std::to_string(i));
  std::set<std::string> have;
  for (auto m = plc.begin(); m != plc.end(); ++m) have.insert(m.key());
  if (have != want)
    return fail(fmt::format("its keys [{}] are not exactly the full-attention layer indices [{}]",
                            fmt::join(have, ", "), fmt::join(want, ", ")));
  const Json& first = plc.begin().value();
  for (auto m = plc.begin(); m != plc.end(); ++m)
    if (!same_json(m.value(), first)) return fail(fmt::format("layer {} has a different override than layer {}", m.key(),
                                                    plc.begin().key()));
  if (!first.is_object()) return fail("its value is not an object");
  const std::size_t expect_keys = k_eq_v ? 2 : 1;
  if (first.size() != expect_keys)
    return fail(fmt::format("its value {} has keys other than head_dim{}", first.dump(),
                            k_eq_v ? " / num_key_value_heads" : ""));
  if (integral_of(first, "head_dim") != gd)
    return fail(fmt::format("its head_dim {} differs from global_head_dim {}", first.value("head_dim", Json()).dump(),
                            *gd));
  if (k_eq_v && integral_of(first, "num_key_value_heads") != gkv)
    return fail(fmt::format("its num_key_value_heads {} differs from num_global_key_value_heads {}",
                            first.value("num_key_value_heads", Json()).dump(), *gkv));
  return true;
}

namespace {

/** Scalar fields vLLM or transformers refuse: hidden_activation other than gelu_pytorch_tanh, a null
 * hidden_size_per_layer_input (F32). */
void check_gemma4_scalars(const Context& ctx, const Json& tc, FindingSink& out) {
  // hidden_activation (vLLM raises on anything else).
  if (auto it = tc.find("hidden_activation"); it != tc.end()) {
    const std::string act = it->is_string() ? it->get<std::string>() : it->dump();
    if (act != "gelu_pytorch_tanh") {
      FindingFields f;
      f.key = key_path(ctx, "hidden_activation");
      f.expected = "gelu_pytorch_tanh";
      f.actual = act;
      f.message = fmt::format("{} is '{}', expected 'gelu_pytorch_tanh'; vLLM's Gemma-4 refuses any other "
                              "activation at model build", f.key, act);
      f.hint = "Gemma-4 is trained with gelu_pytorch_tanh; a different value is a broken export";
      out.add(finding_kind("gemma4-activation"), std::move(f));
    }
  }

  // hidden_size_per_layer_input: null (F32).
  if (auto it = tc.find("hidden_size_per_layer_input"); it != tc.end() && it->is_null()) {
    FindingFields f;
    f.key = key_path(ctx, "hidden_size_per_layer_input");
    f.expected = "0 (or the PLE width)";
    f.actual = "null";
    f.message = fmt::format("{} is null; transformers 5.17's strict config raises "
                            "StrictDataclassFieldValidationError (expected int, got NoneType)", f.key);
    f.hint = "write 0 (vLLM treats null and 0 alike; 0 disables per-layer embeddings)";
    out.add(finding_kind("config-value-invalid"), std::move(f));
  }
}

/** per_layer_config's keys must be full-attention layer indices in [0, N) with object values. */
void check_per_layer_keys(const Context& ctx, const Json& plc, const std::vector<std::string>& lt, FindingSink& out) {
  const Json* p = &plc;
  // per_layer_config keys must be full-attention layer indices in [0, N).
  std::vector<std::string> bad;
  for (auto m = p->begin(); m != p->end(); ++m) {
    const std::string& k = m.key();
    std::size_t idx = 0;
    bool ok = !k.empty() && k.size() < 10 && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (ok) {
      idx = std::stoul(k);
      ok = std::to_string(idx) == k && idx < lt.size();
    }
    if (!ok)
      bad.push_back(fmt::format("'{}' (not a layer index in [0, {}); transformers raises)", k, lt.size()));
    else if (lt[idx] != "full_attention")
      bad.push_back(fmt::format("'{}' ({} layer)", k, lt[idx]));
    else if (!m.value().is_object())
      bad.push_back(fmt::format("'{}' (value is not an object)", k));
  }
  if (!bad.empty()) {
    FindingFields f;
    f.key = key_path(ctx, "per_layer_config");
    f.expected = "keys = full-attention layer indices";
    f.actual = fmt::format("{}", fmt::join(bad, ", "));
    f.message = fmt::format("{} has keys that are not full-attention layer indices: {}", f.key, f.actual);
    f.hint = "per_layer_config may only override full-attention layers (architectures.md §3.3)";
    out.add(finding_kind("per-layer-config-invalid"), std::move(f));
  }
}

/** The flat global fields missing with no per_layer_config to supply them (F27), with the values the
 * tensors prove. */
void check_missing_globals(const Context& ctx, bool k_eq_v, bool has_gd, bool has_gkv, FindingSink& out) {
  // Flat fields missing and no per_layer_config to supply them (F27).
  const bool needs_gkv = k_eq_v && !has_gkv;
  const GlobalKvDerivation der = derive_global_kv(ctx, ctx.config);
  std::vector<std::string> missing;
  if (!has_gd) missing.push_back("global_head_dim");
  if (needs_gkv) missing.push_back("num_global_key_value_heads");
  FindingFields f;
  f.key = key_path(ctx, missing.front());
  f.tensors = der.evidence;
  f.actual = fmt::format("{} absent", fmt::join(missing, ", "));
  std::vector<std::string> vals;
  if (!has_gd && der.global_head_dim > 0) vals.push_back(fmt::format("global_head_dim = {}", der.global_head_dim));
  if (needs_gkv && der.num_global_kv_heads > 0)
    vals.push_back(fmt::format("num_global_key_value_heads = {}", der.num_global_kv_heads));
  f.expected = vals.empty() ? "derivable from the full-attention tensors" : fmt::format("{}", fmt::join(vals, ", "));
  f.message = fmt::format(
      "{} {} missing{} and there is no per_layer_config: transformers ≥5.15 builds full-attention "
      "layers with num_key_value_heads, vLLM 0.2x falls back to head_dim / None, so loading fails with a "
      "size mismatch on the full-attention k_proj/q_proj/o_proj",
      fmt::join(missing, " and "), missing.size() > 1 ? "are" : "is",
      k_eq_v ? " while attention_k_eq_v is true" : "");
  if (der.problem.empty()) {
    f.fix = fmt::format("write {} into {} (derived from the full-attention k_proj/q_proj/q_norm shapes and "
                        "cross-checked against the sliding layers)",
                        f.expected, ctx.info.wrapper ? "text_config" : "config.json");
    f.hint = "the values are proven from the tensor shapes, not guessed (architectures.md §3.2)";
  } else {
    f.hint = fmt::format("cannot derive the values safely: {}", der.problem);
  }
  out.add(finding_kind("gemma4-missing-global-kv-fields"), std::move(f));
}

/** per_layer_config present: alone (info), against the flat fields (conflict F28, redundancy F29). */
void check_both_forms(const Context& ctx, const Json& tc, const Json* plc, bool k_eq_v, bool has_gd, bool has_gkv,
                      FindingSink& out) {
  const auto& lt = ctx.info.layer_types;
  const auto full = full_layers(lt);
  if (!has_gd && !has_gkv) {
    FindingFields f;
    f.key = key_path(ctx, "per_layer_config");
    f.actual = "per_layer_config without the flat global_head_dim / num_global_key_value_heads";
    // The release boundary has one home (model/vllm_config_forms.h), which plan --emit-compose refuses by.
    constexpr int kMin = kGemma4PerLayerConfigOnlyMinVllmMinor;
    f.message = fmt::format("the full-attention geometry is only in per_layer_config (transformers ≥5.15 form); "
                            "vLLM ≤0.{} with transformers ≤5.14 reads num_global_key_value_heads as None and fails to "
                            "build the full-attention layers, vLLM 0.{}.x with transformers ≥5.15 crashes in "
                            "get_head_size (vllm #51744)", kMin - 1, kMin - 1);
    f.hint = fmt::format("serve with vLLM ≥0.{}, or let doctor --vllm-version 0.N --fix (N < {}; or "
                         "--transformers-version 5.N, N < 15) write the flat keys "
                         "from the tensors and remove the then redundant per_layer_config (transformers ≥5.15 "
                         "re-synthesizes it from the flat keys on load)", kMin, kMin);
    // With a target release that cannot build the form (doctor --vllm-version, issue 55): an error, fixed by the flat
    // keys the tensors prove (the fix re-proves, on the file, that per_layer_config then only repeats them).
    // The same with a target transformers that cannot read per_layer_config (≤ 5.14, as vLLM ≤ 0.27 pins it).
    const bool old_vllm = ctx.vllm_minor >= 0 && ctx.vllm_minor < kMin;
    const bool old_transformers = ctx.transformers_version >= 0 && ctx.transformers_version < 5015;
    if (old_vllm || old_transformers) {
      f.severity = Severity::ERROR;
      if (old_vllm) f.message += fmt::format("; the target, vLLM 0.{}, is one of those", ctx.vllm_minor);
      if (old_transformers)
        f.message += fmt::format("; the target, transformers {}.{}, is one of those", ctx.transformers_version / 1000,
                                 ctx.transformers_version % 1000);
      const GlobalKvDerivation der = derive_global_kv(ctx, ctx.config);
      if (der.problem.empty()) {
        f.tensors = der.evidence;
        f.expected = fmt::format("global_head_dim = {}{}", der.global_head_dim,
                                 k_eq_v ? fmt::format(", num_global_key_value_heads = {}", der.num_global_kv_heads)
                                        : std::string());
        f.fix = fmt::format("write {} into {} (derived from the full-attention tensors), then remove per_layer_config "
                            "once it is proven to repeat them", f.expected,
                            ctx.info.wrapper ? "text_config" : "config.json");
      } else {
        f.hint = fmt::format("serve with vLLM ≥0.{}; the flat keys cannot be derived safely: {}", kMin, der.problem);
      }
    }
    out.add(finding_kind("gemma4-per-layer-config-only"), std::move(f));
    return;
  }

  // Both forms present: conflict (F28) or redundancy (F29).
  const auto gd = integral_of(tc, "global_head_dim");
  const auto gkv = integral_of(tc, "num_global_key_value_heads");
  const std::int64_t dsl = integral_of(tc, "head_dim").value_or(0);
  const std::int64_t kvsl = integral_of(tc, "num_key_value_heads").value_or(0);
  std::vector<std::string> conflicts;
  for (auto i : full) {
    auto it = plc->find(std::to_string(i));
    const Json entry = (it != plc->end() && it->is_object()) ? *it : Json::object();
    const std::int64_t pd = integral_of(entry, "head_dim").value_or(dsl);
    const std::int64_t pkv = integral_of(entry, "num_key_value_heads").value_or(kvsl);
    if (gd && pd != *gd)
      conflicts.push_back(fmt::format("layer {}: head_dim {} vs global_head_dim {}", i, pd, *gd));
    if (k_eq_v && gkv && pkv != *gkv)
      conflicts.push_back(fmt::format("layer {}: num_key_value_heads {} vs num_global_key_value_heads {}", i,
                                      pkv, *gkv));
  }
  if (!conflicts.empty()) {
    const GlobalKvDerivation der = derive_global_kv(ctx, ctx.config);
    FindingFields f;
    f.key = key_path(ctx, "per_layer_config");
    f.tensors = der.evidence;
    f.expected = "per_layer_config and the flat global fields agree";
    f.actual = fmt::format("{}", fmt::join(conflicts, "; "));
    f.message = fmt::format("per_layer_config disagrees with the flat global fields ({}): transformers ≥5.15 "
                            "follows per_layer_config, vLLM ≤0.27 follows the flat keys, so the two build "
                            "different models", f.actual);
    if (der.problem.empty())
      f.hint = fmt::format("the tensors say head dim {}{}: correct the form that disagrees by hand (no "
                           "automatic fix: doctor will not pick a side)",
                           der.global_head_dim,
                           k_eq_v ? fmt::format(", kv heads {}", der.num_global_kv_heads) : std::string());
    else
      f.hint = "correct the form that disagrees with the tensors by hand (no automatic fix)";
    out.add(finding_kind("per-layer-config-conflict"), std::move(f));
    return;
  }
  std::string why_not;
  if (prove_per_layer_config_redundant(ctx.config, lt, &why_not)) {
    out.add(
        finding_kind("per-layer-config-redundant"),
        {.message = "per_layer_config repeats the flat global fields exactly (keys = the full-attention layers, one "
                    "value equal to global_head_dim / num_global_key_value_heads); some older transformers "
                    "releases refuse a config that carries it",
         .key = key_path(ctx, "per_layer_config"),
         .expected = "only the flat global fields",
         .actual = tc.find("per_layer_config")->dump(),
         .fix = "remove per_layer_config, after re-proving the redundancy on the file at fix time (transformers "
                "≥5.15 re-synthesizes it from the flat keys on load)"});
  }
}

}  // namespace

void check_gemma4_globals(const Context& ctx, FindingSink& out) {
  if (ctx.info.family != Family::GEMMA4) return;
  const Json& tc = ctx.text();
  const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
  const bool has_gd = has_non_null(tc, "global_head_dim");
  const bool has_gkv = has_non_null(tc, "num_global_key_value_heads");
  const auto& lt = ctx.info.layer_types;
  const auto full = full_layers(lt);
  const Json* plc = nullptr;
  if (auto it = tc.find("per_layer_config"); it != tc.end() && it->is_object()) plc = &*it;
  check_gemma4_scalars(ctx, tc, out);
  if (plc != nullptr) check_per_layer_keys(ctx, *plc, lt, out);
  // Flat fields missing and no per_layer_config to supply them (F27).
  const bool needs_gkv = k_eq_v && !has_gkv;
  if (plc == nullptr && !full.empty() && (!has_gd || needs_gkv)) check_missing_globals(ctx, k_eq_v, has_gd, has_gkv, out);
  if (plc == nullptr) return;
  check_both_forms(ctx, tc, plc, k_eq_v, has_gd, has_gkv, out);
}

}  // namespace fp4forge::doctor
