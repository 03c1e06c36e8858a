#include "fp4forge/model/inspect.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/model/synth.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/arch_class.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/json_get.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

std::string json_str(const Json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : std::string();
}
std::uint64_t tensor_params(const st::TensorInfo& t, const TensorClass& c) {
  const std::uint64_t n = t.numel();
  if (is_quant_metadata(c.param)) return 0;  // scales and shapes: not parameters
  if (c.param == "weight_packed" && t.dtype == DType::U8) return n * 2;   // two FP4 values per byte
  if (c.param == "weight_packed" && t.dtype == DType::I32) return n * 8;  // eight INT4 values per word (W4A16)
  return n;
}

QuantState read_quant_state(const Json& config, const std::vector<TensorRef>& tensors) {
  QuantState q;
  const Json* qc = find_quant_config(config);
  if (qc != nullptr && !qc->is_object()) qc = nullptr;
  // Quantized modules: a packed payload (4-bit schemes) or an FP8 `weight` (the FP8 schemes).
  std::set<std::string> packed;
  for (const auto& t : tensors) {
    const std::string_view n = t.name;
    const bool fp8 = t.info && (t.info->dtype == DType::F8_E4M3 || t.info->dtype == DType::F8_E5M2);
    if (n.ends_with(".weight_packed"))
      packed.insert(std::string(n.substr(0, n.size() - 14)));
    else if (fp8 && n.ends_with(".weight"))
      packed.insert(std::string(n.substr(0, n.size() - 7)));
  }
  q.quantized_modules = packed.size();
  if (qc == nullptr) return q;
  q.quant_method = json_str(*qc, "quant_method");
  q.format = json_str(*qc, "format");
  if (q.quant_method == "compressed-tensors")
    q.state = "compressed-tensors";
  else
    q.state = "unknown:" + (q.quant_method.empty() ? std::string("?") : q.quant_method);
  if (auto it = qc->find("ignore"); it != qc->end() && it->is_array()) q.ignore_entries = it->size();
  // The one compressed-tensors reader (model/quant_config.h): the same scheme names as verify and diff.
  // A config it refuses shows as "invalid" here (inspect describes; verify and doctor report why).
  if (auto parsed = parse_quant_config(*qc); parsed.ok()) {
    for (const ConfigGroup& g : parsed->groups) {
      QuantGroup grp;
      grp.name = g.name;
      grp.scheme = scheme_label(g, parsed->format);
      grp.format = g.format.empty() ? q.format : g.format;
      grp.targets = g.targets;
      if (g.weights) grp.observer = g.weights->observer;
      q.groups.push_back(std::move(grp));
    }
    // Which group vLLM gives each quantized module (model/quant_config.h vllm_group_of; every quantized module
    // is a Linear to vLLM). A target it cannot compile leaves the counts at zero: verify and doctor say why.
    // Only compressed-tensors looks its modules up by targets: a quant_method fp8 / modelopt release has no groups,
    // and vLLM loads it by its own method (issue 55 tryout L: "vLLM has no scheme to load them with").
    for (const std::string& m : packed) {
      if (!q.quant_method.empty() && q.quant_method != "compressed-tensors") break;
      auto g = vllm_group_of(*parsed, m, "Linear");
      if (!g.ok()) break;
      if (g->group >= 0) {
        ++q.groups[static_cast<std::size_t>(g->group)].modules;
      } else {
        if (q.uncovered.size() < 3) q.uncovered.push_back(m);
        ++q.uncovered_count;
      }
    }
  } else {
    q.state = "invalid";
  }
  return q;
}

std::string human_count(std::uint64_t n) {
  if (n >= 1'000'000'000ULL) return fmt::format("{:.2f} B", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000ULL) return fmt::format("{:.2f} M", static_cast<double>(n) / 1e6);
  if (n >= 10'000ULL) return fmt::format("{:.1f} K", static_cast<double>(n) / 1e3);
  return fmt::format("{}", n);
}

Json tally_json(const TensorTally& t) {
  Json j;
  j["tensors"] = t.tensors;
  j["params"] = t.params;
  j["bytes"] = t.bytes;
  return j;
}

}  // namespace

TensorTally InspectReport::role(Role r) const {
  for (const auto& [role, t] : roles)
    if (role == r) return t;
  return {};
}

Result<InspectReport> inspect_checkpoint(const Checkpoint& ckpt) {
  InspectReport r;
  r.dir = ckpt.dir().string();
  FP4FORGE_ASSIGN_OR_RETURN(r.info, read_checkpoint_info(ckpt));
  const ModelInfo& info = r.info;
  if (!ckpt.has_config())
    r.warnings.push_back("no config.json: family, geometry and layer types are unknown");
  for (const auto& n : ckpt.notes()) r.warnings.push_back(n.message);
  // Said where a folder is first looked at (tryout S-L1: only doctor said it).
  if (header_only_synth(ckpt))
    r.warnings.push_back(
        "written by `synth --header-only`: every tensor reads as zeros; a layout to size seats "
        "(plan) and check (doctor), never a model to quantize or serve (doctor: header-only-weights)");
  if (info.family == Family::UNKNOWN && ckpt.has_config())
    r.warnings.push_back(fmt::format(
        "unknown model family (model_type '{}', architecture '{}'): roles are assigned by tensor name only",
        info.model_type, info.architecture));

  r.arch = classify_arch(ckpt, info);
  for (const auto& lt : info.layer_types) {
    auto it = std::find_if(r.layers_by_type.begin(), r.layers_by_type.end(),
                           [&](const auto& p) { return p.first == lt; });
    if (it == r.layers_by_type.end())
      r.layers_by_type.emplace_back(lt, 1);
    else
      ++it->second;
  }

  std::array<TensorTally, kRoleCount> by_role{};
  std::map<std::string, TensorTally> by_dtype;
  std::set<int> text_layers;
  std::vector<std::string> other_examples;
  std::uint64_t other_count = 0;
  // A low-bit source's weights count as their expansion (a packed FP4 byte holds two), its scales as none.
  auto fp8 = read_fp8_source(ckpt);
  const Fp8Source* src8 = fp8.ok() && *fp8 ? &**fp8 : nullptr;
  // gpt-oss's MXFP4 release (quant_method mxfp4, not read by fp4forge): a U8 `*_blocks` byte holds two E2M1 weights,
  // its `*_scales` are E8M0 exponents, no weights (tryout L-L5: one parameter per byte).
  const bool mxfp4_release = info.quant_method == "mxfp4";
  auto mxfp4_params = [](std::string_view name, const st::TensorInfo& ti) -> std::optional<std::uint64_t> {
    if (ti.dtype != DType::U8) return std::nullopt;
    if (name.ends_with("_blocks")) return 2 * ti.numel();
    if (name.ends_with("_scales")) return 0;
    return std::nullopt;
  };
  for (const auto& t : ckpt.tensors()) {
    const st::TensorInfo& ti = *t.info;
    const TensorClass c = classify(t.name, ti.shape, info);
    const Fp8Weight* w8 = src8 != nullptr ? src8->find(t.name) : nullptr;
    const auto mx = mxfp4_release ? mxfp4_params(t.name, ti) : std::nullopt;
    const std::uint64_t params = w8 != nullptr                               ? st::shape_numel(w8->shape)
                                 : src8 != nullptr && src8->consumed(t.name) ? 0
                                 : mx                                        ? *mx
                                                                             : tensor_params(ti, c);
    auto& rt = by_role[static_cast<std::size_t>(c.role)];
    ++rt.tensors;
    rt.params += params;
    rt.bytes += ti.nbytes();
    auto& dt = by_dtype[std::string(dtype_name(ti.dtype))];
    ++dt.tensors;
    dt.params += params;
    dt.bytes += ti.nbytes();
    ++r.num_tensors;
    r.total_params += params;
    r.total_bytes += ti.nbytes();
    if (c.text_stack && c.layer >= 0) text_layers.insert(c.layer);
    if (c.role == Role::MTP) ++r.mtp_tensors;
    if (c.role == Role::LM_HEAD && !r.lm_head_present) {
      r.lm_head_present = true;
      r.lm_head_name = t.name;
    }
    if (c.role == Role::OTHER) {
      ++other_count;
      if (other_examples.size() < 3) other_examples.push_back(t.name);
    }
  }
  for (int i = 0; i < kRoleCount; ++i)
    if (by_role[static_cast<std::size_t>(i)].tensors > 0)
      r.roles.emplace_back(static_cast<Role>(i), by_role[static_cast<std::size_t>(i)]);
  for (auto& [k, v] : by_dtype) r.dtypes.emplace_back(k, v);
  r.layers_in_tensors = text_layers.size();
  r.mtp_present = r.mtp_tensors > 0;
  r.num_shards = ckpt.shard_names().size();
  r.index_file = ckpt.index_file().value_or("");
  r.quant = read_quant_state(ckpt.config(), ckpt.tensors());
  {
    auto hfq = read_hf_quant_config(ckpt);
    r.quant.foreign = foreign_quantization(ckpt.config(), hfq.ok() && *hfq ? &**hfq : nullptr).value_or("");
  }
  if (!fp8.ok()) {
    if (r.quant.quant_method == "fp8" || r.quant.quant_method == "modelopt")
      r.warnings.push_back(fmt::format("FP8 source not readable: {}", fp8.error().message));
  } else if (*fp8) {
    r.quant.fp8_source = fp8_source_json(**fp8);
  }

  for (const auto& f : ckpt.other_files()) {
    if (is_processor_file(f)) r.processor_files.push_back(f);
    if (is_tokenizer_group_file(f)) r.tokenizer_files.push_back(f);
    if (f == "generation_config.json") r.has_generation_config = true;
  }

  // Consistency warnings (doctor does the full checks; these are the ones visible at a glance).
  if (ckpt.has_config()) {
    if (info.num_layers > 0 && !text_layers.empty() &&
        static_cast<std::uint64_t>(info.num_layers) != r.layers_in_tensors)
      r.warnings.push_back(fmt::format("config says num_hidden_layers = {} but the tensors hold {} layers",
                                       info.num_layers, r.layers_in_tensors));
    // Named by the key the config uses (DeepSeek's num_nextn_predict_layers; issue 55 tryout L).
    if (info.mtp_num_hidden_layers > 0 && !r.mtp_present)
      r.warnings.push_back(fmt::format(
          "config declares {} = {} but the checkpoint has no MTP layer tensors: MTP speculative decoding is "
          "unavailable; hint: 'fp4forge doctor --fix --mtp-from ORIGINAL' splices them from the original release",
          integral_of(text_config(ckpt.config()), "mtp_num_hidden_layers").value_or(0) > 0 ? "mtp_num_hidden_layers"
                                                                                           : "num_nextn_predict_layers",
          info.mtp_num_hidden_layers));
    if (info.tie_word_embeddings && r.lm_head_present)
      r.warnings.push_back(fmt::format("tie_word_embeddings is true but {} exists (vLLM ignores it)", r.lm_head_name));
    if (!info.tie_word_embeddings && !r.lm_head_present && r.num_tensors > 0)
      r.warnings.push_back("tie_word_embeddings is false but there is no lm_head.weight");
    if (r.arch.moe && info.num_experts > 0 && r.arch.num_experts != info.num_experts)
      r.warnings.push_back(fmt::format("config says num_experts = {} but the tensors hold {} experts",
                                       info.num_experts, r.arch.num_experts));
    if (r.arch.multimodal && info.wrapper && r.processor_files.empty())
      r.warnings.push_back(
          "multimodal checkpoint without processor_config.json or preprocessor_config.json: vLLM cannot "
          "start it as a multimodal model");
  }
  if (r.quant.quantized_modules > 0 && r.quant.state == "none")
    r.warnings.push_back(
        fmt::format("{} modules carry quantized weights (weight_packed or FP8 weight) but config.json has no "
                    "quantization_config",
                    r.quant.quantized_modules));
  if (r.quant.uncovered_count > 0)
    r.warnings.push_back(fmt::format(
        "{} quantized module(s) match no config group's targets, e.g. '{}': vLLM has no scheme to load them "
        "with (docs/mixed-precision.md)",
        r.quant.uncovered_count, fmt::join(r.quant.uncovered, "', '")));
  if (other_count > 0)
    r.warnings.push_back(fmt::format("{} tensor(s) have no known role, e.g. '{}'", other_count,
                                     fmt::join(other_examples, "', '")));
  // Servable means servable: doctor's serving-file findings (one home, model/serving_files.h), as doctor words them.
  FindingSink files;
  check_serving_files(ckpt.dir(), "", files);
  r.findings = files.take();
  return r;
}

nlohmann::ordered_json to_json(const InspectReport& r) {
  const ModelInfo& m = r.info;
  Json j;
  j["ok"] = true;
  j["schema"] = "fp4forge.inspect/1";
  j["dir"] = r.dir;
  j["architecture"] = m.architecture;
  j["model_type"] = m.model_type;
  j["text_model_type"] = m.text_model_type;
  j["family"] = family_name(m.family);
  j["layout"] = m.wrapper ? "wrapper" : "flat";
  j["text_prefix"] = m.text_prefix;
  Json cls;
  cls["name"] = r.arch.str();
  cls["moe"] = r.arch.moe;
  cls["hybrid"] = r.arch.hybrid;
  cls["multimodal"] = r.arch.multimodal;
  cls["num_experts"] = r.arch.num_experts;
  j["class"] = cls;
  Json g;
  g["hidden_size"] = m.hidden_size;
  g["num_hidden_layers"] = m.num_layers;
  g["num_attention_heads"] = m.num_heads;
  g["num_key_value_heads"] = m.num_kv_heads;
  g["head_dim"] = m.head_dim;
  g["intermediate_size"] = m.intermediate_size;
  g["vocab_size"] = m.vocab_size;
  g["max_position_embeddings"] = m.max_position_embeddings;
  g["num_experts"] = m.num_experts;
  g["experts_per_tok"] = m.experts_per_tok;
  g["moe_intermediate_size"] = m.moe_intermediate_size;
  g["shared_expert_intermediate_size"] = m.shared_expert_intermediate_size;
  g["global_head_dim"] = m.global_head_dim;
  g["num_global_key_value_heads"] = m.num_global_kv_heads;
  g["attention_k_eq_v"] = m.attention_k_eq_v;
  j["geometry"] = g;
  Json layers;
  layers["total"] = m.num_layers;
  Json by_type = Json::object();
  for (const auto& [t, n] : r.layers_by_type) by_type[t] = n;
  layers["by_type"] = by_type;
  layers["in_tensors"] = r.layers_in_tensors;
  layers["types_synthesized"] = m.layer_types_synthesized;
  j["layers"] = layers;
  Json tensors;
  tensors["count"] = r.num_tensors;
  tensors["params"] = r.total_params;
  tensors["bytes"] = r.total_bytes;
  tensors["shards"] = r.num_shards;
  tensors["index"] = r.index_file.empty() ? Json(nullptr) : Json(r.index_file);
  j["tensors"] = tensors;
  Json roles = Json::object();
  for (const auto& [role, t] : r.roles) roles[std::string(role_name(role))] = tally_json(t);
  j["roles"] = roles;
  Json dtypes = Json::object();
  for (const auto& [d, t] : r.dtypes) dtypes[d] = tally_json(t);
  j["dtypes"] = dtypes;
  Json q;
  q["state"] = r.quant.state;
  q["quant_method"] = r.quant.quant_method.empty() ? Json(nullptr) : Json(r.quant.quant_method);
  q["format"] = r.quant.format.empty() ? Json(nullptr) : Json(r.quant.format);
  Json groups = Json::array();
  for (const auto& grp : r.quant.groups) {
    Json x;
    x["name"] = grp.name;
    x["scheme"] = grp.scheme;
    x["format"] = grp.format.empty() ? Json(nullptr) : Json(grp.format);
    x["targets"] = grp.targets;
    x["observer"] = grp.observer.empty() ? Json(nullptr) : Json(grp.observer);
    x["modules"] = grp.modules;
    groups.push_back(std::move(x));
  }
  q["groups"] = groups;
  q["ignore_entries"] = r.quant.ignore_entries;
  q["quantized_modules"] = r.quant.quantized_modules;
  q["uncovered_modules"] = r.quant.uncovered_count;
  q["fp8_source"] = r.quant.fp8_source;
  q["foreign"] = r.quant.foreign.empty() ? Json(nullptr) : Json(r.quant.foreign);
  j["quantization"] = q;
  Json mtp;
  mtp["config_layers"] = m.mtp_num_hidden_layers;
  mtp["present"] = r.mtp_present;
  mtp["tensors"] = r.mtp_tensors;
  j["mtp"] = mtp;
  Json emb;
  emb["tied"] = m.tie_word_embeddings;
  emb["lm_head_present"] = r.lm_head_present;
  j["embeddings"] = emb;
  Json files;
  files["processor"] = r.processor_files;
  files["tokenizer"] = r.tokenizer_files;
  files["generation_config"] = r.has_generation_config;
  j["files"] = files;
  j["warnings"] = r.warnings;
  Json fs = Json::array();
  for (const auto& f : r.findings) fs.push_back(to_json(f));
  j["findings"] = std::move(fs);
  return j;
}

std::string to_text(const InspectReport& r) {
  const ModelInfo& m = r.info;
  std::string s;
  // Every value holds file data (paths, config values, names): written escaped, so a control byte or a newline in a
  // name never reaches the terminal raw or forges a line (R4-B5).
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };
  auto line = [&s, &esc](std::string_view key, const std::string& value) {
    s += fmt::format("{:<13}{}\n", key, esc(value));
  };
  line("checkpoint", r.dir);
  line("architecture",
       fmt::format("{} (family {}, {} layout, text prefix {})", m.architecture.empty() ? "?" : m.architecture,
                   family_name(m.family), m.wrapper ? "wrapper" : "flat",
                   m.text_prefix.empty() ? "none" : "'" + m.text_prefix + "'"));
  line("class", r.arch.moe ? fmt::format("{} ({} experts)", r.arch.str(), r.arch.num_experts) : r.arch.str());
  std::string lt;
  for (const auto& [t, n] : r.layers_by_type) lt += fmt::format("{}{} {}", lt.empty() ? "" : ", ", n, t);
  line("layers", fmt::format("{}{}", m.num_layers, lt.empty() ? "" : " (" + lt + ")"));
  line("tensors", fmt::format("{} in {} shard(s){}, {} params, {}", r.num_tensors, r.num_shards,
                              r.index_file.empty() ? "" : " + " + r.index_file, human_count(r.total_params),
                              format_bytes(r.total_bytes)));
  std::string dt;
  for (const auto& [d, t] : r.dtypes)
    dt += fmt::format("{}{} x{} ({})", dt.empty() ? "" : ", ", d, t.tensors, format_bytes(t.bytes));
  line("dtypes", dt.empty() ? "-" : dt);
  std::string qs = r.quant.state;
  if (!r.quant.groups.empty()) {
    std::vector<std::string> names;
    for (const auto& g : r.quant.groups)
      names.push_back(fmt::format("{}{}{}", g.scheme, g.observer.empty() ? "" : " with observer " + g.observer,
                                  r.quant.groups.size() > 1 ? fmt::format(": {} modules", g.modules) : ""));
    qs += fmt::format(" ({}{})", fmt::join(names, ", "), r.quant.format.empty() ? "" : ", " + r.quant.format);
  }
  if (r.quant.quantized_modules > 0) qs += fmt::format(", {} quantized modules", r.quant.quantized_modules);
  // A format fp4forge does not read is named as doctor names it (issue 55: "unknown:mxfp4" alone).
  if (!r.quant.foreign.empty()) qs += fmt::format(" ({}; fp4forge does not read it)", r.quant.foreign);
  line("quantization", qs);
  if (r.quant.fp8_source.is_object())
    line("fp8 source", fmt::format("{}; quantize reads it as its bf16 expansion",
                                   r.quant.fp8_source.value("label", std::string())));
  line("mtp", r.mtp_present ? fmt::format("present ({} tensors, {} layer(s) in config)", r.mtp_tensors,
                                          m.mtp_num_hidden_layers)
                            : (m.mtp_num_hidden_layers > 0 ? "declared in config but absent" : "none"));
  line("embeddings",
       m.tie_word_embeddings
           ? (r.lm_head_present ? fmt::format("tied (but {} present)", r.lm_head_name) : "tied (no lm_head.weight)")
           : (r.lm_head_present ? fmt::format("untied ({})", r.lm_head_name) : "untied, lm_head.weight missing"));
  line("processor", r.processor_files.empty() ? "-" : fmt::format("{}", fmt::join(r.processor_files, ", ")));
  line("tokenizer", r.tokenizer_files.empty() ? "-" : fmt::format("{}", fmt::join(r.tokenizer_files, ", ")));
  s += "\n";
  s += fmt::format("{:<22}{:>9}{:>14}{:>14}\n", "role", "tensors", "params", "bytes");
  for (const auto& [role, t] : r.roles)
    s += fmt::format("{:<22}{:>9}{:>14}{:>14}\n", role_name(role), t.tensors, human_count(t.params),
                     format_bytes(t.bytes));
  s += fmt::format("{:<22}{:>9}{:>14}{:>14}\n", "total", r.num_tensors, human_count(r.total_params),
                   format_bytes(r.total_bytes));
  if (!r.warnings.empty()) {
    s += "\nwarnings:\n";
    for (const auto& w : r.warnings) s += fmt::format("  - {}\n", esc(w));
  }
  if (!r.findings.empty()) {
    s += "\nserving files:\n";
    for (const auto& f : r.findings) {
      s += fmt::format("  {:<8} {}: {}\n", severity_name(f.severity), esc(f.kind), esc(f.message));
      if (!f.hint.empty()) s += fmt::format("           hint: {}\n", esc(f.hint));
    }
  }
  return s;
}

namespace {
std::string_view mtp_form_name(MtpForm f) {
  switch (f) {
    case MtpForm::NONE: return "none";
    case MtpForm::MTP_MODULE: return "mtp.*";
    case MtpForm::EXTRA_LAYERS: return "extra decoder layers";
  }
  return "none";
}
std::string_view mixer_name(Mixer m) {
  switch (m) {
    case Mixer::NONE: return "attention";
    case Mixer::GATED_DELTANET: return "attention + GatedDeltaNet";
    case Mixer::MAMBA2: return "attention + Mamba-2";
  }
  return "attention";
}
}  // namespace

nlohmann::ordered_json families_json() {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& f : families()) {
    nlohmann::ordered_json j;
    j["id"] = f.id;
    j["name"] = f.display;
    j["model_types"] = f.model_types;
    j["architectures"] = f.architectures;
    j["mtp_architectures"] = f.mtp_architectures;
    j["text_prefixes"] = f.text_prefixes;
    j["mixer"] = mixer_name(f.mixer);
    j["moe"] = f.moe_layers != MoeLayers::NONE;
    j["mtp"] = mtp_form_name(f.mtp);
    j["mla"] = f.mla;
    j["expert_leaves"] = f.expert_leaves;
    j["experts_quantizable"] = f.experts_refusal.empty();
    if (!f.experts_refusal.empty()) j["experts_refusal"] = f.experts_refusal;
    a.push_back(std::move(j));
  }
  return {{"ok", true}, {"families", std::move(a)}};
}

std::string families_text() {
  std::string s = fmt::format("{} families in the registry (docs/registry.md):\n", families().size());
  s += fmt::format("  {:<18} {:<18} {:<26} {:<4} {:<20} {}\n", "id", "name", "mixer", "moe", "mtp", "architectures");
  for (const auto& f : families()) {
    s += fmt::format("  {:<18} {:<18} {:<26} {:<4} {:<20} {}\n", f.id, f.display, mixer_name(f.mixer),
                     f.moe_layers != MoeLayers::NONE ? "yes" : "no", mtp_form_name(f.mtp), fmt::join(f.architectures, ", "));
    if (!f.experts_refusal.empty()) s += fmt::format("  {:<18} experts kept: {}\n", "", f.experts_refusal);
  }
  s += "Other families work by tensor name; checks that need a family rule warn that they could not check.\n";
  return s;
}

}  // namespace fp4forge
