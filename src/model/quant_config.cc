#include "fp4forge/model/quant_config.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/util/strings.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

std::string type_of(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return j.get<bool>() ? "boolean true" : "boolean false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return fmt::format("integer {}", j.dump());
    case Json::value_t::number_float: return fmt::format("number {}", j.dump());
    case Json::value_t::string: {
      std::string s = j.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 40) + "...";
      return fmt::format("string \"{}\"", s);
    }
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "value";
  }
}

Error type_error(std::string_view path, std::string_view expected, const Json& got) {
  return make_error(Errc::BAD_INPUT,
                    "config.json {}: expected {}, got {}; fix the quantization_config (compressed-tensors "
                    "QuantizationConfig schema)",
                    path, expected, type_of(got));
}

std::string join_path(std::string_view base, std::string_view key) {
  return fmt::format("{}.{}", base, key);
}

/** Optional string (absent or null -> ""). */
Result<std::string> opt_string(const Json& obj, std::string_view key, std::string_view path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return type_error(join_path(path, key), "a string or null", *it);
  return it->get<std::string>();
}

Result<std::optional<std::int64_t>> opt_int(const Json& obj, std::string_view key, std::string_view path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::int64_t>();
  if (it->is_number_integer()) return std::optional<std::int64_t>(it->get<std::int64_t>());
  return type_error(join_path(path, key), "an integer or null", *it);
}

Result<std::optional<bool>> opt_bool(const Json& obj, std::string_view key, std::string_view path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<bool>();
  if (it->is_boolean()) return std::optional<bool>(it->get<bool>());
  return type_error(join_path(path, key), "a boolean or null", *it);
}

Result<QuantArgs> parse_args(const Json& j, const std::string& path) {
  if (!j.is_object()) return type_error(path, "an object or null", j);
  QuantArgs a;
  FP4FORGE_ASSIGN_OR_RETURN(a.num_bits, opt_int(j, "num_bits", path));
  FP4FORGE_ASSIGN_OR_RETURN(a.type, opt_string(j, "type", path));
  FP4FORGE_ASSIGN_OR_RETURN(a.strategy, opt_string(j, "strategy", path));
  FP4FORGE_ASSIGN_OR_RETURN(a.group_size, opt_int(j, "group_size", path));
  FP4FORGE_ASSIGN_OR_RETURN(a.symmetric, opt_bool(j, "symmetric", path));
  FP4FORGE_ASSIGN_OR_RETURN(a.observer, opt_string(j, "observer", path));
  if (auto it = j.find("observer_kwargs"); it != j.end() && it->is_object() && !it->empty()) a.observer_kwargs = true;
  FP4FORGE_ASSIGN_OR_RETURN(a.scale_dtype, opt_string(j, "scale_dtype", path));
  if (auto it = j.find("dynamic"); it != j.end() && !it->is_null()) {
    if (it->is_boolean()) {
      a.dynamic = it->get<bool>() ? "true" : "false";
    } else if (it->is_string()) {
      a.dynamic = it->get<std::string>();
    } else {
      return type_error(join_path(path, "dynamic"), "a boolean, \"local\" or null", *it);
    }
  }
  if (auto it = j.find("block_structure"); it != j.end() && !it->is_null()) {
    const std::string p = join_path(path, "block_structure");
    if (it->is_array()) {
      for (std::size_t i = 0; i < it->size(); ++i) {
        const Json& v = (*it)[i];
        if (!v.is_number_integer()) return type_error(fmt::format("{}[{}]", p, i), "an integer", v);
        a.block_structure.push_back(v.get<std::int64_t>());
      }
    } else if (it->is_string()) {  // legacy "128x128"
      const std::string s = it->get<std::string>();
      const auto x = s.find('x');
      try {
        if (x == std::string::npos) throw std::invalid_argument(s);
        a.block_structure = {std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1))};
      } catch (const std::exception&) {
        return type_error(p, "a list of integers or \"RxC\"", *it);
      }
    } else {
      return type_error(p, "a list of integers or null", *it);
    }
  }
  return a;
}

Result<std::optional<QuantArgs>> opt_args(const Json& obj, std::string_view key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<QuantArgs>();
  FP4FORGE_ASSIGN_OR_RETURN(QuantArgs a, parse_args(*it, join_path(path, key)));
  return std::optional<QuantArgs>(std::move(a));
}

bool is_4bit_float_tensor_group16(const QuantArgs& a) {
  return a.num_bits == 4 && a.type == "float" && a.strategy == "tensor_group" && a.group_size == 16 &&
         a.symmetric == true;
}

std::string describe_args(const QuantArgs& a) {
  return fmt::format("{} {}-bit {}{}{}", a.type.empty() ? "?" : a.type,
                     a.num_bits ? fmt::format("{}", *a.num_bits) : std::string("?"),
                     a.strategy.empty() ? "?" : a.strategy,
                     a.group_size ? fmt::format(" group {}", *a.group_size) : std::string(),
                     a.symmetric == false ? " asymmetric" : "");
}

}  // namespace

std::string_view scheme_name(Scheme s) noexcept {
  switch (s) {
    case Scheme::NVFP4A16: return "NVFP4A16";
    case Scheme::NVFP4: return "NVFP4";
    case Scheme::MXFP4A16: return "MXFP4A16";
    case Scheme::MXFP4: return "MXFP4";
    case Scheme::FP8_W8A8: return "FP8";
    case Scheme::FP8_W8A16: return "FP8A16";
    case Scheme::WNA16_INT: return "WNA16";
    case Scheme::W8A8_INT: return "W8A8-INT8";
    case Scheme::UNKNOWN: return "unknown";
  }
  return "unknown";
}

SchemeInfo detect_scheme(const ConfigGroup& g, std::string_view global_format) {
  const std::string_view fmt_ = g.format.empty() ? global_format : std::string_view(g.format);
  if (!g.weights) return {Scheme::UNKNOWN, "the group has no weights quantization"};
  const QuantArgs& w = *g.weights;
  const QuantArgs* in = g.input_activations ? &*g.input_activations : nullptr;
  const std::string wd = describe_args(w);
  if (fmt_ == "mxfp4-pack-quantized" ||
      (w.num_bits == 4 && w.type == "float" && w.strategy == "group" && w.group_size == 32)) {
    if (!in) return {Scheme::MXFP4A16, wd};
    if (in->num_bits == 4 && in->type == "float") return {Scheme::MXFP4, wd};
  }
  if (is_4bit_float_tensor_group16(w)) {
    if (!in) return {Scheme::NVFP4A16, wd};
    if (is_4bit_float_tensor_group16(*in)) return {Scheme::NVFP4, wd + " (activations too)"};
    return {Scheme::UNKNOWN, fmt::format("NVFP4 weights with unsupported activations {}", describe_args(*in))};
  }
  if (w.num_bits == 8 && w.type == "float") {
    if (!in) return {Scheme::FP8_W8A16, wd};
    if (in->num_bits == 8 && in->type == "float") return {Scheme::FP8_W8A8, wd};
  }
  if (w.type == "int" && (w.num_bits == 4 || w.num_bits == 8)) {
    if (!in && (w.strategy == "group" || w.strategy == "channel")) return {Scheme::WNA16_INT, wd};
    if (in && in->num_bits == 8 && in->type == "int") return {Scheme::W8A8_INT, wd};
  }
  return {Scheme::UNKNOWN,
          fmt::format("weights {}{}", wd, in ? ", activations " + describe_args(*in) : std::string())};
}

std::vector<std::string> nvfp4a16_mismatches(const ConfigGroup& g, std::string_view global_format) {
  return scheme_mismatches(QuantScheme::NVFP4A16, g, global_format);
}

Result<QuantConfig> parse_quant_config(const nlohmann::ordered_json& qc, std::string_view key_path) {
  const std::string path(key_path);
  if (!qc.is_object()) return type_error(path, "an object", qc);
  QuantConfig c;
  FP4FORGE_ASSIGN_OR_RETURN(c.quant_method, opt_string(qc, "quant_method", path));
  FP4FORGE_ASSIGN_OR_RETURN(c.format, opt_string(qc, "format", path));
  FP4FORGE_ASSIGN_OR_RETURN(c.quantization_status, opt_string(qc, "quantization_status", path));
  if (auto it = qc.find("version"); it != qc.end() && !it->is_null()) {
    if (!it->is_string()) return type_error(join_path(path, "version"), "a string or null", *it);
    c.version = it->get<std::string>();
  }
  if (auto it = qc.find("config_groups"); it != qc.end() && !it->is_null()) {
    const std::string gp = join_path(path, "config_groups");
    if (!it->is_object()) return type_error(gp, "an object or null", *it);
    for (auto g = it->begin(); g != it->end(); ++g) {
      const std::string p = join_path(gp, g.key());
      if (!g.value().is_object()) return type_error(p, "an object", g.value());
      ConfigGroup cg;
      cg.name = g.key();
      const Json& gj = g.value();
      if (auto t = gj.find("targets"); t != gj.end() && !t->is_null()) {
        if (t->is_string()) {
          cg.targets.push_back(t->get<std::string>());
        } else if (t->is_array()) {
          for (std::size_t i = 0; i < t->size(); ++i) {
            if (!(*t)[i].is_string())
              return type_error(fmt::format("{}.targets[{}]", p, i), "a string", (*t)[i]);
            cg.targets.push_back((*t)[i].get<std::string>());
          }
        } else {
          return type_error(join_path(p, "targets"), "a list of strings", *t);
        }
      }
      FP4FORGE_ASSIGN_OR_RETURN(cg.weights, opt_args(gj, "weights", p));
      FP4FORGE_ASSIGN_OR_RETURN(cg.input_activations, opt_args(gj, "input_activations", p));
      FP4FORGE_ASSIGN_OR_RETURN(cg.output_activations, opt_args(gj, "output_activations", p));
      FP4FORGE_ASSIGN_OR_RETURN(cg.format, opt_string(gj, "format", p));
      c.groups.push_back(std::move(cg));
    }
  }
  if (auto it = qc.find("ignore"); it != qc.end() && !it->is_null()) {
    const std::string p = join_path(path, "ignore");
    if (!it->is_array()) return type_error(p, "a list of strings", *it);
    for (std::size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) return type_error(fmt::format("{}[{}]", p, i), "a string", (*it)[i]);
      c.ignore.push_back((*it)[i].get<std::string>());
    }
  }
  auto non_empty = [&](std::string_view key) {
    auto it = qc.find(key);
    return it != qc.end() && !it->is_null() && !(it->is_object() && it->empty());
  };
  c.kv_cache_scheme = non_empty("kv_cache_scheme");
  c.sparsity_config = non_empty("sparsity_config");
  c.transform_config = non_empty("transform_config");
  return c;
}

std::string scheme_label(const ConfigGroup& g, std::string_view global_format) {
  const SchemeInfo si = detect_scheme(g, global_format);
  switch (si.scheme) {
    case Scheme::WNA16_INT:
      if (g.weights && g.weights->num_bits) return fmt::format("W{}A16", *g.weights->num_bits);
      return "WNA16";
    case Scheme::FP8_W8A8:
      if (g.weights && g.weights->strategy == "block") return "FP8_BLOCK";
      if (g.input_activations && g.input_activations->dynamic == "true") return "FP8_DYNAMIC";
      return "FP8";
    default:
      return std::string(scheme_name(si.scheme));
  }
}

namespace {

/** One CT QuantizationArgs as model_dump writes it, keys sorted. */
nlohmann::ordered_json ct_args(int bits, std::string_view type, std::string_view strategy, std::optional<int> group,
                               bool dynamic, std::string_view observer, std::string_view scale_dtype, bool block128) {
  using ojson = nlohmann::ordered_json;
  ojson a = ojson::object();
  a["actorder"] = nullptr;
  a["block_structure"] = block128 ? ojson::array({128, 128}) : ojson(nullptr);
  a["dynamic"] = dynamic;
  a["group_size"] = group ? ojson(*group) : ojson(nullptr);
  a["num_bits"] = bits;
  a["observer"] = observer.empty() ? ojson(nullptr) : ojson(std::string(observer));
  a["observer_kwargs"] = ojson::object();
  a["scale_dtype"] = scale_dtype.empty() ? ojson(nullptr) : ojson(std::string(scale_dtype));
  a["strategy"] = std::string(strategy);
  a["symmetric"] = true;
  a["type"] = std::string(type);
  a["zp_dtype"] = nullptr;
  return a;
}

}  // namespace

nlohmann::ordered_json ct_quant_config(std::span<const CtGroupSpec> groups, const std::vector<std::string>& ignore) {
  using ojson = nlohmann::ordered_json;
  auto args = [](const SchemeTraits::CtArgs& c, std::string_view observer_name) {
    return ct_args(c.num_bits, c.type, c.strategy, c.group_size ? std::optional<int>(c.group_size) : std::nullopt,
                   c.dynamic, observer_name, c.scale_dtype, c.block128);
  };
  // json.dump(sort_keys=True): the groups in name order; the top-level format is the one every group shares,
  // else "mixed-precision" (compressed-tensors QuantizationConfig.merge / update_config).
  std::vector<const CtGroupSpec*> order;
  for (const CtGroupSpec& g : groups) order.push_back(&g);
  std::sort(order.begin(), order.end(), [](const CtGroupSpec* a, const CtGroupSpec* b) { return a->name < b->name; });
  std::string format;
  ojson cg = ojson::object();
  for (const CtGroupSpec* g : order) {
    const SchemeTraits& t = scheme_traits(g->scheme);
    ojson group = ojson::object();
    const std::string f(quant_scheme_format(g->scheme));
    format = format.empty() || format == f ? f : std::string("mixed-precision");
    group["format"] = f;
    group["input_activations"] = t.input.num_bits > 0 ? args(t.input, {}) : ojson(nullptr);
    group["output_activations"] = nullptr;
    group["targets"] = ojson::array();
    for (const auto& x : g->targets) group["targets"].push_back(x);
    group["weights"] = args(t.weights, observer_config_name(g->observer));  // as llm-compressor names the observer
    cg[g->name] = std::move(group);
  }
  ojson q = ojson::object();
  q["config_groups"] = std::move(cg);
  q["format"] = format.empty() ? std::string("dense") : format;
  q["global_compression_ratio"] = nullptr;
  q["ignore"] = ojson::array();
  for (const auto& i : ignore) q["ignore"].push_back(i);
  q["kv_cache_scheme"] = nullptr;
  q["quant_method"] = "compressed-tensors";
  q["quantization_status"] = "compressed";
  q["transform_config"] = ojson::object();
  q["version"] = std::string(kCompressedTensorsVersion);
  return q;
}

nlohmann::ordered_json ct_quant_config(QuantScheme s, const std::vector<std::string>& ignore, Observer observer) {
  const CtGroupSpec one{"group_0", s, observer, {"Linear"}};
  return ct_quant_config(std::span<const CtGroupSpec>(&one, 1), ignore);
}


Result<QuantScheme> quant_scheme_of(const ConfigGroup& g, std::string_view global_format) {
  const std::string label = scheme_label(g, global_format);
  std::string presets;
  for (QuantScheme s : kQuantSchemes) {
    if (label == quant_scheme_preset(s)) return s;
    presets += (presets.empty() ? "" : ", ") + std::string(quant_scheme_preset(s));
  }
  return make_error(Errc::BAD_INPUT, "config group '{}' is {} ({}), not one of the schemes fp4forge writes ({})",
                    g.name, label, detect_scheme(g, global_format).detail, presets);
}

namespace {

std::string num_text(const std::optional<std::int64_t>& v) { return v ? fmt::format("{}", *v) : "absent"; }
std::string bool_text(const std::optional<bool>& v) { return v ? (*v ? "true" : "false") : "absent"; }
std::string dynamic_text(const std::string& d) { return d.empty() ? "false" : d; }  // CT's default: false

/** The field-by-field comparison of one QuantizationArgs with the preset's (`prefix` "weights" or
 * "input_activations"). */
void args_mismatches(const QuantArgs& a, const QuantArgs& want, std::string_view prefix, std::vector<std::string>& out) {
  if (a.num_bits != want.num_bits)
    out.push_back(fmt::format("{}.num_bits is {}, expected {}", prefix, num_text(a.num_bits), num_text(want.num_bits)));
  if (a.type != want.type) out.push_back(fmt::format("{}.type is \"{}\", expected \"{}\"", prefix, a.type, want.type));
  if (a.strategy != want.strategy)
    out.push_back(fmt::format("{}.strategy is \"{}\", expected \"{}\"", prefix, a.strategy, want.strategy));
  if (a.group_size != want.group_size)
    out.push_back(fmt::format("{}.group_size is {}, expected {}", prefix, num_text(a.group_size), num_text(want.group_size)));
  if (!want.block_structure.empty() && a.block_structure != want.block_structure)
    out.push_back(fmt::format("{}.block_structure is [{}], expected [{}]", prefix, fmt::join(a.block_structure, ", "),
                              fmt::join(want.block_structure, ", ")));
  if (a.symmetric != want.symmetric)
    out.push_back(fmt::format("{}.symmetric is {}, expected {}", prefix, bool_text(a.symmetric), bool_text(want.symmetric)));
  if (dynamic_text(a.dynamic) != dynamic_text(want.dynamic))
    out.push_back(fmt::format("{}.dynamic is {}, expected {}", prefix, dynamic_text(a.dynamic), dynamic_text(want.dynamic)));
}

}  // namespace

std::vector<std::string> scheme_mismatches(QuantScheme s, const ConfigGroup& g, std::string_view global_format) {
  // What the preset is: the writer's own config, read back (one statement of each preset).
  auto parsed = parse_quant_config(ct_quant_config(s, {}));
  const ConfigGroup want = parsed.ok() && !parsed->groups.empty() ? parsed->groups.front() : ConfigGroup{};
  std::vector<std::string> out;
  const std::string_view f = g.format.empty() ? global_format : std::string_view(g.format);
  if (f != quant_scheme_format(s))
    out.push_back(fmt::format("format is \"{}\", expected \"{}\"", f, quant_scheme_format(s)));
  if (!g.weights) {
    out.push_back(fmt::format("weights is null, expected {}", describe_args(*want.weights)));
    return out;
  }
  args_mismatches(*g.weights, *want.weights, "weights", out);
  if (!want.input_activations) {
    if (g.input_activations)
      out.push_back(fmt::format("input_activations is {}, expected null (weight-only A16)",
                                describe_args(*g.input_activations)));
  } else if (!g.input_activations) {
    out.push_back(fmt::format("input_activations is null, expected {} (dynamic activation quantization)",
                              describe_args(*want.input_activations)));
  } else {
    args_mismatches(*g.input_activations, *want.input_activations, "input_activations", out);
  }
  return out;
}

std::string scheme_labels(const QuantConfig& qc) {
  std::set<std::string> labels;
  for (const ConfigGroup& g : qc.groups) labels.insert(scheme_label(g, qc.format));
  return labels.empty() ? std::string("none") : fmt::format("{}", fmt::join(labels, "+"));
}

const nlohmann::ordered_json* find_quant_config(const nlohmann::ordered_json& config, std::string* key_out,
                                                std::vector<std::string>* path_out) {
  if (!config.is_object()) return nullptr;
  auto found = [&](const nlohmann::ordered_json& v, std::vector<std::string> path) {
    if (key_out) *key_out = fmt::format("{}", fmt::join(path, "."));
    if (path_out) *path_out = std::move(path);
    return &v;
  };
  for (const char* key : {"quantization_config", "compression_config"})
    if (auto it = config.find(key); it != config.end() && !it->is_null()) return found(*it, {key});
  if (auto t = config.find("text_config"); t != config.end() && t->is_object())
    if (auto it = t->find("quantization_config"); it != t->end() && !it->is_null())
      return found(*it, {"text_config", "quantization_config"});
  return nullptr;
}

// ---- ignore matching ---------------------------------------------------------------------------

Result<IgnoreMatcher> IgnoreMatcher::compile(const std::vector<std::string>& entries) {
  IgnoreMatcher m;
  m.entries_.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Entry e;
    e.text = entries[i];
    if (e.text.rfind("re:", 0) == 0) {
      auto re = Regex::compile(std::string_view(e.text).substr(3));
      if (!re.ok())
        return make_error(Errc::BAD_INPUT,
                          "config.json quantization_config.ignore[{}] \"{}\": invalid regex ({}); fix the "
                          "pattern",
                          i, e.text, re.error().message);
      e.regex.emplace(std::move(*re));
    }
    m.entries_.push_back(std::move(e));
  }
  return m;
}

bool IgnoreMatcher::entry_matches(std::size_t i, std::string_view name) const {
  const Entry& e = entries_[i];
  if (e.regex) return e.regex->match_prefix(name);
  return e.text == name;
}

bool IgnoreMatcher::matches(std::string_view name) const { return first_match(name) >= 0; }

long IgnoreMatcher::first_match(std::string_view name) const {
  for (std::size_t i = 0; i < entries_.size(); ++i)
    if (entry_matches(i, name)) return static_cast<long>(i);
  return -1;
}

Result<bool> vllm_should_ignore(const IgnoreMatcher& ignore, const std::vector<std::string>& shard_names) {
  std::optional<bool> decision;
  for (const auto& s : shard_names) {
    const bool m = ignore.matches(s);
    if (!decision) {
      decision = m;
    } else if (*decision != m) {
      std::vector<std::string> ign, kept;
      for (const auto& t : shard_names) (ignore.matches(t) ? ign : kept).push_back(t);
      return make_error(Errc::CHECK_FAILED,
                        "fused layer shards disagree on ignore: ignored [{}], not ignored [{}]; vLLM refuses "
                        "\"Found a different quantization schemes\"; ignore all shards or none",
                        fmt::join(ign, ", "), fmt::join(kept, ", "));
    }
  }
  return decision.value_or(false);
}


Result<GroupMatcher> GroupMatcher::compile(const QuantConfig& qc) {
  // target_scheme_map: targets in first-seen order, each bound to the last group naming it.
  GroupMatcher gm;
  for (std::size_t g = 0; g < qc.groups.size(); ++g) {
    gm.names_.push_back(qc.groups[g].name);
    for (const std::string& t : qc.groups[g].targets) {
      if (t == "FusedMoE") gm.has_fused_moe_ = true;
      auto it = std::find_if(gm.targets_.begin(), gm.targets_.end(), [&](const Target& x) { return x.text == t; });
      if (it != gm.targets_.end()) {
        it->group = static_cast<long>(g);
        continue;
      }
      Target x{t, util::ascii_lower(t), static_cast<long>(g), std::nullopt};
      if (t.rfind("re:", 0) == 0) {
        auto re = Regex::compile(std::string_view(t).substr(3));
        if (!re.ok())
          return make_error(Errc::BAD_INPUT, "quantization_config.config_groups.{}.targets: '{}' cannot be compiled: {}",
                            qc.groups[g].name, t, re.error().message);
        x.re.emplace(std::move(*re));
      }
      gm.targets_.push_back(std::move(x));
    }
  }
  // The Linear group is the one the map binds "Linear" to (a later group naming it too takes it).
  for (const Target& t : gm.targets_)
    if (t.text == "Linear") gm.linear_ = t.group;
  return gm;
}

GroupMatch GroupMatcher::match(std::string_view layer_name, std::string_view class_name,
                               const std::vector<std::string>& shard_names) const {
  // vLLM's _is_equal_or_regex_match(value, target, check_contains).
  const std::string lower_class = util::ascii_lower(class_name);
  auto matches = [&](const Target& t, std::string_view value, bool contains) {
    if (t.re) return t.re->match_prefix(value);
    if (contains) return lower_class.find(t.lower) != std::string::npos;
    return t.text == value;
  };
  auto first = [&](std::string_view value, bool contains) -> const Target* {
    for (const Target& t : targets_)
      if (matches(t, value, contains)) return &t;
    return nullptr;
  };
  const Target* hit = first(layer_name, false);
  if (hit == nullptr && !class_name.empty()) hit = first(class_name, true);
  if (hit == nullptr && !shard_names.empty()) {
    const Target* head = nullptr;
    bool all = true;
    for (std::size_t i = 0; i < shard_names.size() && all; ++i) {
      const Target* m = first(shard_names[i], false);
      all = m != nullptr;
      if (i == 0) head = m;
    }
    if (all) hit = head;
  }
  if (hit == nullptr) return GroupMatch{};
  return GroupMatch{hit->group, hit->text};
}

Result<GroupMatch> GroupMatcher::moe(const IgnoreMatcher& ignore, std::string_view experts) const {
  // _add_fused_moe_to_target_scheme_map: "FusedMoE" -> the group of "Linear", appended, unless already a target.
  std::vector<std::pair<std::string, GroupMatch>> found;
  for (const char* proj : {".0.gate_proj", ".0.up_proj", ".0.down_proj"}) {
    std::string name(experts);
    name += proj;
    GroupMatch m;
    if (!ignore.matches(name)) {
      m = match(name, "FusedMoE");
      if (m.group < 0 && linear_ >= 0 && !has_fused_moe_) m = GroupMatch{linear_, "FusedMoE"};
    }
    found.emplace_back(std::move(name), std::move(m));
  }
  auto group_name = [&](long g) { return g < 0 ? std::string("none") : names_[static_cast<std::size_t>(g)]; };
  const auto& [first_name, first] = found.front();
  for (const auto& [name, m] : found)
    if (m.group != first.group)
      return make_error(Errc::CHECK_FAILED,
                        "{}: the expert projections resolve to different config groups ({} -> {}, {} -> {}); vLLM "
                        "refuses \"All MoE projections need to have same quantization scheme but found multiple\"",
                        experts, first_name, group_name(first.group), name, group_name(m.group));
  return found.front().second;
}

Result<GroupMatch> vllm_group_of(const QuantConfig& qc, std::string_view layer_name, std::string_view class_name,
                                 const std::vector<std::string>& shard_names) {
  FP4FORGE_ASSIGN_OR_RETURN(const GroupMatcher gm, GroupMatcher::compile(qc));
  return gm.match(layer_name, class_name, shard_names);
}

Result<GroupMatch> vllm_moe_group_of(const QuantConfig& qc, const IgnoreMatcher& ignore, std::string_view experts) {
  FP4FORGE_ASSIGN_OR_RETURN(const GroupMatcher gm, GroupMatcher::compile(qc));
  return gm.moe(ignore, experts);
}

}  // namespace fp4forge
