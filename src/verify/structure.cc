// verify: the structural pass (run_structure), every check that reads the quantized checkpoint alone.
#include "verify/internal.h"

namespace fp4forge::verify_internal {
namespace {

/** No quantization_config: a checkpoint a quantizer wrote without its config, or an unquantized one. */
void missing_quant_config(const Checkpoint& q, Structure& s, Sink& sink) {
  // Without a config, a checkpoint holding no tensor a quantizer writes (a packed weight, a scale, an 8-bit or
  // 4-bit dtype) is an unquantized one: said as that once, with the command that makes what verify proves
  // (issue 55: it read "the quantizer did not write its config" and "its source with a quantization config").
  s.unquantized = std::none_of(q.tensors().begin(), q.tensors().end(), [](const TensorRef& t) {
    const std::string_view n = t.name;
    return n.ends_with("_packed") || n.ends_with("_scale") || n.ends_with("_scale_inv") ||
           n.ends_with("weight_global_scale") || dtype_bits(t.info->dtype) <= 8;
  });
  if (s.unquantized)
    sink.add({"quant-config-missing", Severity::ERROR, "", "this checkpoint is not quantized: config.json has no "
              "quantization_config and every weight is stored unquantized (no weight_packed, no scale, no 8-bit or "
              "4-bit dtype): verify proves a quantized output",
              {}, "quantization_config", "a compressed-tensors quantization_config", "(absent)",
              fmt::format("fp4forge quantize {0} OUT, then fp4forge verify OUT --against {0}", q.dir().string())});
  else
    sink.add({"quant-config-missing", Severity::ERROR, "", "config.json has no quantization_config: vLLM "
              "loads the checkpoint as unquantized and cannot map weight_packed / weight_scale",
              {}, "quantization_config", "a compressed-tensors quantization_config", "(absent)",
              "the quantizer did not write its config; " + std::string(kHintRequant)});
}

void check_quant_config(const Checkpoint& q, Structure& s, Sink& sink, VerifyStats& st) {
  std::string key = "quantization_config";
  const Json* qcj = find_quant_config(q.config(), &key);
  if (!qcj) {
    missing_quant_config(q, s, sink);
    st.scheme = "none";
    return;
  }
  auto parsed = parse_quant_config(*qcj, key);
  if (!parsed.ok()) {
    sink.add({"quant-config-invalid", Severity::ERROR, "", parsed.error().message, {}, key, "", "",
              "vLLM cannot parse this quantization_config either"});
    st.scheme = "invalid";
    return;
  }
  s.qc = std::move(parsed).value();
  const QuantConfig& c = *s.qc;
  if (c.quant_method != "compressed-tensors") {
    sink.add({"quant-config-unsupported", Severity::ERROR, "",
              fmt::format("{}.quant_method is \"{}\", expected \"compressed-tensors\"", key, c.quant_method),
              {}, key + ".quant_method", "compressed-tensors", c.quant_method,
              "verify checks compressed-tensors checkpoints; convert ModelOpt exports first "
              "(compressed-tensors ModelOptNvfp4Converter)"});
  }
  if (c.groups.empty()) {
    sink.add({"quant-config-invalid", Severity::ERROR, "",
              fmt::format("{}.config_groups is empty or absent: no module is declared quantized", key), {},
              key + ".config_groups", "one config group", "(none)", kHintRequant});
  }
  std::string presets;
  for (QuantScheme p : kQuantSchemes) presets += (presets.empty() ? "" : ", ") + std::string(quant_scheme_preset(p));
  // One SchemeGroup per config group, in file order: its preset (or, for a group that names none, the closest
  // preset: the tensors are checked as it and the group is reported) and its weights' observer.
  s.groups.clear();
  for (const ConfigGroup& g : c.groups) {
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
        sink.add({"quant-config-unsupported", Severity::ERROR, gkey,
                  fmt::format("{}: scheme is {} ({}), but not exactly the {} preset: {}", gkey, label, si.detail, label,
                              fmt::join(mism, "; ")),
                  {}, gkey, fmt::format("the {} preset (docs/schemes.md)", label), fmt::format("{}", fmt::join(mism, "; ")),
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
      s.groups.push_back(std::move(sg));
      continue;
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
    s.groups.push_back(std::move(sg));
    const std::string closest = fmt::format("as {}: {}", quant_scheme_preset(*best), fmt::join(best_mism, "; "));
    if (si.scheme == Scheme::UNKNOWN) {
      sink.add({"quant-config-unsupported", Severity::ERROR, gkey,
                fmt::format("{}: unknown quantization scheme ({}); not one of the schemes verify proves ({}); {}",
                            gkey, si.detail, presets, closest),
                {}, gkey, presets, "unknown", "verify does not guess schemes it cannot name"});
    } else {
      sink.add({"quant-config-unsupported", Severity::ERROR, gkey,
                fmt::format("{}: scheme is {} ({}), not one of the schemes verify proves ({}); {}", gkey, label,
                            si.detail, presets, closest),
                {}, gkey, presets, label,
                "verify proves the five weight presets fp4forge writes (docs/schemes.md); other schemes are named, "
                "not proven"});
    }
  }
  if (s.groups.empty()) s.groups.emplace_back();
  {
    // Scheme and observer as pairs, one per distinct (scheme, observer) in scheme order, so that the i-th observer
    // is the i-th scheme's ("FP8_DYNAMIC+NVFP4A16" with "memoryless_minmax+nvfp4_expanded_mse"; issue 55: they were
    // joined in two orders). Each group's line says its name and the option spellings quantize takes.
    std::set<std::pair<std::string, std::string>> pairs;
    st.groups.clear();
    for (std::size_t i = 0; i < c.groups.size(); ++i) {
      const std::string label = scheme_label(c.groups[i], c.format);
      const bool named = s.groups[i].preset && c.groups[i].weights;
      pairs.emplace(label, named ? s.groups[i].observer_name : std::string());
      std::string line = fmt::format("{} {}", c.groups[i].name, label);
      if (const auto qs = quant_scheme_of(c.groups[i], c.format); qs && s.groups[i].preset)
        line += fmt::format(" (--scheme {})", quant_scheme_name(*qs));
      if (named) {
        line += fmt::format(", observer {}", s.groups[i].observer_name);
        if (s.groups[i].observer_known) line += fmt::format(" (--observer {})", observer_option(s.groups[i].observer));
      }
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
  if (auto gm = GroupMatcher::compile(c); gm.ok()) s.matcher = std::move(*gm);  // else check_targets reports it
  if (c.groups.size() > 1) {
    sink.add({"quant-config-multi-group", Severity::WARNING, "",
              fmt::format("{}.config_groups has {} groups; some loaders (TensorRT-LLM PyTorch backend) keep "
                          "only one",
                          key, c.groups.size()),
              {}, key + ".config_groups", "1", fmt::format("{}", c.groups.size()),
              "vLLM loads each group with its own scheme; fp4forge writes several only when a recipe asks for them "
              "(--scheme-for, --recipe) (F26)"});
  }
  if (!c.quantization_status.empty() && c.quantization_status != "compressed") {
    sink.add({"quant-config-status", Severity::WARNING, "",
              fmt::format("{}.quantization_status is \"{}\", expected \"compressed\"", key, c.quantization_status),
              {}, key + ".quantization_status", "compressed", c.quantization_status,
              "the tensors on disk are packed; a non-compressed status tells loaders otherwise"});
  }
  auto m = IgnoreMatcher::compile(c.ignore);
  if (!m.ok()) {
    sink.add({"quant-config-invalid", Severity::ERROR, "ignore", m.error().message, {}, key + ".ignore", "", "",
              "coverage checks were skipped"});
  } else {
    s.ignore = std::move(m).value();
  }
}

/** The members of quantized module `m` against linear_tensors for its [N, K] (sets m.n, m.k from the
 * payload): quantized-module-incomplete with every problem; false when the module cannot be used. */
bool check_members(const Layout& L, Module& m, const std::string& name, const std::string& fam,
                   const std::string& expected_layout, Sink& sink) {
  std::vector<std::string> problems;
  const auto& ps = m.payload->info->shape;
  bool ok = true;
  if (m.payload->info->dtype != L.payload_dtype || ps.size() != 2) {
    problems.push_back(fmt::format("{} is {} {}, expected {} [N, {}]", L.payload, dtype_name(m.payload->info->dtype),
                                   format_shape(ps), dtype_name(L.payload_dtype),
                                   L.per_payload_col == 1 ? std::string("K") : fmt::format("K/{}", L.per_payload_col)));
    ok = false;
  } else {
    m.n = ps[0];
    m.k = ps[1] * L.per_payload_col;
  }
  // The other members, against linear_tensors for this [N, K] (scales in the weight's dtype: any source dtype).
  const DType sdt = m.scale && is_source_dtype(m.scale->info->dtype) ? m.scale->info->dtype : DType::BF16;
  for (const LinearTensorSpec& spec : linear_tensors(L.qs, m.n, m.k, sdt)) {
    if (spec.part == LinearPart::PAYLOAD) continue;
    const TensorRef* t = m.param(spec.suffix);
    if (!t) {
      problems.push_back(fmt::format("{} is missing", spec.suffix));
      ok = false;
      continue;
    }
    const bool fixed = spec.part == LinearPart::GLOBAL_SCALE || spec.part == LinearPart::SHAPE;
    if (!ok && !fixed) continue;  // its shape follows the payload's
    const bool src = L.follows_source(spec.suffix);
    const bool dtype_ok = src ? is_source_dtype(t->info->dtype) : t->info->dtype == spec.dtype;
    if (!dtype_ok || t->info->shape != spec.shape) {
      problems.push_back(fmt::format("{} is {} {}, expected {} {}", spec.suffix, dtype_name(t->info->dtype),
                                     format_shape(t->info->shape),
                                     src ? std::string("BF16/F16/F32") : std::string(dtype_name(spec.dtype)),
                                     format_shape(spec.shape)));
      if (spec.part == LinearPart::SHAPE) continue;  // vLLM would read a wrong shape: below when readable
      ok = false;
    }
  }
  for (auto* e : m.extras) problems.push_back(fmt::format("extra member '{}'", split_name(e->name).second));
  if (!problems.empty()) {
    std::vector<std::string> ts{m.payload->name};
    for (const LinearTensorSpec& spec : linear_tensors(L.qs, 1, 1, DType::BF16))
      if (const TensorRef* t = m.param(spec.suffix); t && t != m.payload) ts.push_back(t->name);
    for (auto* e : m.extras) ts.push_back(e->name);
    sink.add({"quantized-module-incomplete", Severity::ERROR, fam,
              fmt::format("quantized module '{}': {}", name, fmt::join(problems, "; ")), ts, "", expected_layout,
              fmt::format("{}", fmt::join(problems, "; ")),
              "vLLM fails with KeyError or a size mismatch at load (F20); " + std::string(kHintRequant)});
  }
  return ok;
}

void collect_modules(const Checkpoint& q, const ModelInfo& info, Structure& s, Sink& sink, VerifyStats& st,
                     bool kv_cache_scheme) {
  for (const TensorRef& t : q.tensors()) {
    auto [mod, param] = split_name(t.name);
    const LeafTraits* leaf = leaf_traits(param);
    if (leaf && leaf->verify_member) {
      Module& m = s.modules[mod];
      m.name = mod;
      m.params[param] = &t;
    } else if (leaf && leaf->attention_scale && !kv_cache_scheme) {
      sink.add({"orphan-scale", Severity::WARNING, family_of(t.name),
                fmt::format("'{}' is a KV-cache scale but quantization_config has no kv_cache_scheme", t.name),
                {t.name}, "quantization_config.kv_cache_scheme", "a kv_cache_scheme", "(none)",
                "a leaked calibration buffer; remove it or declare the KV-cache scheme"});
    }
  }
  // The payload of module `m` under layout `L`: weight_packed (4-bit schemes), or an F8_E4M3 `weight` (FP8).
  auto payload_under = [](const Layout& L, const Module& m) -> const TensorRef* {
    const TensorRef* p = m.param(L.payload);
    return p && (L.payload != "weight" || p->info->dtype == DType::F8_E4M3) ? p : nullptr;
  };
  for (auto& [name, m] : s.modules) {
    m.group = s.group_index(name);  // its tensors are checked as the scheme vLLM loads it with
    const Layout& L = s.layout(m);
    const std::set<std::string_view> written(L.suffixes.begin(), L.suffixes.end());
    m.payload = payload_under(L, m);
    m.scale = m.param("weight_scale");
    m.gs = m.param("weight_global_scale");
    m.shape = m.param("weight_shape");
    m.input_gs = m.param("input_global_scale");
    if (const TensorRef* w = m.param("weight"); w && w != m.payload) m.weight = w;
    for (const auto& [suffix, t] : m.params) {
      if (t == m.weight || written.count(suffix)) continue;
      if (suffix == "input_global_scale" && L.weight_only) continue;  // its own finding below
      m.extras.push_back(t);
    }
  }
  for (auto& [name, m] : s.modules) {
    const std::string fam = family_of(name);
    const Layout& L = s.layout(m);
    const bool nvfp4 = scheme_traits(L.qs).global_scale;
    const std::set<std::string_view> written(L.suffixes.begin(), L.suffixes.end());
    const std::string expected_layout = L.describe();
    if (!m.payload) {
      std::vector<std::string> orphans;
      for (const TensorRef* t : m.members()) orphans.push_back(t->name);
      if (!orphans.empty()) {
        std::string what =
            nvfp4 ? std::string("a weight_packed: scale tensors of a module that is not NVFP4-quantized")
                  : fmt::format("{}: scale tensors of a module that is not {}-quantized",
                                L.payload == "weight" ? "an F8_E4M3 weight" : "a " + std::string(L.payload), L.word);
        // A module written in another group's scheme than the one vLLM gives it (a mixed config whose targets
        // select the wrong group): vLLM builds it as its group's scheme and the load fails.
        for (const SchemeGroup& other : s.groups)
          if (&other != &s.group(m) && other.layout.qs != L.qs && payload_under(other.layout, m) != nullptr) {
            what += fmt::format("; its tensors are {}'s, but vLLM gives it config group '{}' ({})", other.layout.word,
                                s.group(m).name, L.word);
            break;
          }
        sink.add({"orphan-scale", Severity::ERROR, fam,
                  fmt::format("module '{}' has {} without {}", name, fmt::join(orphans, ", "), what), orphans, "",
                  fmt::format("{}, or none", fmt::join(L.suffixes, " + ")), fmt::format("{}", fmt::join(orphans, ", ")),
                  nvfp4 ? "leaked buffers or a different scheme (FP8 uses weight + weight_scale); vLLM fails with "
                          "KeyError or loads garbage (F20)"
                        : fmt::format("leaked buffers or a different scheme than {}; vLLM fails with KeyError or "
                                      "loads garbage (F20)",
                                      L.word)});
      }
      continue;
    }
    // A quantized module.
    ++st.quantized_modules;
    const auto& ps = m.payload->info->shape;
    bool ok = check_members(L, m, name, fam, expected_layout, sink);
    // weight_shape (W4A16): vLLM unpacks weight_packed to this shape.
    if (ok && m.shape && written.count("weight_shape") && m.shape->info->dtype == DType::I64 &&
        m.shape->info->shape == std::vector<std::uint64_t>{2}) {
      std::array<std::int64_t, 2> dims{};
      std::memcpy(dims.data(), q.data(*m.shape).data(), sizeof(dims));
      if (dims[0] != static_cast<std::int64_t>(m.n) || dims[1] != static_cast<std::int64_t>(m.k)) {
        sink.add({"weight-shape-mismatch", Severity::ERROR, fam,
                  fmt::format("'{}' is [{}, {}], but {} {} holds a [{}, {}] weight", m.shape->name, dims[0], dims[1],
                              m.payload->name, format_shape(ps), m.n, m.k),
                  {m.shape->name, m.payload->name}, "", fmt::format("[{}, {}]", m.n, m.k),
                  fmt::format("[{}, {}]", dims[0], dims[1]),
                  "vLLM unpacks weight_packed to weight_shape: a size mismatch at load, or a scrambled weight; " +
                      std::string(kHintRequant)});
      }
    }
    const ShapeRule rule = shape_rule(L.qs);
    if (ok && m.k % rule.k_multiple != 0) {
      if (nvfp4) {
        sink.add({"k-not-multiple-16", Severity::ERROR, fam,
                  fmt::format("quantized module '{}' has K = {} (in_features), not a multiple of 16", name, m.k),
                  {m.payload->name}, "", "K % 16 == 0", fmt::format("K = {}", m.k),
                  "NVFP4 groups are 16 columns; such a weight must stay unquantized and be listed in ignore"});
      } else {
        sink.add({"k-not-multiple", Severity::ERROR, fam,
                  fmt::format("quantized module '{}' has K = {} (in_features), not a multiple of {} as {} needs ({})",
                              name, m.k, rule.k_multiple, L.word, rule.why),
                  {m.payload->name}, "", fmt::format("K % {} == 0", rule.k_multiple), fmt::format("K = {}", m.k),
                  "such a weight must stay unquantized and be listed in ignore (fp4forge quantize keeps it)"});
      }
      ok = false;
    }
    m.valid = ok;
    if (m.weight) {
      sink.add({"leftover-weight", Severity::ERROR, fam,
                fmt::format("quantized module '{}' still has a plain 'weight' beside {}", name, L.payload),
                {m.weight->name}, "", "no 'weight' tensor", fmt::format("{} {}", dtype_name(m.weight->info->dtype),
                                                                        format_shape(m.weight->info->shape)),
                "the quantizer must drop the source weight; vLLM rejects the unexpected tensor"});
    }
    if (m.input_gs && L.weight_only && s.scheme != Scheme::NVFP4) {
      sink.add({"input-global-scale-in-a16", Severity::ERROR, fam,
                fmt::format("module '{}' has input_global_scale, but {} is weight-only", name,
                            quant_scheme_preset(L.qs)),
                {m.input_gs->name}, "", "no input_global_scale (input_activations null)", "input_global_scale present",
                "a W4A4 export labelled A16, or a leaked calibration buffer; vLLM's A16 path has no such parameter"});
    }
    m.cls = classify(name + ".weight", std::vector<std::uint64_t>{m.n, m.k}, info);
  }
  // Kept Linear-like modules: a 2-D float `weight`, module not ending in "norm" (CT's built-in skip).
  for (auto& [name, m] : s.modules) {
    if (m.quantized() || !m.weight) continue;
    const auto& sh = m.weight->info->shape;
    if (sh.size() == 2 && is_float_dtype(m.weight->info->dtype) && !ends_with(name, "norm")) {
      s.kept_linear.insert(name);
      m.cls = classify(m.weight->name, sh, info);
    }
  }
  st.kept_linear = s.kept_linear.size();
}

/** shape_rule's N multiple (FP8_BLOCK: 128). vLLM refuses a merged layer (a fused set, or a routed expert's
 * gate/up in FusedMoE) whose parts are not whole blocks, except the last part of a merged dense layer; a
 * layer of its own is served as long as tensor parallelism does not split it, so that is a warning. */
void check_n_rule(const Structure& s, Sink& sink) {
  std::map<std::string, const FusedSet*> set_of;
  for (const FusedSet& set : s.sets)
    for (const auto& mem : set.members) set_of[mem] = &set;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const ShapeRule rule = shape_rule(s.layout(m).qs);
    if (rule.n_multiple <= 1 || !m.valid || m.n % rule.n_multiple == 0) continue;
    const auto it = set_of.find(name);
    const bool merged_part = it != set_of.end() && it->second->members.back() != name;
    const Role r = m.cls.base_role;
    const bool expert_gate_up = m.cls.expert >= 0 && (r == Role::EXPERT_GATE || r == Role::EXPERT_UP);
    const bool certain = merged_part || expert_gate_up;
    sink.add({"n-not-multiple", certain ? Severity::ERROR : Severity::WARNING, family_of(name),
              fmt::format("quantized module '{}' has N = {} (out_features), not a multiple of {} ({}){}", name, m.n,
                          rule.n_multiple, rule.why,
                          certain ? fmt::format(": vLLM refuses {} whose parts are not whole blocks",
                                                expert_gate_up ? "FusedMoE gate/up weights" : "a merged layer")
                                  : std::string(": vLLM serves it only while tensor parallelism does not split it")),
              {m.payload->name}, "", fmt::format("N % {} == 0", rule.n_multiple), fmt::format("N = {}", m.n),
              "fp4forge quantize keeps such weights unquantized and lists them in ignore"});
  }
}

/** "an NVFP4 target", "an FP8_DYNAMIC target", "a W4A16 target". */
std::string as_target(const Layout& L) {
  const char c = L.word.empty() ? 'x' : L.word.front();
  return fmt::format("{} {} target", c == 'F' || c == 'M' || c == 'N' ? "an" : "a", L.word);
}
/** How messages name the payload: "weight_packed", or "an F8_E4M3 weight with its weight_scale". */
std::string payload_text(const Layout& L) {
  return L.payload == "weight" ? std::string("an F8_E4M3 weight with its weight_scale") : std::string(L.payload);
}

void check_policy(const ModelInfo& info, const Structure& s, Sink& sink) {
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const Layout& L = s.layout(m);
    const bool nvfp4 = scheme_traits(L.qs).global_scale;
    const Role r = m.cls.role;
    const std::string fam = family_of(name);
    if (r == Role::ROUTER || m.cls.base_role == Role::ROUTER) {
      sink.add({"router-quantized", Severity::ERROR, fam,
                fmt::format("router/gate '{}' is quantized: its logits become NaN behind green startup checks (F1)",
                            name),
                {m.payload->name}, "", "router kept in bf16 and listed in ignore", L.word,
                "vLLM builds routers with quant_config=None; re-quantize with routers kept (fp4forge never "
                "quantizes them unless --force-quantize)"});
      continue;
    }
    if (!role_is_protected(r)) continue;
    // What the scheme may quantize is scheme_policy's (GatedDeltaNet projections at 8 bits).
    const std::string leaf = split_name(name).second;
    if (m.cls.text_stack && policy_quantizes(r, info.spec(), L.qs, leaf)) continue;
    std::string why = nvfp4 ? std::string() : scheme_keep_reason(r, info.spec(), L.qs, leaf);
    // A family outside the registry has no mixer rule: its linear attention at 8 bits cannot be judged.
    const bool unsure = r == Role::LINEAR_ATTN && info.family == Family::UNKNOWN && weight_bits(L.qs) >= 8;
    sink.add({"protected-quantized", unsure ? Severity::WARNING : Severity::ERROR, fam,
              unsure ? fmt::format("'{}' ({}) is quantized as {}; the family is not in fp4forge's registry, so whether "
                                   "its linear attention may be quantized at 8 bits could not be checked",
                                   name, role_name(r), L.word)
                     : fmt::format("'{}' ({}) is quantized, but {} tensors must stay unquantized{}", name, role_name(r),
                                   role_name(r), nvfp4 ? std::string() : fmt::format(" under {}", L.word)),
              {m.payload->name}, "", why.empty() ? "unquantized (architectures.md §5.3)" : why, L.word,
              std::string("norms, embeddings, lm_head, towers, projectors, linear attention, conv1d and MTP break or "
                          "degrade when quantized to 4 bits (F6, F7)") +
                  (nvfp4 ? "" : "; at 8 bits only a registered family's GatedDeltaNet projections may be quantized "
                                "(docs/schemes.md)")});
  }
}

void check_coverage(const Checkpoint& q, const ModelInfo& info, const Structure& s, Sink& sink) {
  if (!s.qc || !s.ignore) return;
  const IgnoreMatcher& ig = *s.ignore;
  // Every kept Linear-like module must be ignored.
  for (const auto& name : s.kept_linear) {
    if (ig.matches(name)) continue;
    const Module& m = s.modules.at(name);
    // Embeddings are no Linear target: compressed-tensors matches `targets: ["Linear"]` by module class and
    // vLLM builds them as VocabParallelEmbedding, unquantized unless a group names them (llm-compressor's
    // own outputs list only lm_head).
    if (m.cls.role == Role::EMBEDDING || m.cls.role == Role::PLE) continue;
    sink.add({"ignore-missing", Severity::ERROR, family_of(name),
              fmt::format("'{}' is an unquantized 2-D weight {} but no ignore entry matches it: vLLM treats it as "
                          "{} target and expects {}",
                          name, format_shape(m.weight->info->shape), as_target(s.group_of(name).layout),
                          payload_text(s.group_of(name).layout)),
              {m.weight->name}, "quantization_config.ignore", "an ignore entry for the module", "(not matched)",
              "list every unquantized Linear-like module in ignore, routers included (F3, F7, F22)"});
  }
  // Fused 3-D experts left unquantized must be ignored too: their module is the FusedMoE block key
  // (`<prefix>.experts`, model/experts.h: also Granite's `input_linear` / `output_linear`).
  std::set<std::string> expert_blocks;
  std::map<std::string, std::vector<std::string>> block_tensors;
  {
    for (const ExpertBlock& b : find_expert_blocks(named_shapes(q), info)) {
      if (b.storage != ExpertStorage::FUSED) continue;
      expert_blocks.insert(b.key);
      for (const std::string& t : b.stored()) block_tensors[b.key].push_back(t);
    }
  }
  for (const auto& blk : expert_blocks) {
    if (ig.matches(blk)) continue;
    sink.add({"ignore-missing", Severity::ERROR, family_of(blk) + " (fused 3-D)",
              fmt::format("fused 3-D experts '{}' are unquantized and not ignored: vLLM's compressed-tensors MoE "
                          "path expects per-expert {} (F4)",
                          blk, payload_text(s.group_of(blk + ".0.gate_proj").layout)),
              block_tensors[blk], "quantization_config.ignore",
              "experts split per expert and quantized (R3), or the block ignored", "(fused, unquantized)",
              "re-quantize with fp4forge, which splits fused experts per expert"});
  }
  // Quantized modules that ignore matches.
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const long i = ig.first_match(name);
    if (i < 0) continue;
    sink.add({"quantized-but-ignored", Severity::ERROR, family_of(name),
              fmt::format("'{}' is quantized but ignore entry \"{}\" matches it: vLLM builds it unquantized and "
                          "cannot load {}",
                          name, ig.entry(static_cast<std::size_t>(i)), payload_text(s.layout(m))),
              {m.payload->name}, "quantization_config.ignore", "no ignore entry for a quantized module",
              ig.entry(static_cast<std::size_t>(i)), "remove the entry or keep the module unquantized"});
  }
  // Entries that match nothing on disk.
  std::set<std::string> names;
  for (const TensorRef& t : q.tensors()) {
    names.insert(split_name(t.name).first);
    names.insert(t.name);
    for (auto& a : vllm_ignore_aliases(info.spec(), split_name(t.name).first)) names.insert(std::move(a));
  }
  for (const auto& blk : expert_blocks) names.insert(blk);
  for (std::size_t i = 0; i < ig.size(); ++i) {
    bool hit = !ig.is_regex(i) && names.count(ig.entry(i)) > 0;  // exact entries: one lookup
    for (const auto& n : names) {
      if (hit || !ig.is_regex(i)) break;
      if (ig.entry_matches(i, n)) {
        hit = true;
        break;
      }
    }
    if (hit) continue;
    sink.add({"ignore-unmatched", Severity::WARNING, fmt::format("ignore[{}]", i),
              fmt::format("ignore[{}] \"{}\" matches no module on disk{}", i, ig.entry(i),
                          ig.is_regex(i) ? " (evaluated with re.match semantics, anchored at the start)" : ""),
              {}, fmt::format("quantization_config.ignore[{}]", i), "at least one module", "none",
              "a stale or mistyped entry: the modules it was meant to keep may be quantized or renamed (F22, F23)"});
  }
}

void check_fused_sets(const Checkpoint& q, const ModelInfo& info, Structure& s, Sink& sink, VerifyStats& st) {
  std::set<std::string> wm;
  for (const auto& [name, m] : s.modules)
    if (m.quantized() || s.kept_linear.count(name)) wm.insert(name);
  std::vector<std::string> wmv(wm.begin(), wm.end());
  s.sets = fused_sets(wmv, info);
  st.fused_sets = s.sets.size();
  for (const FusedSet& set : s.sets) {
    std::vector<std::string> quant, kept;
    for (const auto& mem : set.members) (s.modules.at(mem).quantized() ? quant : kept).push_back(mem);
    const std::string fam = family_of(set.parent) + " {" + set.kind + "}";
    if (!quant.empty() && !kept.empty()) {
      sink.add({"fused-set-partial", Severity::ERROR, fam,
                fmt::format("fused set {} of '{}' is partly quantized: quantized [{}], kept [{}]", set.kind,
                            set.parent, fmt::join(quant, ", "), fmt::join(kept, ", ")),
                set.members, "", "all members quantized or all kept", "mixed",
                "vLLM refuses: \"Detected some but not all shards of ... are quantized\" (F9)"});
      continue;
    }
    if (s.qc && s.ignore) {
      auto r = vllm_should_ignore(*s.ignore, set.members);
      if (!r.ok()) {
        sink.add({"fused-set-partial", Severity::ERROR, fam,
                  fmt::format("fused set {} of '{}': {}", set.kind, set.parent, r.error().message), set.members,
                  "quantization_config.ignore", "ignore matches all members or none", "some members", ""});
        continue;
      }
    }
    if (quant.size() != set.members.size() || !has_global_scale(s.layout(s.modules.at(set.members.front())).qs)) continue;
    // Every member quantized: bit-identical global scales (NVFP4: one per fused layer in vLLM).
    std::vector<std::pair<std::string, float>> gs;
    bool readable = true;
    for (const auto& mem : set.members) {
      auto v = read_f32_scalar(q, s.modules.at(mem).gs);
      if (!v) {
        readable = false;
        break;
      }
      gs.emplace_back(mem, *v);
    }
    if (!readable) continue;
    bool same = true;
    for (const auto& [n, v] : gs) same = same && f32_bits(v) == f32_bits(gs[0].second);
    if (same) continue;
    float lo = std::numeric_limits<float>::infinity(), hi = 0;
    for (const auto& [n, v] : gs) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    std::vector<std::string> vals, ts;
    for (const auto& [n, v] : gs) {
      vals.push_back(fmt::format("{}={}", split_name(n).second, v));
      ts.push_back(n + ".weight_global_scale");
    }
    const double ratio = lo > 0 && std::isfinite(hi) ? static_cast<double>(hi) / lo : 0.0;
    sink.add({"fused-scale-mismatch", Severity::ERROR, fam,
              fmt::format("fused set {} of '{}' has different weight_global_scale values ({}; ratio {:.4g}): vLLM "
                          "keeps one scale per fused layer and mis-scales the others",
                          set.kind, set.parent, fmt::join(vals, ", "), ratio),
              ts, "", "bit-identical weight_global_scale across the set (R1)", fmt::format("{}", fmt::join(vals, ", ")),
              "compute one gs over the whole set (F11, F12, F14); " + std::string(kHintRequant)});
  }
  // F10: routed experts of one block mixed quantized / kept.
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> blocks;  // parent -> (quantized, kept)
  for (const auto& [name, m] : s.modules) {
    if (m.cls.expert < 0) continue;
    if (!m.quantized() && !s.kept_linear.count(name)) continue;
    const std::string_view key = experts_key_of(name);
    if (key.empty()) continue;
    auto& b = blocks[std::string(key)];
    (m.quantized() ? b.first : b.second)++;
  }
  for (const auto& [blk, c] : blocks) {
    if (c.first == 0 || c.second == 0) continue;
    sink.add({"experts-mixed", Severity::ERROR, family_of(blk),
              fmt::format("'{}' mixes quantized ({}) and unquantized ({}) expert weights", blk, c.first, c.second),
              {blk}, "", "every expert weight of a layer in one scheme", "mixed",
              "vLLM's FusedMoE loads one scheme per layer (F10)"});
  }
}


void check_geometry(const Checkpoint& q, const ModelInfo& info, const Structure& s, Sink& sink) {
  const Json& text = text_config(q.config());
  // Layer count of the text stack.
  std::set<int> layers;
  int max_layer = -1;
  std::vector<NamedShape> named;
  for (const TensorRef& t : q.tensors()) {
    named.push_back({t.name, t.info->shape});
    const TensorClass c = classify(t.name, t.info->shape, info);
    if (c.text_stack && c.layer >= 0) {
      layers.insert(c.layer);
      max_layer = std::max(max_layer, c.layer);
    }
    if ((c.role == Role::EXPERT_GATE_UP_FUSED || c.role == Role::EXPERT_DOWN_FUSED) && t.info->shape.size() == 3 &&
        info.num_experts > 0 && t.info->shape[0] != static_cast<std::uint64_t>(info.num_experts)) {
      sink.add({"geometry-mismatch", Severity::ERROR, family_of(t.name),
                fmt::format("'{}' has {} experts (dim 0 of {}), config says num_experts = {}", t.name,
                            t.info->shape[0], format_shape(t.info->shape), info.num_experts),
                {t.name}, "config.json num_experts", fmt::format("{}", info.num_experts),
                fmt::format("{}", t.info->shape[0]), "config and tensors disagree"});
    }
  }
  const std::int64_t stack_n = info.indexed_layers();  // LongCat-Flash: num_layers (sublayers counted twice)
  if (stack_n > 0 && !layers.empty()) {
    std::vector<int> missing;
    for (int i = 0; i < stack_n && missing.size() < 20; ++i)
      if (!layers.count(i)) missing.push_back(i);
    if (max_layer >= stack_n || !missing.empty()) {
      sink.add({"geometry-mismatch", Severity::ERROR, "layers",
                fmt::format("text stack has layer indices up to {} ({} distinct){}, config {} = {}",
                            max_layer, layers.size(),
                            missing.empty() ? std::string() : fmt::format(", missing [{}]", fmt::join(missing, ", ")),
                            info.stack_layers > 0 ? "num_layers" : "num_hidden_layers", stack_n),
                {}, "num_hidden_layers", fmt::format("layers 0..{}", stack_n - 1),
                fmt::format("{} layers, max index {}", layers.size(), max_layer),
                "tensors were dropped or the config belongs to another model"});
    }
  }
  for (ExpertBlock b : find_expert_blocks(named, info)) {
    if (b.storage != ExpertStorage::PER_EXPERT) continue;
    const std::int64_t E = info.num_experts;
    if (const std::vector<int> zero = drop_zero_experts(b, info); !zero.empty()) {
      sink.add({"zero-experts-stored", Severity::WARNING, family_of(b.key),
                fmt::format("expert block '{}': zero-computation experts [{}] (zero_expert_num = {}) carry tensors; "
                            "they compute the identity, so these tensors are not weights vLLM reads (inferred "
                            "from LongCat-Flash's design) and their quantization is not judged here",
                            b.key, fmt::join(zero, ", "), info.zero_experts),
                {b.key}, "", "", "", "left as the writer stored them"});
      if (b.parts.empty()) continue;
    }
    std::map<int, std::set<Role>> roles;
    for (const auto& p : b.parts) roles[p.expert].insert(p.role);
    std::vector<std::string> issues;
    if (E > 0) {
      if (static_cast<std::int64_t>(roles.size()) != E || roles.begin()->first != 0 || roles.rbegin()->first != E - 1)
        issues.push_back(fmt::format("{} experts with indices {}..{}, config num_experts = {}", roles.size(),
                                     roles.begin()->first, roles.rbegin()->first, E));
    }
    const std::vector<int> incomplete = incomplete_experts(b);
    if (!incomplete.empty())
      issues.push_back(fmt::format("experts without the same complete set of gate/up/down (or up/down): [{}]",
                                   fmt::join(incomplete, ", ")));
    if (issues.empty()) continue;
    sink.add({"geometry-mismatch", Severity::ERROR, family_of(b.key),
              fmt::format("expert block '{}': {}", b.key, fmt::join(issues, "; ")), {b.key}, "num_experts",
              fmt::format("experts 0..{} each with gate, up and down", E - 1),
              fmt::format("{}", fmt::join(issues, "; ")),
              "vLLM's FusedMoE loader needs every expert (F5)"});
  }
  // Shapes of attention / MLP / expert weights (quantized: [N, K] from the payload). Only where the config
  // states the geometry: a module in a sublayer the text config does not describe (the DeepSeek-V3.2 / GLM-5
  // sparse-attention `indexer` with its own heads, LongCat-Flash's numbered attention and MLP sublayers) is
  // not checked, and the report says so.
  std::vector<std::string> unchecked;
  for (const auto& [name, m] : s.modules) {
    if (!(m.quantized() ? m.valid : s.kept_linear.count(name) > 0)) continue;
    const TensorClass& c = m.cls;
    if (!(c.text_stack || c.role == Role::MTP) || !role_has_config_geometry(c.base_role)) continue;
    // A family outside the registry: its class may transform the config's widths (LFM2 rescales its MLP
    // width, AFMoE gates its attention), so the config does not state the shapes for sure.
    if (info.family == Family::UNKNOWN || !geometry_stated(c)) {
      unchecked.push_back(name);
      continue;
    }
    const auto want = expected_linear_shape(info, text, c.base_role, c);
    if (!want) continue;
    std::uint64_t rows = m.n, cols = m.k;
    if (!m.quantized()) {
      rows = m.weight->info->shape[0];
      cols = m.weight->info->shape[1];
    }
    if (static_cast<std::int64_t>(rows) == want->first && static_cast<std::int64_t>(cols) == want->second) continue;
    // Without a registry row the expected shape is a guess from generic keys: a warning, never an error.
    sink.add({"geometry-mismatch", info.family == Family::UNKNOWN ? Severity::WARNING : Severity::ERROR,
              family_of(name) + " shape",
              fmt::format("'{}' ({}{}) is [{}, {}], config implies [{}, {}]", name, role_name(c.base_role),
                          c.layer_type.empty() ? std::string() : ", " + c.layer_type, rows, cols, want->first,
                          want->second),
              {m.quantized() ? m.payload->name : m.weight->name}, "config.json text geometry",
              fmt::format("[{}, {}]", want->first, want->second), fmt::format("[{}, {}]", rows, cols),
              "config and tensors disagree (architectures.md §3.1); vLLM fails with a size mismatch"});
  }
  if (!unchecked.empty())
    sink.add({"geometry-unchecked", Severity::WARNING, "shape",
              info.family == Family::UNKNOWN
                  ? fmt::format("the family is not in fp4forge's registry: the shapes of {} module(s) (e.g. '{}') "
                                "were not checked against config.json, whose widths its class may transform",
                                unchecked.size(), unchecked.front())
                  : fmt::format("{} module(s) sit in sublayers whose geometry config.json does not state (e.g. "
                                "'{}'); their shapes were not checked against the config",
                                unchecked.size(), unchecked.front()),
              {}, "config.json text geometry", "a shape the config states", "a sublayer with its own geometry",
              "the shapes are the writer's; their payloads and scales were still checked"});
}



/** Every quantized module must be one vLLM maps to a parameter of this architecture: per-expert names use
 * the family's expert leaves, and families whose experts vLLM cannot load quantized have none. */
void check_vllm_names(const ModelInfo& info, const Structure& s, Sink& sink) {
  const FamilySpec& spec = info.spec();
  if (info.family == Family::UNKNOWN) return;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized() || m.cls.expert < 0) continue;
    const Role r = m.cls.role == Role::MTP ? m.cls.base_role : m.cls.role;
    if (r != Role::EXPERT_GATE && r != Role::EXPERT_UP && r != Role::EXPERT_DOWN) continue;
    const std::string leaf = split_name(name).second;
    if (!spec.experts_refusal.empty()) {
      sink.add({"vllm-unmapped", Severity::ERROR, family_of(name),
                fmt::format("'{}' is a quantized routed expert, but {}", name, spec.experts_refusal), {m.payload->name},
                "", "unquantized experts", s.layout(m).word + " experts",
                "keep the experts unquantized (--ignore 're:.*experts')"});
      continue;
    }
    const std::size_t want = r == Role::EXPERT_GATE ? 0 : r == Role::EXPERT_UP ? 1 : 2;
    if (leaf == spec.expert_leaves[want]) continue;
    sink.add({"vllm-unmapped", Severity::ERROR, family_of(name),
              fmt::format("quantized expert '{}' is named '{}', but vLLM's {} expert mapping takes '{}' for this "
                          "projection: the weights would not load",
                          name, leaf, spec.display, spec.expert_leaves[want]),
              {m.payload->name}, "", std::string(spec.expert_leaves[want]), leaf,
              "re-quantize with fp4forge, which names experts as the family's vLLM loader expects"});
  }
}

/** An FP8 release in the native (`quant_method: fp8`) or ModelOpt dialect, or a per-tensor
 * compressed-tensors FP8 checkpoint, is a source, not one of the five schemes: what can be checked is that
 * its FP8 weights are readable (model/fp8_source.h). True when it is one (the scheme checks are then
 * skipped). */
/** A checkpoint quantized in a format fp4forge neither reads nor writes (GPTQ, AWQ, gpt-oss's MXFP4 release,
 * ModelOpt NVFP4, ...): one finding that says so and what was not checked, instead of compressed-tensors' structural
 * checks, which would call its every module wrong. True when it is one. */
bool foreign_format(const Checkpoint& q, Sink& sink, bool as_warning) {
  auto hfq = read_hf_quant_config(q);
  const auto foreign = foreign_quantization(q.config(), hfq.ok() && *hfq ? &**hfq : nullptr);
  if (!foreign) return false;
  sink.add({"quant-format-foreign", as_warning ? Severity::WARNING : Severity::ERROR, "quantization_config",
            fmt::format("{}: not compressed-tensors, so fp4forge's checks of quantized tensors (packed shapes, scales, "
                        "ignore list, coverage) do not apply and none of them ran",
                        *foreign),
            {}, "quantization_config.quant_method", "compressed-tensors (or an FP8 release fp4forge reads)",
            *foreign,
            "vLLM serves this format with its own loader for the method; to check or re-quantize, start from the "
            "original BF16 weights (docs/fp8-sources.md#refused-sources)"});
  return true;
}

bool fp8_release(const Checkpoint& q, const ModelInfo& info, Sink& sink, bool scan_values) {
  auto src = read_fp8_source(q);
  if (!src.ok()) {
    // A source detection refuses: a CT checkpoint of another scheme is left to the structural checks.
    const Json* qc = find_quant_config(q.config());
    const std::string method = qc != nullptr ? str_of(*qc, "quant_method") : std::string();  // any JSON type
    if (method == "fp8" || method == "modelopt")
      sink.add({"fp8-source-invalid", Severity::ERROR, "quantization_config", src.error().message, {}, "",
                "FP8 weights with their scales (docs/fp8-sources.md)", "unreadable",
                "the release is incomplete or inconsistent; vLLM fails to load it too"});
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
    sink.add({"fp8-source-invalid", Severity::ERROR, "quantization_config", c.error().message, {}, "",
              "FP8 weights with their scales (docs/fp8-sources.md)", "refused by fp4forge quantize",
              "the release is damaged or inconsistent; fp4forge quantize refuses the folder for the same reason"});
    return true;
  }
  if (scan_values)
    if (Status v = scan_fp8_values(q, **src); !v) {
      sink.add({"fp8-source-invalid", Severity::ERROR, "values", v.error().message, {}, "",
                "finite FP8 weights and scales", "NaN or infinite",
                "vLLM serves NaN from such weights; fp4forge quantize refuses the folder for the same reason"});
      return true;
    }
  sink.add({"fp8-source", Severity::INFO, "quantization_config",
            fmt::format("an FP8 release, {}: its weights and scales are consistent{}; it is a source, not one of the "
                        "schemes fp4forge writes, so their checks do not apply (fp4forge quantize reads it as its "
                        "bf16 expansion)",
                        (*src)->label, scan_values ? " and finite" : " (values not scanned)"),
            {}, "", "", "", "quantize it: fp4forge quantize SRC DST (docs/fp8-sources.md)"});
  return true;
}

/** Issue 27 #11, R4-B10: schemes whose scales are stored in the weight's dtype (FP8, W4A16): compressed-tensors writes
 * each in its own weight's dtype, usually the model's (the text embedding's). An F16 scale in a bf16 model is a
 * re-save or an edit, or an F16 weight of a mixed-dtype source: a warning here, exact with --against. */
void check_scale_dtype(const Checkpoint& q, const ModelInfo& info, const Structure& s, Sink& sink) {
  // Issue 27 #11: the config's weights.scale_dtype against what the stored scales are. compressed-tensors builds
  // the scale parameters in that dtype when it loads the checkpoint, so a changed field loads every scale cast.
  // A null or absent field (releases written before compressed-tensors recorded it) is not checked.
  if (s.qc) {
    auto torch_name = [](DType d) -> std::string {
      switch (d) {
        case DType::F8_E4M3: return "torch.float8_e4m3fn";
        case DType::U8: return "torch.uint8";
        case DType::BF16: return "torch.bfloat16";
        case DType::F16: return "torch.float16";
        case DType::F32: return "torch.float32";
        default: return std::string(dtype_name(d));
      }
    };
    for (std::size_t gi = 0; gi < s.qc->groups.size(); ++gi) {
      const ConfigGroup& g = s.qc->groups[gi];
      if (!g.weights || g.weights->scale_dtype.empty() || gi >= s.groups.size()) continue;
      // The group's own scales: the first quantized module vLLM gives this group.
      const std::string_view preset = scheme_traits(s.groups[gi].layout.qs).weights.scale_dtype;
      std::optional<DType> stored;
      std::string example;
      for (const auto& [name, m] : s.modules)
        if (m.quantized() && m.scale && m.group == gi) {
          stored = m.scale->info->dtype;
          example = m.scale->name;
          break;
        }
      const std::string& said = g.weights->scale_dtype;
      const std::string want = stored ? torch_name(*stored) : std::string(preset);
      if (want.empty() || said == want) continue;
      sink.add({"scale-dtype-mismatch", Severity::ERROR, "quantization_config",
                fmt::format("config group '{}' says weights.scale_dtype '{}' but the weight scales are stored as {} "
                            "(e.g. '{}'): compressed-tensors builds the scale parameters in the stated dtype and "
                            "casts every stored scale into it",
                            g.name, said, want, example),
                {}, "", want, said,
                fmt::format("restore \"scale_dtype\": \"{}\" (what the preset writes{}), or requantize", want,
                            preset.empty() ? ": null, the model's dtype" : "")});
    }
  }
  // Scales in the weight's dtype: the schemes whose value check reads float scales (FP8, W4A16).
  auto float_scales = [&](const Module& m) {
    const ValueCheck vc = scheme_traits(s.layout(m).qs).value_check;
    return vc == ValueCheck::FP8_PAYLOAD || vc == ValueCheck::FLOAT_SCALES;
  };
  if (std::none_of(s.modules.begin(), s.modules.end(),
                   [&](const auto& kv) { return kv.second.quantized() && float_scales(kv.second); }))
    return;
  std::optional<DType> model;
  for (const TensorRef& t : q.tensors()) {
    const TensorClass c = classify(t.name, t.info->shape, info);
    if (c.role == Role::EMBEDDING && c.text_stack && is_source_dtype(t.info->dtype)) {
      model = t.info->dtype;
      break;
    }
  }
  if (!model) return;  // no text embedding to tell the model's dtype: not checked
  std::vector<std::string> off;
  for (const auto& [name, m] : s.modules)
    if (m.quantized() && float_scales(m) && m.scale && is_source_dtype(m.scale->info->dtype) &&
        m.scale->info->dtype != *model &&
        // FP8: vLLM builds the scale parameters in float32 (fp8_utils.py create_fp8_scale_parameter; code index,
        // release inferred), so an F32 scale (an FP8 source passed through) loads as it is, nothing rounded.
        !(m.scale->info->dtype == DType::F32 && scheme_traits(s.layout(m).qs).value_check == ValueCheck::FP8_PAYLOAD))
      off.push_back(m.scale->name);
  // R4-B10: compressed-tensors writes each module's scale in its own weight's dtype (initialize_qparams: scale_dtype =
  // observed_dtype), so a scale in another dtype than the model's is right for a weight that was that dtype in the
  // source (one F16 or F32 Linear among BF16 ones) and wrong after a re-save; without the source that cannot be told:
  // a warning. With --against the against room checks each scale against its source weight's dtype (an error).
  if (off.empty() || s.source_given) return;
  const TensorRef* first = q.find(off.front());
  sink.add({"scale-dtype-mismatch", Severity::WARNING, "scales",
            fmt::format("{} weight_scale tensor(s) are {} in a {} model (e.g. '{}'): compressed-tensors writes a "
                        "module's scale in its own weight's dtype, so this is right only if those weights were {} in "
                        "the source (a mixed-dtype model); not checked without it",
                        off.size(), dtype_name(first->info->dtype), dtype_name(*model), off.front(),
                        dtype_name(first->info->dtype)),
            off, "", std::string(dtype_name(*model)), std::string(dtype_name(first->info->dtype)),
            "verify --against the unquantized source checks each scale against its weight's dtype; a re-save or an "
            "edit that changed the scales' dtype is an error there"});
}

}  // namespace

void run_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts, Structure& s, Sink& sink,
                   VerifyStats& st) {
  st.tensors = q.tensors().size();
  if (foreign_format(q, sink, opts.foreign_is_warning)) return;
  if (fp8_release(q, info, sink, opts.scan_values)) return;
  check_quant_config(q, s, sink, st);
  collect_modules(q, info, s, sink, st, s.qc && s.qc->kv_cache_scheme);
  check_scale_dtype(q, info, s, sink);
  check_policy(info, s, sink);
  check_coverage(q, info, s, sink);
  check_fused_sets(q, info, s, sink, st);
  check_targets(s, sink);  // after check_fused_sets: the fused layers vLLM looks up are s.sets
  check_n_rule(s, sink);
  check_vllm_names(info, s, sink);
  if (opts.scan_values) check_values(q, s, sink, st);
  check_geometry(q, info, s, sink);
  // Parameter counts.
  std::uint64_t quant_tensors = 0;
  std::set<const TensorRef*> members;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    st.quantized_params += m.n * m.k;
    for (const TensorRef* t : m.members()) members.insert(t);
  }
  quant_tensors = members.size();
  std::uint64_t other = 0;
  for (const TensorRef& t : q.tensors())
    if (!members.count(&t)) other += t.info->numel();
  st.total_params = st.quantized_params + other;
  st.kept_tensors = st.tensors - quant_tensors;
  // The quantized share of the text stack's Linear-like parameters (what a user means by "quantized").
  for (const auto& [name, m] : s.modules) {
    if (!m.cls.text_stack) continue;
    if (m.quantized()) {
      st.text_linear_params += m.n * m.k;
      st.text_quantized_params += m.n * m.k;
    } else if (s.kept_linear.count(name) && m.weight) {
      st.text_linear_params += m.weight->info->numel();
    }
  }
  for (const TensorRef& t : q.tensors()) {
    const TensorClass c = classify(t.name, t.info->shape, info);
    if (c.text_stack && t.info->shape.size() == 3 &&
        (c.role == Role::EXPERT_GATE_UP_FUSED || c.role == Role::EXPERT_DOWN_FUSED))
      st.text_linear_params += t.info->numel();
  }
  if (s.unquantized) {
    // quant-config-missing said it: an unquantized checkpoint
  } else if (st.quantized_params == 0 || (st.text_linear_params > 0 && st.text_quantized_params == 0))
    sink.add({"nothing-quantized", Severity::ERROR, "share",
              st.text_linear_params > 0
                  ? fmt::format("no Linear weight is quantized: the text stack's {} Linear parameters all stay in 16 "
                                "bits, so this checkpoint is its source with a quantization config",
                                st.text_linear_params)
                  : std::string("no Linear weight is quantized, and no text-stack Linear weight was recognised: the "
                                "layout is one fp4forge does not read, or every weight was ignored"),
              {}, "", "the text stack's Linear weights quantized", "none",
              "typical causes: a layout read without roles (see 'fp4forge inspect'), a scheme whose shape rule fits no "
              "weight, an ignore list that covers every module"});
  else if (st.text_linear_params > 0 && st.text_quantized_share() < 0.5)
    sink.add({"low-quantized-share", Severity::WARNING, "share",
              fmt::format("only {:.1f} % of the text stack's Linear parameters are quantized ({} of {}): most of "
                          "the model stays in 16 bits",
                          100.0 * st.text_quantized_share(), st.text_quantized_params, st.text_linear_params),
              {}, "", "most Linear weights quantized", fmt::format("{:.1f} %", 100.0 * st.text_quantized_share()),
              "check the ignore list; a family fp4forge does not know keeps unknown Linear weights (see quantize's "
              "KEPT UNQUANTIZED warning)"});
}

}  // namespace fp4forge::verify_internal
