#include "fp4forge/model/fp8_source.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/model/tensor_param.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/json_get.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/safetensors/header.h"

namespace fp4forge {
namespace {

using ojson = nlohmann::ordered_json;
using Shape = std::vector<std::uint64_t>;

constexpr const char* kReads =
    "fp4forge reads unquantized BF16/FP16/FP32 sources and FP8 E4M3 ones (quant_method fp8, compressed-tensors "
    "float-quantized, ModelOpt FP8)";

/** A config value in a message: at most 64 characters. */
std::string capped(const std::string& v) { return v.size() <= 64 ? v : v.substr(0, 64) + "..."; }

/** What to do with a quantized release fp4forge does not read: quantize its BF16 original, or, for a format vLLM
 * serves as it is (gpt-oss's MXFP4 release), serve it (issue 55: "quantize the original BF16 weights" was the
 * wrong answer there). */
constexpr const char* kRequantize = "quantize the original BF16 weights instead (docs/fp8-sources.md)";
constexpr const char* kServeAsIs =
    "serve it as it is: vLLM reads gpt-oss's MXFP4 release natively, and that is the 4-bit seat this release already "
    "is (its gpt-oss loader reads no compressed-tensors experts, so a re-quantization would keep them in bf16; "
    "docs/mixed-precision.md)";

/** Refusal of a source already quantized in a format fp4forge does not read; `what` names where it says so. */
Error already_quantized(const std::string& what, const char* advice = kRequantize) {
  return make_error(Errc::BAD_INPUT, "source is already quantized: {}; {}; {}", what, kReads, advice);
}

/** A stored FP8 weight: an F8_E4M3 tensor that is not itself a scale (NVFP4's block scales are F8_E4M3). */
bool is_payload(const Fp8TensorInfo& t) {
  if (t.dtype != DType::F8_E4M3) return false;
  const std::string_view n = t.name;
  return !(n.ends_with("_scale") || n.ends_with("_scale_inv") || n.ends_with("_scale_2"));
}

/** The scale tensor names tried for payload `name`, in order: `name` + each suffix, then DeepSeek's own
 * `stem.scale` beside `stem.weight`. */
std::vector<std::string> scale_names(std::string_view name, const std::vector<std::string>& suffixes) {
  std::vector<std::string> out;
  for (const auto& suf : suffixes) out.push_back(std::string(name) + suf);
  if (name.ends_with(".weight")) out.push_back(std::string(name.substr(0, name.size() - 6)) + "scale");
  return out;
}

/** A dtype that can hold E8M0 scales: F8_E8M0, U8 exponent bytes (where E8M0 is declared), F32 powers of two. */
bool e8m0_capable(DType d, bool u8_ok) { return d == DType::F8_E8M0 || d == DType::F32 || (u8_ok && d == DType::U8); }

/** config.json's quantization config as an object (find_quant_config; another type is refused by read_declared). */
const ojson* quant_config_of(const ojson& config) {
  const ojson* qc = find_quant_config(config);
  return qc != nullptr && qc->is_object() ? qc : nullptr;
}



/** A pair of positive integers, or nullopt. */
std::optional<std::pair<std::uint64_t, std::uint64_t>> block_of(const ojson& j) {
  if (!j.is_array() || j.size() != 2) return std::nullopt;
  if (!j[0].is_number_integer() || !j[1].is_number_integer()) return std::nullopt;
  const auto a = j[0].get<std::int64_t>(), b = j[1].get<std::int64_t>();
  if (a <= 0 || b <= 0 || a > (1 << 20) || b > (1 << 20)) return std::nullopt;
  return std::pair<std::uint64_t, std::uint64_t>{static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)};
}

/** quant_method values of formats fp4forge neither reads as a source nor writes, with what they are. */
const std::map<std::string, std::string> kForeignMethods{
    {"gptq", "GPTQ (integer weights)"}, {"awq", "AWQ (INT4 weights)"}, {"bitsandbytes", "bitsandbytes"},
    // A label, said in every finding that names the format: short (issue 55 tryout: this once held the whole
    // explanation, four times in one doctor report); why not to re-quantize is quantize's refusal (kServeAsIs).
    {"mxfp4", "MXFP4, the gpt-oss release format vLLM serves as it is"},
    {"fbgemm_fp8", "fbgemm FP8 (per-row, fbgemm kernels)"},
    {"hqq", "HQQ"}, {"quark", "AMD Quark"}, {"torchao", "torchao"}, {"eetq", "EETQ (INT8)"},
    {"aqlm", "AQLM"}, {"vptq", "VPTQ"}, {"higgs", "HIGGS"}, {"bitnet", "BitNet"}, {"fp_quant", "FP-Quant"},
    {"spqr", "SpQR"}, {"gguf", "GGUF"}, {"exl2", "EXL2"}, {"marlin", "Marlin (INT4)"}};

/** ModelOpt quant_algo values that are FP8 weights fp4forge reads as a source. */
bool modelopt_fp8_algo(const std::string& lower_algo) {
  return lower_algo == "fp8" || lower_algo == "fp8_per_channel_per_token";
}

/** What the config says the weights are. */
struct Declared {
  Fp8Dialect dialect = Fp8Dialect::NATIVE;
  std::set<fp8::ScaleLayout> layouts;  // empty: any
  std::pair<std::uint64_t, std::uint64_t> block{128, 128};
  bool block_declared = false;
  bool ue8m0 = false;        // scale_fmt "ue8m0": E8M0 scales (DeepSeek-V4)
  std::string what;  // for messages: "quant_method fp8, weight_block_size [128, 128]"
};

/** Activation and KV-cache calibration: the leaf table's fp8_dropped column (model/tensor_param.h). */
bool dropped_leaf(std::string_view name) {
  const LeafTraits* t = leaf_traits(names::leaf_of(name));
  return t != nullptr && t->fp8_dropped;
}

Result<std::optional<Declared>> read_compressed_tensors(const ojson& qc, const std::string& key) {
  Declared d;
  d.dialect = Fp8Dialect::COMPRESSED_TENSORS;
  const std::string top_format = str_of(qc, "format");
  auto groups = qc.find("config_groups");
  if (groups == qc.end() || !groups->is_object() || groups->empty())
    return make_error(Errc::BAD_INPUT,
                      "config.json: compressed-tensors {} has no config_groups; expected the groups that describe the "
                      "weights", key);
  for (auto it = groups->begin(); it != groups->end(); ++it) {
    const ojson& g = it.value();
    if (!g.is_object()) continue;
    std::string format = str_of(g, "format");
    if (format.empty()) format = top_format;
    auto w = g.find("weights");
    if (w == g.end() || w->is_null()) continue;  // activations only
    if (!w->is_object())
      return make_error(Errc::BAD_INPUT, "config.json: {}.config_groups.{}.weights is not an object", key,
                        it.key());
    const std::string type = str_of(*w, "type");
    const std::int64_t bits = int_of(*w, "num_bits").value_or(0);
    const std::string strategy = str_of(*w, "strategy");
    const std::string where = fmt::format("config.json {}.config_groups.{}", key, capped(it.key()));
    if (format == "nvfp4-pack-quantized")
      return already_quantized(fmt::format("{}: compressed-tensors NVFP4 (nvfp4-pack-quantized)", where));
    if (format == "mxfp4-pack-quantized")
      return already_quantized(fmt::format("{}: compressed-tensors MXFP4 (mxfp4-pack-quantized)", where));
    if (type != "float" || bits != 8)
      return already_quantized(fmt::format("{}: compressed-tensors {}{} weights (format '{}')", where,
                                           type == "float" ? "FP" : "INT", bits, capped(format)));
    if (format != "float-quantized")
      return already_quantized(fmt::format("{}: compressed-tensors FP8 weights in format '{}'; only float-quantized "
                                           "is read",
                                           where, capped(format)));
    if (auto sym = w->find("symmetric"); sym != w->end() && sym->is_boolean() && !sym->get<bool>())
      return already_quantized(fmt::format("{}: compressed-tensors asymmetric FP8 weights", where));
    if (strategy == "tensor") d.layouts.insert(fp8::ScaleLayout::TENSOR);
    else if (strategy == "channel") d.layouts.insert(fp8::ScaleLayout::CHANNEL);
    else if (strategy == "block") {
      d.layouts.insert(fp8::ScaleLayout::BLOCK);
      if (auto b = w->find("block_structure"); b != w->end()) {
        auto bs = block_of(*b);
        if (!bs)
          return make_error(Errc::BAD_INPUT,
                            "config.json: config_groups.{}.weights.block_structure is {}; expected [rows, cols]", it.key(),
                            b->dump());
        d.block = *bs;
        d.block_declared = true;
      }
    } else {
      return already_quantized(fmt::format("{}: compressed-tensors FP8 weights with strategy '{}'; tensor, channel "
                                           "and block are read",
                                           where, capped(strategy)));
    }
  }
  if (auto st = qc.find("quantization_status"); st != qc.end() && st->is_string() && st->get<std::string>() != "compressed")
    return make_error(Errc::BAD_INPUT,
                      "config.json: quantization_status is '{}'; expected 'compressed' (a checkpoint saved with its FP8 "
                      "weights stored as F8_E4M3)",
                      st->get<std::string>());
  d.what = fmt::format("float-quantized, {}", [&] {
    std::string s;
    for (auto l : d.layouts) s += std::string(s.empty() ? "" : ", ") + fp8::scale_layout_name(l);
    return s.empty() ? std::string("no weight groups") : s;
  }());
  return std::optional<Declared>(d);
}

Result<std::optional<Declared>> read_modelopt(const std::string& algo, std::string_view where) {
  Declared d;
  d.dialect = Fp8Dialect::MODELOPT;
  const std::string a = util::ascii_lower(algo);
  if (modelopt_fp8_algo(a)) {
    d.layouts = {a == "fp8" ? fp8::ScaleLayout::TENSOR : fp8::ScaleLayout::CHANNEL};
  } else if (a.empty()) {
    return make_error(Errc::BAD_INPUT, "{}: ModelOpt quantization without quant_algo; expected \"FP8\"", where);
  } else {
    return already_quantized(fmt::format("{}: ModelOpt {}", where, capped(algo)));
  }
  d.what = fmt::format("quant_algo {}", algo);
  return std::optional<Declared>(d);
}

/** The declared quantization; nullopt when neither file declares one. */
Result<std::optional<Declared>> read_declared(const ojson& config, const ojson* hfq) {
  std::string key;
  if (const ojson* any = find_quant_config(config, &key); any != nullptr && !any->is_object())
    return make_error(Errc::BAD_INPUT, "config.json: {} is a {}; expected an object (the quantization config)", key,
                      any->type_name());
  const ojson* qc = quant_config_of(config);
  if (qc == nullptr) {
    if (hfq != nullptr && hfq->is_object()) {
      auto q = hfq->find("quantization");
      const std::string algo = q != hfq->end() ? str_of(*q, "quant_algo") : std::string();
      return read_modelopt(algo, "hf_quant_config.json");
    }
    return std::optional<Declared>{};
  }
  const std::string method = util::ascii_lower(str_of(*qc, "quant_method"));
  if (method == "fp8") {
    Declared d;
    d.dialect = Fp8Dialect::NATIVE;
    if (const std::string f = util::ascii_lower(str_of(*qc, "fmt")); !f.empty() && f != "e4m3")
      return already_quantized(fmt::format("config.json {}.fmt '{}': FP8 {} weights; E4M3 is read", key, capped(f), capped(f)));
    const std::string sf = util::ascii_lower(str_of(*qc, "scale_fmt"));
    if (!sf.empty() && sf != "ue8m0" && sf != "float")
      return already_quantized(fmt::format("config.json {}.scale_fmt '{}': scales of a format fp4forge does not read; "
                                           "float and ue8m0 are read",
                                           key, capped(sf)));
    d.ue8m0 = sf == "ue8m0";
    auto wb = qc->find("weight_block_size");
    if (wb != qc->end() && !wb->is_null()) {
      auto bs = block_of(*wb);
      if (!bs)
        return make_error(Errc::BAD_INPUT, "config.json: {}.weight_block_size is {}; expected [rows, cols]", key,
                          wb->dump());
      d.block = *bs;
      d.block_declared = true;
      d.layouts = {fp8::ScaleLayout::BLOCK};
      d.what = fmt::format("weight_block_size [{}, {}]", bs->first, bs->second);
    } else {
      d.layouts = {fp8::ScaleLayout::TENSOR, fp8::ScaleLayout::CHANNEL};
      d.what = "no weight_block_size";
    }
    if (d.ue8m0) d.what += ", scale_fmt ue8m0";
    return std::optional<Declared>(d);
  }
  if (method == "compressed-tensors" || method == "compressed_tensors") return read_compressed_tensors(*qc, key);
  if (method == "modelopt") {
    std::string algo = str_of(*qc, "quant_algo");
    if (algo.empty() && hfq != nullptr)
      if (auto q = hfq->find("quantization"); q != hfq->end()) algo = str_of(*q, "quant_algo");
    return read_modelopt(algo, fmt::format("config.json {}", key));
  }
  if (method.empty())
    return make_error(Errc::BAD_INPUT,
                      "config.json: {} has no quant_method; expected an unquantized checkpoint or one of fp8, "
                      "compressed-tensors, modelopt", key);
  if (auto k = kForeignMethods.find(method); k != kForeignMethods.end())
    return already_quantized(fmt::format("config.json {}.quant_method '{}', {}", key, method, k->second),
                             method == "mxfp4" ? kServeAsIs : kRequantize);
  return already_quantized(
      fmt::format("config.json {}.quant_method '{}' (not a format fp4forge reads)", key, capped(method)));
}

/** The layouts `scale` fits for `weight` [L..., rows, cols]. */
std::vector<fp8::ScaleLayout> fitting_layouts(const Shape& w, const Shape& s, std::pair<std::uint64_t, std::uint64_t> blk) {
  const Shape lead(w.begin(), w.end() - 2);
  const std::uint64_t rows = w[w.size() - 2], cols = w.back(), outer = st::shape_numel(lead);
  std::vector<fp8::ScaleLayout> out;
  auto with = [&](std::initializer_list<std::uint64_t> tail) {
    Shape x = lead;
    x.insert(x.end(), tail);
    return x;
  };
  // TENSOR: one element per matrix ([], [1], [L...], [L..., 1], [L..., 1, 1]).
  if (st::shape_numel(s) == outer && (s == lead || s == with({1}) || s == with({1, 1}) || (outer == 1 && st::shape_numel(s) == 1)))
    out.push_back(fp8::ScaleLayout::TENSOR);
  if (s == with({rows, 1}) || s == with({rows})) out.push_back(fp8::ScaleLayout::CHANNEL);
  // BLOCK, also with its unit dimensions squeezed out: transformers 5 saves the per-expert scales of its
  // fused FP8 experts with `chunk.squeeze()` ([2, 1] and [1, 2] become [2], [1, 1] becomes []).
  fp8::ScaleGrid g;
  g.layout = fp8::ScaleLayout::BLOCK;
  g.rows = rows;
  g.cols = cols;
  g.block_rows = blk.first;
  g.block_cols = blk.second;
  const Shape grid = with({g.scale_rows(), g.scale_cols()});
  auto squeezed = [](const Shape& x) {
    Shape y;
    for (auto d : x)
      if (d != 1) y.push_back(d);
    return y;
  };
  // The grid itself, or its squeezed form; never a shape that only squeezes alike (issue 27 #10: a [1, 2] grid
  // for a [2, 1] one was accepted and read in the other orientation).
  if (s == grid || s == squeezed(grid)) out.push_back(fp8::ScaleLayout::BLOCK);
  return out;
}

}  // namespace

std::string_view fp8_dialect_name(Fp8Dialect d) noexcept {
  switch (d) {
    case Fp8Dialect::NATIVE: return "fp8";
    case Fp8Dialect::COMPRESSED_TENSORS: return "compressed-tensors";
    case Fp8Dialect::MODELOPT: return "modelopt";
  }
  return "fp8";
}

const Fp8Weight* Fp8Source::find(std::string_view tensor) const noexcept {
  auto it = std::lower_bound(weights.begin(), weights.end(), tensor,
                             [](const Fp8Weight& w, std::string_view n) { return w.tensor < n; });
  return it != weights.end() && it->tensor == tensor ? &*it : nullptr;
}

bool Fp8Source::consumed(std::string_view tensor) const noexcept {
  if (std::binary_search(dropped.begin(), dropped.end(), tensor)) return true;
  // The scale of weight X is X + "_scale" or X + "_scale_inv".
  for (std::string_view suffix : {"_scale_inv", "_scale"})
    if (tensor.ends_with(suffix)) {
      const Fp8Weight* w = find(tensor.substr(0, tensor.size() - suffix.size()));
      if (w != nullptr && w->scale == tensor) return true;
    }
  if (tensor.ends_with(".scale")) {  // DeepSeek's own name: X.scale beside X.weight
    const Fp8Weight* w = find(std::string(tensor.substr(0, tensor.size() - 5)) + "weight");
    if (w != nullptr && w->scale == tensor) return true;
  }
  return false;
}

std::string Fp8Source::layouts() const {
  std::set<std::string> seen;
  for (const auto& w : weights) {
    const auto& g = w.grid;
    std::string l = g.layout == fp8::ScaleLayout::BLOCK
                        ? fmt::format("block {}x{}", g.block_rows, g.block_cols)
                        : std::string(fp8::scale_layout_name(g.layout));
    if (g.payload == fp8::Payload::E2M1) l = "FP4 " + l;
    seen.insert(fmt::format("{} ({})", l, dtype_name(g.scale_dtype)));
  }
  std::string out;
  for (const auto& s : seen) out += (out.empty() ? "" : ", ") + s;
  return out;
}

namespace {

/** config.json's `expert_dtype` (top level or under text_config) is "fp4": DeepSeek-V4's packed E2M1 experts. */
bool declares_fp4_experts(const ojson& config) {
  auto is_fp4 = [](const ojson& c) { return c.is_object() && util::ascii_lower(str_of(c, "expert_dtype")) == "fp4"; };
  if (is_fp4(config)) return true;
  auto t = config.is_object() ? config.find("text_config") : config.end();
  return config.is_object() && t != config.end() && is_fp4(*t);
}

/** Packed E2M1 payload candidates: an I8 / U8 / F4 tensor with a scale beside it that can hold E8M0 (F8_E8M0 always;
 * U8 or F32 where the config declares E8M0 scales or FP4 experts). Maps payload -> its scale. */
std::map<std::string_view, const Fp8TensorInfo*> e2m1_payloads(std::span<const Fp8TensorInfo> tensors,
                                                                const std::map<std::string_view, const Fp8TensorInfo*>& by,
                                                                bool e8m0_declared) {
  std::map<std::string_view, const Fp8TensorInfo*> out;
  for (const auto& t : tensors) {
    if (t.dtype != DType::I8 && t.dtype != DType::U8 && t.dtype != DType::F4) continue;
    for (const auto& n : scale_names(t.name, {"_scale_inv", "_scale"}))
      if (auto it = by.find(n); it != by.end()) {
        const DType sd = it->second->dtype;
        if (sd == DType::F8_E8M0 || (e8m0_declared && e8m0_capable(sd, true))) out.emplace(t.name, it->second);
        break;
      }
  }
  return out;
}

/** R4-B7: in a packed FP4 release (`e2m1` non-empty), an I8 / U8 / F4 weight matrix without its E8M0 scale is a
 * payload whose scale was dropped: refused (quantize, verify and doctor all detect through detect_fp8_source), not
 * read as an I8 tensor. */
Status refuse_unscaled_packed(std::span<const Fp8TensorInfo> tensors,
                              const std::map<std::string_view, const Fp8TensorInfo*>& e2m1, const std::string& decl) {
  if (e2m1.empty()) return {};
  for (const auto& t : tensors)
    if ((t.dtype == DType::I8 || t.dtype == DType::U8 || t.dtype == DType::F4) && t.shape.size() >= 2 &&
        t.name.ends_with(".weight") && !e2m1.count(t.name))
      return make_error(Errc::BAD_INPUT,
                        "packed FP4 tensor '{}' ({} {}) has no scale: expected '{}_scale_inv' (or '{}scale') beside "
                        "it, one E8M0 scale per 32 elements of a row as the other {} packed FP4 weights have ({}); "
                        "it cannot be dequantized without it (a dropped or renamed scale)",
                        t.name, dtype_name(t.dtype), format_shape(t.shape), t.name,
                        t.name.substr(0, t.name.size() - 6), e2m1.size(), decl);
  return {};
}

}  // namespace

Result<std::optional<Fp8Source>> detect_fp8_source(const ojson& config, const ojson* hfq,
                                                   std::span<const Fp8TensorInfo> tensors) {
  FP4FORGE_ASSIGN_OR_RETURN(std::optional<Declared> declared, read_declared(config, hfq));
  std::map<std::string_view, const Fp8TensorInfo*> by_name;
  bool any_fp8 = false;
  for (const auto& t : tensors) {
    by_name.emplace(t.name, &t);
    if (t.dtype == DType::F8_E5M2 || t.dtype == DType::F8_E4M3FNUZ || t.dtype == DType::F8_E5M2FNUZ)
      return already_quantized(fmt::format("tensor '{}' is {}; FP8 E4M3 (F8_E4M3) is read", t.name, dtype_name(t.dtype)));
    any_fp8 = any_fp8 || is_payload(t);
  }
  const bool fp4_experts = declares_fp4_experts(config);
  const bool e8m0_declared = fp4_experts || (declared && declared->ue8m0);
  const auto e2m1 = e2m1_payloads(tensors, by_name, e8m0_declared);
  if (!e2m1.empty() && declared && declared->dialect != Fp8Dialect::NATIVE)
    return make_error(Errc::BAD_INPUT,
                      "tensor '{}' is a packed FP4 (E2M1) payload with E8M0 scales, but the config declares {}; packed FP4 "
                      "experts are read with quant_method fp8 (DeepSeek-V4)",
                      e2m1.begin()->first, fp8_dialect_name(declared->dialect));
  any_fp8 = any_fp8 || !e2m1.empty();
  if (!any_fp8 && !declared) return std::optional<Fp8Source>{};
  Fp8Source src;
  if (!declared) {
    // FP8 tensors with no quantization config: read by the scale names (a re-save that lost the config).
    Declared d;
    d.what = "no quantization config";
    for (const auto& t : tensors)
      if (is_payload(t) && !by_name.count(t.name + "_scale_inv") && by_name.count(t.name + "_scale"))
        d.dialect = Fp8Dialect::COMPRESSED_TENSORS;
    declared = d;
    src.warnings.push_back(fmt::format(
        "config.json declares no quantization, but the checkpoint holds {} tensors; read as FP8 by their scale "
        "tensors ({})",
        e2m1.empty() ? "F8_E4M3" : "F8_E4M3 or packed FP4", d.dialect == Fp8Dialect::NATIVE ? "X_scale_inv" : "X_scale"));
  }
  const Declared& d = *declared;
  src.dialect = d.dialect;
  const std::string decl = fmt::format("{}: {}", fp8_dialect_name(d.dialect), d.what);  // for messages
  if (!any_fp8)
    return make_error(Errc::BAD_INPUT,
                      "config.json declares FP8 weights ({}) but no tensor is F8_E4M3; remove quantization_config if the "
                      "weights are unquantized",
                      decl);
  if (fp4_experts && e2m1.empty())
    src.warnings.push_back("config.json declares expert_dtype fp4, but no tensor is a packed FP4 payload with an E8M0 "
                           "scale beside it; experts are read as they are stored");
  FP4FORGE_TRY(refuse_unscaled_packed(tensors, e2m1, decl));
  if (hfq != nullptr) src.side_files.push_back("hf_quant_config.json");
  const std::vector<std::string> suffixes = d.dialect == Fp8Dialect::NATIVE
                                                ? std::vector<std::string>{"_scale_inv", "_scale"}
                                                : std::vector<std::string>{"_scale", "_scale_inv"};
  std::set<std::string_view> scales;
  for (const auto& t : tensors) {
    const auto fp4 = e2m1.find(t.name);
    const bool packed = fp4 != e2m1.end();
    if (!is_payload(t) && !packed) continue;
    const char* kind = packed ? "packed FP4" : "FP8";
    if (t.shape.size() < 2)
      return make_error(Errc::BAD_INPUT, "{} tensor '{}' has shape {}; expected a weight matrix [.., N, K]", kind, t.name,
                        format_shape(t.shape));
    const Fp8TensorInfo* s = packed ? fp4->second : nullptr;
    if (!packed)
      for (const auto& n : scale_names(t.name, suffixes))
        if (auto it = by_name.find(n); it != by_name.end()) {
          s = it->second;
          break;
        }
    if (s == nullptr)
      return make_error(Errc::BAD_INPUT,
                        "FP8 tensor '{}' has no scale: expected '{}{}' beside it ({}); the weights cannot be dequantized "
                        "without it",
                        t.name, t.name, suffixes[0], decl);
    const bool float_scale = is_source_dtype(s->dtype);
    if (!float_scale && s->dtype != DType::F8_E8M0 && !(s->dtype == DType::U8 && e8m0_declared))
      return make_error(Errc::BAD_INPUT, "{} scale '{}' is {}; expected F32, BF16, F16 or F8_E8M0{}", kind, s->name,
                        dtype_name(s->dtype), e8m0_declared ? " (or U8 E8M0 exponents)" : "");
    // The expansion: a packed E2M1 payload of I8 / U8 bytes holds two elements per byte (F4 counts elements).
    std::vector<std::uint64_t> shape = t.shape;
    if (packed && t.dtype != DType::F4) shape.back() *= 2;
    // E2M1 scales cover 32 elements of a row (the MX block; transformers derives [1, 32] from the grid).
    const std::pair<std::uint64_t, std::uint64_t> block = packed ? std::pair<std::uint64_t, std::uint64_t>{1, 32} : d.block;
    auto fits = fitting_layouts(shape, s->shape, block);
    if (packed) std::erase_if(fits, [](fp8::ScaleLayout l) { return l != fp8::ScaleLayout::BLOCK; });
    if (fits.empty() && packed)
      return make_error(Errc::BAD_INPUT,
                        "packed FP4 scale '{}' has shape {} for weight {} (expanded {}, {}); expected one scale per 32 "
                        "elements of a row, [.., N, ceil(K/32)]",
                        s->name, format_shape(s->shape), format_shape(t.shape), format_shape(shape), decl);
    if (fits.empty())
      return make_error(Errc::BAD_INPUT,
                        "FP8 scale '{}' has shape {} for weight {} ({}); expected [1] per tensor, [N, 1] per channel or "
                        "[ceil(N/{}), ceil(K/{})] per block",
                        s->name, format_shape(s->shape), format_shape(t.shape), decl, d.block.first, d.block.second);
    // Prefer a declared layout; shapes where several fit (a matrix within one block) dequantize alike.
    fp8::ScaleLayout layout = fits.front();
    bool declared_fit = d.layouts.empty() || packed;
    for (auto l : fits)
      if (d.layouts.count(l)) {
        layout = l;
        declared_fit = true;
        break;
      }
    if (!declared_fit)
      return make_error(Errc::BAD_INPUT,
                        "FP8 scale '{}' has shape {}: a per-{} scale for weight {}, but the config declares {}; expected "
                        "the declared layout",
                        s->name, format_shape(s->shape), fp8::scale_layout_name(layout), format_shape(t.shape), decl);
    Fp8Weight w;
    w.tensor = t.name;
    w.scale = s->name;
    w.shape = shape;
    w.stored_shape = t.shape;
    w.stored_dtype = t.dtype;
    w.grid.layout = layout;
    w.grid.payload = packed ? fp8::Payload::E2M1 : fp8::Payload::E4M3;
    w.grid.rows = shape[shape.size() - 2];
    w.grid.cols = shape.back();
    w.grid.block_rows = block.first;
    w.grid.block_cols = block.second;
    w.grid.scale_dtype = s->dtype;
    scales.insert(s->name);
    src.weights.push_back(std::move(w));
  }
  for (const auto& t : tensors) {
    if (scales.count(t.name)) continue;
    if (dropped_leaf(t.name)) {
      src.dropped.push_back(t.name);
      continue;
    }
    if (t.name.ends_with(".weight_scale") || t.name.ends_with("_scale_inv") ||
        (t.dtype == DType::F8_E8M0 && t.name.ends_with(".scale")))
      return make_error(Errc::BAD_INPUT,
                        "scale tensor '{}' belongs to no FP8 weight (its weight is missing or not F8_E4M3 / packed FP4); "
                        "expected every scale beside its weight",
                        t.name);
  }
  std::sort(src.weights.begin(), src.weights.end(), [](const auto& a, const auto& b) { return a.tensor < b.tensor; });
  std::sort(src.dropped.begin(), src.dropped.end());
  const auto n_fp4 = static_cast<std::size_t>(std::count_if(src.weights.begin(), src.weights.end(), [](const Fp8Weight& w) {
    return w.grid.payload == fp8::Payload::E2M1;
  }));
  src.label = fmt::format("{} ({}): {} FP8 weights{}, scales {}", fp8_dialect_name(src.dialect), d.what,
                          src.weights.size() - n_fp4, n_fp4 ? fmt::format(" + {} packed FP4", n_fp4) : std::string(),
                          src.layouts());
  return std::optional<Fp8Source>(std::move(src));
}

std::optional<std::string> foreign_quantization(const ojson& config, const ojson* hfq) {
  const ojson* qc = quant_config_of(config);
  std::string method = qc != nullptr ? util::ascii_lower(str_of(*qc, "quant_method")) : std::string();
  std::string algo;
  if (method == "modelopt" || (qc == nullptr && hfq != nullptr && hfq->is_object())) {
    if (qc != nullptr) algo = str_of(*qc, "quant_algo");
    if (algo.empty() && hfq != nullptr && hfq->is_object())
      if (auto q = hfq->find("quantization"); q != hfq->end()) algo = str_of(*q, "quant_algo");
    if (algo.empty() || modelopt_fp8_algo(util::ascii_lower(algo))) return std::nullopt;  // an FP8 release (or its own error)
    return fmt::format("ModelOpt {} (quant_algo)", capped(algo));
  }
  if (method.empty() || method == "fp8" || method == "compressed-tensors" || method == "compressed_tensors")
    return std::nullopt;
  if (auto k = kForeignMethods.find(method); k != kForeignMethods.end())
    return fmt::format("quant_method '{}': {}", method, k->second);
  return fmt::format("quant_method '{}'", capped(method));
}

Result<std::optional<ojson>> read_hf_quant_config(const Checkpoint& ckpt) {
  const auto& files = ckpt.other_files();
  if (std::find(files.begin(), files.end(), "hf_quant_config.json") == files.end()) return std::optional<ojson>{};
  // A link out of the checkpoint is not read (the shard confinement rule); quantize does not copy it either.
  if (!ckpt.escapes("hf_quant_config.json").empty()) return std::optional<ojson>{};
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(ckpt.dir() / "hf_quant_config.json"));
  FP4FORGE_ASSIGN_OR_RETURN(ojson j, parse_json_bounded(text, "hf_quant_config.json"));
  return std::optional<ojson>(std::move(j));
}

Result<std::optional<Fp8Source>> read_fp8_source(const Checkpoint& ckpt) {
  std::vector<Fp8TensorInfo> ts;
  ts.reserve(ckpt.tensors().size());
  for (const auto& t : ckpt.tensors()) ts.push_back({t.name, t.info->dtype, t.info->shape});
  FP4FORGE_ASSIGN_OR_RETURN(std::optional<ojson> hfq, read_hf_quant_config(ckpt));
  return detect_fp8_source(ckpt.config(), hfq ? &*hfq : nullptr, ts);
}

ojson fp8_source_json(const Fp8Source& s) {
  ojson j = ojson::object();
  j["dialect"] = std::string(fp8_dialect_name(s.dialect));
  j["label"] = s.label;
  std::map<std::tuple<int, int, std::uint64_t, std::uint64_t, int>, std::uint64_t> by;
  std::uint64_t fp4 = 0;
  for (const auto& w : s.weights) {
    const auto& g = w.grid;
    const bool blk = g.layout == fp8::ScaleLayout::BLOCK;
    fp4 += g.payload == fp8::Payload::E2M1 ? 1 : 0;
    ++by[{static_cast<int>(g.payload), static_cast<int>(g.layout), blk ? g.block_rows : 0, blk ? g.block_cols : 0,
          static_cast<int>(g.scale_dtype)}];
  }
  j["fp8_weights"] = s.weights.size() - fp4;
  j["fp4_weights"] = fp4;
  ojson layouts = ojson::array();
  for (const auto& [k, n] : by) {
    const auto& [pl, l, br, bc, sd] = k;
    ojson e = ojson::object();
    e["payload"] = static_cast<fp8::Payload>(pl) == fp8::Payload::E2M1 ? "e2m1" : "e4m3";
    e["layout"] = fp8::scale_layout_name(static_cast<fp8::ScaleLayout>(l));
    e["block"] = br != 0 ? ojson::array({br, bc}) : ojson(nullptr);
    e["scale_dtype"] = std::string(dtype_name(static_cast<DType>(sd)));
    e["weights"] = n;
    layouts.push_back(std::move(e));
  }
  j["layouts"] = std::move(layouts);
  j["dropped"] = s.dropped;
  j["side_files"] = s.side_files;
  j["warnings"] = s.warnings;
  return j;
}

ojson expanded_config(const ojson& config) {
  ojson c = config;
  if (!c.is_object()) return c;
  c.erase("quantization_config");
  c.erase("compression_config");
  c.erase("expert_dtype");
  if (auto t = c.find("text_config"); t != c.end() && t->is_object()) {
    t->erase("quantization_config");
    t->erase("expert_dtype");
  }
  return c;
}

// ---- reading -------------------------------------------------------------------------------------

namespace {

struct Fp8Data {
  const std::byte* payload = nullptr;
  const std::byte* scales = nullptr;
};

Result<Fp8Data> data_of(const Checkpoint& ck, const Fp8Weight& w) {
  const TensorRef* p = ck.find(w.tensor);
  const TensorRef* s = ck.find(w.scale);
  if (p == nullptr || s == nullptr || p->info->dtype != w.stored_dtype || p->info->shape != w.stored_shape ||
      s->info->dtype != w.grid.scale_dtype || st::shape_numel(s->info->shape) != st::shape_numel(Shape(w.shape.begin(), w.shape.end() - 2)) * w.grid.scales_per_matrix())
    return make_error(Errc::INTERNAL, "FP8 weight '{}' does not match the checkpoint", w.tensor);
  return Fp8Data{ck.data(*p).data(), ck.data(*s).data()};
}

Error non_finite(const Fp8Weight& w, std::uint64_t flat) {
  const std::uint64_t cols = w.grid.cols, rows = w.grid.rows;
  const std::uint64_t m = flat / (rows * cols), r = flat / cols % rows, c = flat % cols;
  return make_error(Errc::BAD_INPUT,
                    "FP8 weight '{}' element {}[{}, {}] dequantizes to NaN or infinity (a NaN code or a non-finite "
                    "scale in '{}'); expected finite weights",
                    w.tensor, w.shape.size() > 2 ? fmt::format("{} ", m) : std::string(), r, c, w.scale);
}

}  // namespace

Status dequant_elements(const Checkpoint& ck, const Fp8Weight& w, std::uint64_t begin, std::uint64_t count,
                        std::uint16_t* out) {
  FP4FORGE_ASSIGN_OR_RETURN(Fp8Data d, data_of(ck, w));
  if (begin + count > st::shape_numel(w.shape)) return make_error(Errc::INTERNAL, "FP8 weight '{}': range past the end", w.tensor);
  const std::uint64_t bad = fp8::dequant_range(d.payload, d.scales, w.grid, begin, count, out);
  if (bad != fp8::kAllFinite) return non_finite(w, bad);
  return {};
}

Status scan_fp8_values(const Checkpoint& ck, const Fp8Source& src) {
  constexpr std::uint64_t kChunk = 1u << 20;
  std::vector<std::uint16_t> buf(kChunk);
  for (const Fp8Weight& w : src.weights) {
    const std::uint64_t n = st::shape_numel(w.shape);
    for (std::uint64_t at = 0; at < n; at += kChunk)
      FP4FORGE_TRY(dequant_elements(ck, w, at, std::min(kChunk, n - at), buf.data()));
  }
  return {};
}

namespace {

/** R4-B11: every scale finite and > 0. compressed-tensors replaces a zero scale by eps and never writes a negative
 * one; transformers' FineGrainedFP8 clamps the amax first; fp4forge's verify rejects such a scale in an output. */
Status check_scale_values(const Checkpoint& ck, const Fp8Weight& w) {
  const TensorRef* t = ck.find(w.scale);
  if (t == nullptr || t->info->dtype != w.grid.scale_dtype)
    return make_error(Errc::INTERNAL, "FP8 scale '{}' does not match the checkpoint", w.scale);
  const std::span<const std::byte> d = ck.data(*t);
  const std::uint64_t n = t->info->numel();
  if (d.size() < n * (dtype_bits(t->info->dtype) / 8))
    return make_error(Errc::INTERNAL, "FP8 scale '{}' is shorter than its shape", w.scale);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float v = fp8::scale_value(d.data(), i, t->info->dtype);
    if (std::isfinite(v) && v > 0.0f) continue;
    const char* what = std::isnan(v) ? "NaN" : std::isinf(v) ? "infinite" : v == 0.0f ? "zero" : "negative";
    return make_error(Errc::BAD_INPUT,
                      "FP8 scale '{}' element {} is {} ({}); expected finite scales > 0: every weight of its {} "
                      "dequantizes to {} (compressed-tensors replaces a zero scale by eps and never writes a negative "
                      "one); a corrupt or hand-edited scale, re-export the release",
                      w.scale, format_index(t->info->shape, i), what, v,
                      w.grid.layout == fp8::ScaleLayout::TENSOR    ? "tensor"
                      : w.grid.layout == fp8::ScaleLayout::CHANNEL ? "row"
                                                                   : "block",
                      std::isnan(v) || std::isinf(v) ? "NaN or infinity" : v == 0.0f ? "zero" : "its negation");
  }
  return {};
}

/** R4-B7: a payload with leading dimensions beside routed experts must be a fused expert tensor fp4forge reads (the
 * storage rule quantize's planner refuses otherwise: "not a storage form fp4forge reads as experts"). */
Status check_storage(const Checkpoint& ck, const Fp8Source& src, const ModelInfo& info) {
  std::vector<std::vector<std::uint64_t>> shapes;  // the expansion's shapes, kept alive for the NamedShape spans
  std::vector<std::string_view> names;
  for (const auto& t : ck.tensors()) {
    if (src.consumed(t.name)) continue;
    const Fp8Weight* w = src.find(t.name);
    names.push_back(t.name);
    shapes.push_back(w != nullptr ? w->shape : t.info->shape);
  }
  std::vector<NamedShape> ts;
  for (std::size_t i = 0; i < names.size(); ++i) ts.push_back({names[i], shapes[i]});
  const std::vector<ExpertBlock> blocks = find_expert_blocks(ts, info);
  std::set<std::string> fused;
  for (const auto& b : blocks)
    for (const auto& n : b.stored()) fused.insert(n);
  for (const Fp8Weight& w : src.weights) {
    if (w.shape.size() <= 2 || fused.count(w.tensor)) continue;
    for (const auto& b : blocks)
      if (w.tensor.starts_with(b.key + "."))
        return make_error(Errc::BAD_INPUT,
                          "{} tensor '{}' {} sits beside the experts of '{}' but is not a storage form fp4forge reads "
                          "as experts (the block's experts are {}); expected [N, K] per expert or a fused experts "
                          "stack: a damaged or hand-edited export",
                          w.grid.payload == fp8::Payload::E2M1 ? "packed FP4" : "FP8", w.tensor,
                          format_shape(w.stored_shape), b.key,
                          b.storage == ExpertStorage::PER_EXPERT ? "stored per expert" : "fused");
  }
  return {};
}

}  // namespace

Status check_fp8_source(const Checkpoint& ck, const Fp8Source& src, const ModelInfo& info) {
  FP4FORGE_TRY(check_storage(ck, src, info));
  for (const Fp8Weight& w : src.weights) FP4FORGE_TRY(check_scale_values(ck, w));
  return {};
}

Status dequant_slice_rows(const Checkpoint& ck, const Fp8Weight& w, const MatrixSlice& s, std::uint64_t r0,
                          std::uint64_t r1, std::uint16_t* out) {
  FP4FORGE_ASSIGN_OR_RETURN(Fp8Data d, data_of(ck, w));
  const std::uint64_t total = st::shape_numel(w.shape);
  if (s.col_stride == 1) {  // each slice row is a run of the tensor
    for (std::uint64_t r = r0; r < r1; ++r) {
      const std::uint64_t at = s.offset + r * s.row_stride;
      if (at + s.cols > total) return make_error(Errc::INTERNAL, "FP8 weight '{}': slice past the end", w.tensor);
      const std::uint64_t bad = fp8::dequant_range(d.payload, d.scales, w.grid, at, s.cols, out + (r - r0) * s.cols);
      if (bad != fp8::kAllFinite) return non_finite(w, bad);
    }
    return {};
  }
  const auto* codes = reinterpret_cast<const std::uint8_t*>(d.payload);
  const bool e2m1 = w.grid.payload == fp8::Payload::E2M1;
  for (std::uint64_t r = r0; r < r1; ++r)
    for (std::uint64_t c = 0; c < s.cols; ++c) {
      const std::uint64_t at = s.offset + r * s.row_stride + c * s.col_stride;
      if (at >= total) return make_error(Errc::INTERNAL, "FP8 weight '{}': slice past the end", w.tensor);
      const float sc = fp8::scale_value(d.scales, w.grid.scale_index(at), w.grid.scale_dtype);
      const std::uint16_t v =
          e2m1 ? fp8::dequant_e2m1_bf16((at & 1u) != 0 ? codes[at >> 1] >> 4 : codes[at >> 1] & 15u, sc)
               : fp8::dequant_bf16(codes[at], sc, w.grid.scale_dtype);
      if ((v & 0x7F80u) == 0x7F80u) return non_finite(w, at);
      out[(r - r0) * s.cols + c] = v;
    }
  return {};
}

}  // namespace fp4forge
