// verify: the structural pass (run_structure), every check that reads the quantized checkpoint alone.
#include "verify/internal.h"

namespace fp4forge::verify_internal {
namespace {

/** The members of quantized module `m` against linear_tensors for its [N, K] (sets m.n, m.k from the
 * payload): quantized-module-incomplete with every problem; false when the module cannot be used. */
bool check_members(const Layout& L, Module& m, const std::string& name, const std::string& fam,
                   const std::string& expected_layout, FindingSink& sink) {
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
    sink.add(finding_kind("quantized-module-incomplete"),
             {.group = fam,
              .message = fmt::format("quantized module '{}': {}", name, fmt::join(problems, "; ")),
              .tensors = ts,
              .expected = expected_layout,
              .actual = fmt::format("{}", fmt::join(problems, "; ")),
              .hint = "vLLM fails with KeyError or a size mismatch at load (F20); " + std::string(kHintRequant)});
  }
  return ok;
}

/** The payload of module `m` under layout `L`: weight_packed (4-bit schemes), or an F8_E4M3 `weight` (FP8). */
const TensorRef* payload_under(const Layout& L, const Module& m) {
  const TensorRef* p = m.param(L.payload);
  return p && (L.payload != "weight" || p->info->dtype == DType::F8_E4M3) ? p : nullptr;
}

/** Scale tensors of module `m`, which has no payload under its group's layout: orphan-scale. */
void report_orphans(const Structure& s, const Module& m, FindingSink& sink) {
  const std::string& name = m.name;
  const std::string fam = family_of(name);
  const Layout& L = s.layout(m);
  const bool nvfp4 = scheme_traits(L.qs).global_scale;
  std::vector<std::string> orphans;
  for (const TensorRef* t : m.members()) orphans.push_back(t->name);
  if (orphans.empty()) return;
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
  sink.add(
      finding_kind("orphan-scale"),
      {.group = fam,
       .message = fmt::format("module '{}' has {} without {}", name, fmt::join(orphans, ", "), what),
       .tensors = orphans,
       .expected = fmt::format("{}, or none", fmt::join(L.suffixes, " + ")),
       .actual = fmt::format("{}", fmt::join(orphans, ", ")),
       .hint = nvfp4 ? "leaked buffers or a different scheme (FP8 uses weight + weight_scale); vLLM fails with "
                       "KeyError or loads garbage (F20)"
                     : fmt::format("leaked buffers or a different scheme than {}; vLLM fails with KeyError or "
                                   "loads garbage (F20)",
                                   L.word)});
}

void collect_modules(const Checkpoint& q, const ModelInfo& info, Structure& s, FindingSink& sink, VerifyStats& st,
                     bool kv_cache_scheme) {
  for (const TensorRef& t : q.tensors()) {
    auto [mod, param] = split_name(t.name);
    const LeafTraits* leaf = leaf_traits(param);
    if (leaf && leaf->verify_member) {
      Module& m = s.modules[mod];
      m.name = mod;
      m.params[param] = &t;
    } else if (leaf && leaf->attention_scale && !kv_cache_scheme) {
      sink.add(
          finding_kind("orphan-scale"),
          {.severity = Severity::WARNING,
           .group = family_of(t.name),
           .message = fmt::format("'{}' is a KV-cache scale but quantization_config has no kv_cache_scheme", t.name),
           .tensors = {t.name},
           .key = "quantization_config.kv_cache_scheme",
           .expected = "a kv_cache_scheme",
           .actual = "(none)",
           .hint = "a leaked calibration buffer; remove it or declare the KV-cache scheme"});
    }
  }
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
      report_orphans(s, m, sink);
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
        sink.add(
            finding_kind("weight-shape-mismatch"),
            {.group = fam,
             .message = fmt::format("'{}' is [{}, {}], but {} {} holds a [{}, {}] weight", m.shape->name, dims[0],
                                    dims[1], m.payload->name, format_shape(ps), m.n, m.k),
             .tensors = {m.shape->name, m.payload->name},
             .expected = fmt::format("[{}, {}]", m.n, m.k),
             .actual = fmt::format("[{}, {}]", dims[0], dims[1]),
             .hint = "vLLM unpacks weight_packed to weight_shape: a size mismatch at load, or a scrambled weight; " +
                     std::string(kHintRequant)});
      }
    }
    const ShapeRule rule = shape_rule(L.qs);
    if (ok && m.k % rule.k_multiple != 0) {
      if (nvfp4) {
        sink.add(
            finding_kind("k-not-multiple-16"),
            {.group = fam,
             .message = fmt::format("quantized module '{}' has K = {} (in_features), not a multiple of 16", name, m.k),
             .tensors = {m.payload->name},
             .expected = "K % 16 == 0",
             .actual = fmt::format("K = {}", m.k),
             .hint = "NVFP4 groups are 16 columns; such a weight must stay unquantized and be listed in ignore"});
      } else {
        sink.add(finding_kind("k-not-multiple"),
                 {.group = fam,
                  .message = fmt::format(
                      "quantized module '{}' has K = {} (in_features), not a multiple of {} as {} needs ({})", name,
                      m.k, rule.k_multiple, L.word, rule.why),
                  .tensors = {m.payload->name},
                  .expected = fmt::format("K % {} == 0", rule.k_multiple),
                  .actual = fmt::format("K = {}", m.k),
                  .hint = "such a weight must stay unquantized and be listed in ignore (fp4forge quantize keeps it)"});
      }
      ok = false;
    }
    m.valid = ok;
    if (m.weight) {
      sink.add(finding_kind("leftover-weight"),
               {.group = fam,
                .message = fmt::format("quantized module '{}' still has a plain 'weight' beside {}", name, L.payload),
                .tensors = {m.weight->name},
                .expected = "no 'weight' tensor",
                .actual = fmt::format("{} {}", dtype_name(m.weight->info->dtype), format_shape(m.weight->info->shape)),
                .hint = "the quantizer must drop the source weight; vLLM rejects the unexpected tensor"});
    }
    if (m.input_gs && L.weight_only && s.scheme != Scheme::NVFP4) {
      sink.add(
          finding_kind("input-global-scale-in-a16"),
          {.group = fam,
           .message = fmt::format("module '{}' has input_global_scale, but {} is weight-only", name,
                                  quant_scheme_preset(L.qs)),
           .tensors = {m.input_gs->name},
           .expected = "no input_global_scale (input_activations null)",
           .actual = "input_global_scale present",
           .hint =
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
void check_n_rule(const Structure& s, FindingSink& sink) {
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
    sink.add(finding_kind("n-not-multiple"),
             {.severity = certain ? Severity::ERROR : Severity::WARNING,
              .group = family_of(name),
              .message = fmt::format(
                  "quantized module '{}' has N = {} (out_features), not a multiple of {} ({}){}", name, m.n,
                  rule.n_multiple, rule.why,
                  certain ? fmt::format(": vLLM refuses {} whose parts are not whole blocks",
                                        expert_gate_up ? "FusedMoE gate/up weights" : "a merged layer")
                          : std::string(": vLLM serves it only while tensor parallelism does not split it")),
              .tensors = {m.payload->name},
              .expected = fmt::format("N % {} == 0", rule.n_multiple),
              .actual = fmt::format("N = {}", m.n),
              .hint = "fp4forge quantize keeps such weights unquantized and lists them in ignore"});
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

void check_policy(const ModelInfo& info, const Structure& s, FindingSink& sink) {
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const Layout& L = s.layout(m);
    const bool nvfp4 = scheme_traits(L.qs).global_scale;
    const Role r = m.cls.role;
    const std::string fam = family_of(name);
    if (r == Role::ROUTER || m.cls.base_role == Role::ROUTER) {
      sink.add(finding_kind("router-quantized"),
               {.group = fam,
                .message = fmt::format(
                    "router/gate '{}' is quantized: its logits become NaN behind green startup checks (F1)", name),
                .tensors = {m.payload->name},
                .expected = "router kept in bf16 and listed in ignore",
                .actual = L.word,
                .hint = "vLLM builds routers with quant_config=None; re-quantize with routers kept (fp4forge never "
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
    sink.add(
        finding_kind("protected-quantized"),
        {.severity = unsure ? Severity::WARNING : Severity::ERROR,
         .group = fam,
         .message =
             unsure ? fmt::format("'{}' ({}) is quantized as {}; the family is not in fp4forge's registry, so whether "
                                  "its linear attention may be quantized at 8 bits could not be checked",
                                  name, role_name(r), L.word)
                    : fmt::format("'{}' ({}) is quantized, but {} tensors must stay unquantized{}", name, role_name(r),
                                  role_name(r), nvfp4 ? std::string() : fmt::format(" under {}", L.word)),
         .tensors = {m.payload->name},
         .expected = why.empty() ? "unquantized (architectures.md §5.3)" : why,
         .actual = L.word,
         .hint =
             std::string("norms, embeddings, lm_head, towers, projectors, linear attention, conv1d and MTP break or "
                         "degrade when quantized to 4 bits (F6, F7)") +
             (nvfp4 ? ""
                    : "; at 8 bits only a registered family's GatedDeltaNet projections may be quantized "
                      "(docs/schemes.md)")});
  }
}

void check_coverage(const Checkpoint& q, const ModelInfo& info, const Structure& s, FindingSink& sink) {
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
    sink.add(finding_kind("ignore-missing"),
             {.group = family_of(name),
              .message =
                  fmt::format("'{}' is an unquantized 2-D weight {} but no ignore entry matches it: vLLM treats it as "
                              "{} and expects {}",
                              name, format_shape(m.weight->info->shape), as_target(s.group_of(name).layout),
                              payload_text(s.group_of(name).layout)),
              .tensors = {m.weight->name},
              .key = "quantization_config.ignore",
              .expected = "an ignore entry for the module",
              .actual = "(not matched)",
              .hint = "list every unquantized Linear-like module in ignore, routers included (F3, F7, F22)"});
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
    sink.add(
        finding_kind("ignore-missing"),
        {.group = family_of(blk) + " (fused 3-D)",
         .message = fmt::format("fused 3-D experts '{}' are unquantized and not ignored: vLLM's compressed-tensors MoE "
                                "path expects per-expert {} (F4)",
                                blk, payload_text(s.group_of(blk + ".0.gate_proj").layout)),
         .tensors = block_tensors[blk],
         .key = "quantization_config.ignore",
         .expected = "experts split per expert and quantized (R3), or the block ignored",
         .actual = "(fused, unquantized)",
         .hint = "re-quantize with fp4forge, which splits fused experts per expert"});
  }
  // Quantized modules that ignore matches.
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const long i = ig.first_match(name);
    if (i < 0) continue;
    sink.add(
        finding_kind("quantized-but-ignored"),
        {.group = family_of(name),
         .message = fmt::format("'{}' is quantized but ignore entry \"{}\" matches it: vLLM builds it unquantized and "
                                "cannot load {}",
                                name, ig.entry(static_cast<std::size_t>(i)), payload_text(s.layout(m))),
         .tensors = {m.payload->name},
         .key = "quantization_config.ignore",
         .expected = "no ignore entry for a quantized module",
         .actual = ig.entry(static_cast<std::size_t>(i)),
         .hint = "remove the entry or keep the module unquantized"});
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
    sink.add(
        finding_kind("ignore-unmatched"),
        {.group = fmt::format("ignore[{}]", i),
         .message = fmt::format("ignore[{}] \"{}\" matches no module on disk{}", i, ig.entry(i),
                                ig.is_regex(i) ? " (evaluated with re.match semantics, anchored at the start)" : ""),
         .key = fmt::format("quantization_config.ignore[{}]", i),
         .expected = "at least one module",
         .actual = "none",
         .hint = "a stale or mistyped entry: the modules it was meant to keep may be quantized or renamed (F22, F23)"});
  }
}

void check_fused_sets(const Checkpoint& q, const ModelInfo& info, Structure& s, FindingSink& sink, VerifyStats& st) {
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
      sink.add(finding_kind("fused-set-partial"),
               {.group = fam,
                .message = fmt::format("fused set {} of '{}' is partly quantized: quantized [{}], kept [{}]", set.kind,
                                       set.parent, fmt::join(quant, ", "), fmt::join(kept, ", ")),
                .tensors = set.members,
                .expected = "all members quantized or all kept",
                .actual = "mixed",
                .hint = "vLLM refuses: \"Detected some but not all shards of ... are quantized\" (F9)"});
      continue;
    }
    if (s.qc && s.ignore) {
      auto r = vllm_should_ignore(*s.ignore, set.members);
      if (!r.ok()) {
        sink.add(finding_kind("fused-set-partial"),
                 {.group = fam,
                  .message = fmt::format("fused set {} of '{}': {}", set.kind, set.parent, r.error().message),
                  .tensors = set.members,
                  .key = "quantization_config.ignore",
                  .expected = "ignore matches all members or none",
                  .actual = "some members"});
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
    // A value at or below zero has no ratio to speak of (issue 55 tryout H: "ratio 0" for -1).
    const std::string ratio_text = lo > 0 && std::isfinite(hi) ? fmt::format("ratio {:.9g}", ratio)
                                                               : std::string("one of them not a positive number");
    sink.add(finding_kind("fused-scale-mismatch"),
             {.group = fam,
              .message = fmt::format("fused set {} of '{}' has different weight_global_scale values ({}; {}): vLLM "
                                     "keeps one scale per fused layer and mis-scales the others",
                                     set.kind, set.parent, fmt::join(vals, ", "), ratio_text),
              .tensors = ts,
              .expected = "bit-identical weight_global_scale across the set (R1)",
              .actual = fmt::format("{}", fmt::join(vals, ", ")),
              // Nine digits: a damaged low byte reads "ratio 1" at four (issue 55 tryout G).
              .hint = "a quantizer that computed a gs per member (F11, F12, F14: compute one over the whole set), or a "
                      "damaged byte of one of them; " +
                      std::string(kHintRequant)});
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
    sink.add(finding_kind("experts-mixed"),
             {.group = family_of(blk),
              .message =
                  fmt::format("'{}' mixes quantized ({}) and unquantized ({}) expert weights", blk, c.first, c.second),
              .tensors = {blk},
              .expected = "every expert weight of a layer in one scheme",
              .actual = "mixed",
              .hint = "vLLM's FusedMoE loads one scheme per layer (F10)"});
  }
}

void check_geometry(const Checkpoint& q, const ModelInfo& info, Structure& s, FindingSink& sink) {
  const Json& text = text_config(q.config());
  // Layer count of the text stack.
  std::set<int> layers;
  int max_layer = -1;
  std::vector<NamedShape> named;
  bool lm_head = false;
  for (const TensorRef& t : q.tensors()) {
    named.push_back({t.name, t.info->shape});
    const TensorClass c = classify(t.name, t.info->shape, info);
    lm_head = lm_head || c.role == Role::LM_HEAD;
    if (c.text_stack && c.layer >= 0) {
      layers.insert(c.layer);
      max_layer = std::max(max_layer, c.layer);
    }
    if ((c.role == Role::EXPERT_GATE_UP_FUSED || c.role == Role::EXPERT_DOWN_FUSED) && t.info->shape.size() == 3 &&
        info.num_experts > 0 && t.info->shape[0] != static_cast<std::uint64_t>(info.num_experts)) {
      sink.add(finding_kind("geometry-mismatch"),
               {.group = family_of(t.name),
                .message = fmt::format("'{}' has {} experts (dim 0 of {}), config says num_experts = {}", t.name,
                                       t.info->shape[0], format_shape(t.info->shape), info.num_experts),
                .tensors = {t.name},
                .key = "config.json num_experts",
                .expected = fmt::format("{}", info.num_experts),
                .actual = fmt::format("{}", t.info->shape[0]),
                .hint = "config and tensors disagree"});
    }
  }
  // An untied head the index does not reach: vLLM loads a random head or fails (issue 55 tryout H: verify was OK).
  if (!info.tie_word_embeddings && !lm_head && !layers.empty()) {
    s.shape_flagged.insert("lm_head");
    sink.add(finding_kind("geometry-mismatch"),
             {.group = "lm_head",
              .message = "tie_word_embeddings is false but no lm_head tensor is in the checkpoint (loaders leave the "
                         "head random or fail on a missing weight)",
              .tensors = {"lm_head.weight"},
              .key = "config.json tie_word_embeddings",
              .expected = "lm_head.weight (or its quantized module)",
              .actual = "absent",
              .hint = "a shard or an index entry was lost: restore the folder from a good copy or quantize again "
                      "(a tied model sets tie_word_embeddings: true)"});
  }
  const std::int64_t stack_n = info.indexed_layers();  // LongCat-Flash: num_layers (sublayers counted twice)
  if (stack_n > 0 && !layers.empty()) {
    std::vector<int> missing;
    for (int i = 0; i < stack_n && missing.size() < 20; ++i)
      if (!layers.count(i)) missing.push_back(i);
    if (max_layer >= stack_n || !missing.empty()) {
      sink.add(finding_kind("geometry-mismatch"),
               {.group = "layers",
                .message = fmt::format(
                    "text stack has layer indices up to {} ({} distinct){}, config {} = {}", max_layer, layers.size(),
                    missing.empty() ? std::string() : fmt::format(", missing [{}]", fmt::join(missing, ", ")),
                    info.stack_layers > 0 ? "num_layers" : "num_hidden_layers", stack_n),
                .key = "num_hidden_layers",
                .expected = fmt::format("layers 0..{}", stack_n - 1),
                .actual = fmt::format("{} layers, max index {}", layers.size(), max_layer),
                .hint = "tensors were dropped or the config belongs to another model"});
    }
  }
  for (ExpertBlock b : find_expert_blocks(named, info)) {
    if (b.storage != ExpertStorage::PER_EXPERT) continue;
    const std::int64_t E = info.num_experts;
    if (const std::vector<int> zero = drop_zero_experts(b, info); !zero.empty()) {
      sink.add(finding_kind("zero-experts-stored"),
               {.group = family_of(b.key),
                .message = fmt::format(
                    "expert block '{}': zero-computation experts [{}] (zero_expert_num = {}) carry tensors; "
                    "they compute the identity, so these tensors are not weights vLLM reads (inferred "
                    "from LongCat-Flash's design) and their quantization is not judged here",
                    b.key, fmt::join(zero, ", "), info.zero_experts),
                .tensors = {b.key},
                .hint = "left as the writer stored them"});
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
    sink.add(finding_kind("geometry-mismatch"),
             {.group = family_of(b.key),
              .message = fmt::format("expert block '{}': {}", b.key, fmt::join(issues, "; ")),
              .tensors = {b.key},
              .key = "num_experts",
              .expected = fmt::format("experts 0..{} each with gate, up and down", E - 1),
              .actual = fmt::format("{}", fmt::join(issues, "; ")),
              .hint = "vLLM's FusedMoE loader needs every expert (F5)"});
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
    s.shape_flagged.insert(name);
    // Without a registry row the expected shape is a guess from generic keys: a warning, never an error.
    sink.add(finding_kind("geometry-mismatch"),
             {.severity = info.family == Family::UNKNOWN ? Severity::WARNING : Severity::ERROR,
              .group = family_of(name) + " shape",
              .message = fmt::format("'{}' ({}{}) is [{}, {}], config implies [{}, {}]", name, role_name(c.base_role),
                                     c.layer_type.empty() ? std::string() : ", " + c.layer_type, rows, cols,
                                     want->first, want->second),
              .tensors = {m.quantized() ? m.payload->name : m.weight->name},
              .key = "config.json text geometry",
              .expected = fmt::format("[{}, {}]", want->first, want->second),
              .actual = fmt::format("[{}, {}]", rows, cols),
              .hint = "config and tensors disagree (architectures.md §3.1); vLLM fails with a size mismatch"});
  }
  if (!unchecked.empty())
    sink.add(finding_kind("geometry-unchecked"),
             {.group = "shape",
              .message =
                  info.family == Family::UNKNOWN
                      ? fmt::format("the family is not in fp4forge's registry: the shapes of {} module(s) (e.g. '{}') "
                                    "were not checked against config.json, whose widths its class may transform",
                                    unchecked.size(), unchecked.front())
                      : fmt::format("{} module(s) sit in sublayers whose geometry config.json does not state (e.g. "
                                    "'{}'); their shapes were not checked against the config",
                                    unchecked.size(), unchecked.front()),
              .key = "config.json text geometry",
              .expected = "a shape the config states",
              .actual = "a sublayer with its own geometry",
              .hint = "the shapes are the writer's; their payloads and scales were still checked"});
}

/** Every quantized module must be one vLLM maps to a parameter of this architecture: per-expert names use
 * the family's expert leaves, and families whose experts vLLM cannot load quantized have none. */
void check_vllm_names(const ModelInfo& info, const Structure& s, FindingSink& sink) {
  const FamilySpec& spec = info.spec();
  if (info.family == Family::UNKNOWN) return;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized() || m.cls.expert < 0) continue;
    const Role r = m.cls.role == Role::MTP ? m.cls.base_role : m.cls.role;
    if (r != Role::EXPERT_GATE && r != Role::EXPERT_UP && r != Role::EXPERT_DOWN) continue;
    const std::string leaf = split_name(name).second;
    if (!spec.experts_refusal.empty()) {
      sink.add(finding_kind("vllm-unmapped"),
               {.group = family_of(name),
                .message = fmt::format("'{}' is a quantized routed expert, but {}", name, spec.experts_refusal),
                .tensors = {m.payload->name},
                .expected = "unquantized experts",
                .actual = s.layout(m).word + " experts",
                .hint = "keep the experts unquantized (--ignore 're:.*experts')"});
      continue;
    }
    const std::size_t want = r == Role::EXPERT_GATE ? 0 : r == Role::EXPERT_UP ? 1 : 2;
    if (leaf == spec.expert_leaves[want]) continue;
    sink.add(
        finding_kind("vllm-unmapped"),
        {.group = family_of(name),
         .message = fmt::format("quantized expert '{}' is named '{}', but vLLM's {} expert mapping takes '{}' for this "
                                "projection: the weights would not load",
                                name, leaf, spec.display, spec.expert_leaves[want]),
         .tensors = {m.payload->name},
         .expected = std::string(spec.expert_leaves[want]),
         .actual = leaf,
         .hint = "re-quantize with fp4forge, which names experts as the family's vLLM loader expects"});
  }
}

/** Issue 27 #11, R4-B10: schemes whose scales are stored in the weight's dtype (FP8, W4A16): compressed-tensors writes
 * each in its own weight's dtype, usually the model's (the text embedding's). An F16 scale in a bf16 model is a
 * re-save or an edit, or an F16 weight of a mixed-dtype source: a warning here, exact with --against. */
void check_scale_dtype(const Checkpoint& q, const ModelInfo& info, const Structure& s, FindingSink& sink) {
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
      sink.add(finding_kind("scale-dtype-mismatch"),
               {.group = "quantization_config",
                .message = fmt::format(
                    "config group '{}' says weights.scale_dtype '{}' but the weight scales are stored as {} "
                    "(e.g. '{}'): compressed-tensors builds the scale parameters in the stated dtype and "
                    "casts every stored scale into it",
                    g.name, said, want, example),
                .expected = want,
                .actual = said,
                .hint = fmt::format("restore \"scale_dtype\": \"{}\" (what the preset writes{}), or requantize", want,
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
  sink.add(
      finding_kind("scale-dtype-mismatch"),
      {.severity = Severity::WARNING,
       .group = "scales",
       .message = fmt::format(
           "{} weight_scale tensor(s) are {} in a {} model (e.g. '{}'): compressed-tensors writes a "
           "module's scale in its own weight's dtype, so this is right only if those weights were {} in "
           "the source (a mixed-dtype model); not checked without it",
           off.size(), dtype_name(first->info->dtype), dtype_name(*model), off.front(), dtype_name(first->info->dtype)),
       .tensors = off,
       .expected = std::string(dtype_name(*model)),
       .actual = std::string(dtype_name(first->info->dtype)),
       .hint = "verify --against the unquantized source checks each scale against its weight's dtype; a re-save or an "
               "edit that changed the scales' dtype is an error there"});
}

}  // namespace

void run_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts, Structure& s,
                   FindingSink& sink, VerifyStats& st) {
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
  if (opts.config_shapes) check_config_rules(q, s, sink);
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
    sink.add(
        finding_kind("nothing-quantized"),
        {.group = "share",
         .message =
             st.text_linear_params > 0
                 ? fmt::format("no Linear weight is quantized: the text stack's {} Linear parameters all stay in 16 "
                               "bits, so this checkpoint is its source with a quantization config",
                               st.text_linear_params)
                 : std::string("no Linear weight is quantized, and no text-stack Linear weight was recognised: the "
                               "layout is one fp4forge does not read, or every weight was ignored"),
         .expected = "the text stack's Linear weights quantized",
         .actual = "none",
         .hint =
             "typical causes: a layout read without roles (see 'fp4forge inspect'), a scheme whose shape rule fits no "
             "weight, an ignore list that covers every module"});
  else if (st.text_linear_params > 0 && st.text_quantized_share() < kLowQuantizedShare)
    sink.add(
        finding_kind("low-quantized-share"),
        {.group = "share",
         .message = fmt::format("only {:.1f} % of the text stack's Linear parameters are quantized ({} of {}): most of "
                                "the model stays in 16 bits",
                                100.0 * st.text_quantized_share(), st.text_quantized_params, st.text_linear_params),
         .expected = "most Linear weights quantized",
         .actual = fmt::format("{:.1f} %", 100.0 * st.text_quantized_share()),
         .hint = "the config's ignore list keeps them (an --ignore or recipe that keeps the experts or other large "
                 "modules: --allow low-quantized-share when that is meant), or a family fp4forge does not know keeps "
                 "unknown Linear weights (see quantize's KEPT UNQUANTIZED warning)"});
}

}  // namespace fp4forge::verify_internal
