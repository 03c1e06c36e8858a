#include "fp4forge/verify/verify.h"
#include "fp4forge/model/structure.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/experts.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/tensor_role.h"
#include "fp4forge/verify/diff.h"
#include "fp4forge/verify/quality.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::array<std::string_view, 8> kExtraQuantParams{
    "weight_zero_point", "weight_shape", "weight_g_idx", "input_scale",
    "weight_scale_inv",  "weight_scale_2", "output_scale", "input_zero_point"};
constexpr std::array<std::string_view, 4> kKvScales{"k_scale", "v_scale", "q_scale", "prob_scale"};

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}
using util::ends_with;


// ---- findings collection: one finding per (kind, family), tensors merged -------------------------

struct Raw {
  std::string kind;
  Severity sev;
  std::string family;  // merge key
  std::string message;
  std::vector<std::string> tensors;
  std::string key, expected, actual, hint;
};

class Sink {
 public:
  explicit Sink(std::size_t max_listed) : max_listed_(max_listed) {}
  void add(Raw r) {
    const std::string k = r.kind + '\x1f' + std::string(severity_name(r.sev)) + '\x1f' + r.family;
    auto it = index_.find(k);
    if (it == index_.end()) {
      index_.emplace(k, items_.size());
      items_.push_back({std::move(r), 1});
      return;
    }
    Item& item = items_[it->second];
    ++item.count;
    for (auto& t : r.tensors) item.raw.tensors.push_back(std::move(t));
  }
  std::vector<Finding> take() {
    std::vector<Finding> out;
    out.reserve(items_.size());
    for (auto& [r, count] : items_) {
      Finding f;
      f.kind = r.kind;
      f.severity = r.sev;
      f.message = r.message;
      if (count > 1) f.message += fmt::format(" (and {} more like it in {})", count - 1, r.family);
      std::sort(r.tensors.begin(), r.tensors.end());
      r.tensors.erase(std::unique(r.tensors.begin(), r.tensors.end()), r.tensors.end());
      if (r.tensors.size() > max_listed_) {
        f.message += fmt::format(" [{} tensors, first {} listed]", r.tensors.size(), max_listed_);
        r.tensors.resize(max_listed_);
      }
      f.tensors = std::move(r.tensors);
      f.key = r.key;
      f.expected = r.expected;
      f.actual = r.actual;
      f.hint = r.hint;
      out.push_back(std::move(f));
    }
    std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
      return static_cast<int>(a.severity) < static_cast<int>(b.severity);
    });
    return out;
  }

 private:
  struct Item {
    Raw raw;
    std::size_t count;
  };
  std::size_t max_listed_;
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

// ---- modules -------------------------------------------------------------------------------------

/** Every module parameter verify looks at: what any scheme writes, the plain weight, and the other
 * compressed-tensors parameters (extras unless the scheme writes them). */
constexpr std::array<std::string_view, 6> kSchemeParams{"weight_packed", "weight_scale", "weight_global_scale",
                                                        "weight", "input_global_scale", "weight_shape"};

struct Module {
  std::string name;
  std::map<std::string, const TensorRef*, std::less<>> params;  // by suffix: kSchemeParams and kExtraQuantParams
  const TensorRef* payload = nullptr;   // the scheme's quantized values: weight_packed, or FP8's F8_E4M3 weight
  const TensorRef* scale = nullptr;     // weight_scale
  const TensorRef* gs = nullptr;        // weight_global_scale
  const TensorRef* shape = nullptr;     // weight_shape
  const TensorRef* weight = nullptr;    // a plain `weight` that is not the payload
  const TensorRef* input_gs = nullptr;  // input_global_scale
  std::vector<const TensorRef*> extras;  // parameters the scheme does not write
  std::uint64_t n = 0, k = 0;            // effective [N, K] of a quantized module
  bool valid = false;                    // every member present with the right dtype and shape
  TensorClass cls;
  bool quantized() const noexcept { return payload != nullptr; }
  /** The tensors of a quantized module (every parameter but a plain weight). */
  std::vector<const TensorRef*> members() const {
    std::vector<const TensorRef*> out;
    for (const auto& [suffix, t] : params)
      if (t != weight) out.push_back(t);
    return out;
  }
  const TensorRef* param(std::string_view suffix) const {
    auto it = params.find(suffix);
    return it == params.end() ? nullptr : it->second;
  }
};

/** What a scheme writes per Linear, read off linear_tensors (codec/scheme.h) once. */
struct Layout {
  QuantScheme qs = QuantScheme::NVFP4A16;
  std::string_view payload;             // "weight_packed" or "weight"
  DType payload_dtype = DType::U8;
  std::uint64_t per_payload_col = 1;    // K / columns of the payload
  std::vector<std::string_view> suffixes;  // every tensor it writes, in save order
  std::set<std::string_view> src_dtype;    // members stored in the weight's dtype (FP8, W4A16 scales)
  bool weight_only = true;              // input_activations null (A16)
  std::string word;                     // how messages name it: "NVFP4" (kept), else the preset

  /** A tensor of `suffix` follows the source dtype: any of BF16 / F16 / F32 is right. */
  bool follows_source(std::string_view suffix) const { return src_dtype.count(suffix) > 0; }
  /** "weight_packed U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], ..." */
  std::string describe() const;
};

Layout layout_of(QuantScheme qs) {
  Layout l;
  l.qs = qs;
  constexpr std::uint64_t P = 1u << 20;
  const auto a = linear_tensors(qs, P, P, DType::BF16), b = linear_tensors(qs, P, P, DType::F32);
  for (std::size_t i = 0; i < a.size(); ++i) {
    l.suffixes.push_back(a[i].suffix);
    if (a[i].dtype != b[i].dtype) l.src_dtype.insert(a[i].suffix);
    if (a[i].part == LinearPart::PAYLOAD) {
      l.payload = a[i].suffix;
      l.payload_dtype = a[i].dtype;
      l.per_payload_col = P / a[i].shape[1];
    }
  }
  auto cfg = parse_quant_config(ct_quant_config(qs, {}));
  l.weight_only = cfg.ok() && !cfg->groups.empty() && !cfg->groups.front().input_activations;
  l.word = std::string(scheme_traits(qs).word);
  return l;
}

std::string Layout::describe() const {
  // Symbolic shapes from linear_tensors at a few sizes: P (whole), 2P (which dimension follows N or K),
  // P + 1 (rounded up or down).
  constexpr std::uint64_t P = 1u << 20;
  const auto base = linear_tensors(qs, P, P, DType::BF16);
  const auto n2 = linear_tensors(qs, 2 * P, P, DType::BF16), k2 = linear_tensors(qs, P, 2 * P, DType::BF16);
  const auto n1 = linear_tensors(qs, P + 1, P, DType::BF16), k1 = linear_tensors(qs, P, P + 1, DType::BF16);
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < base.size(); ++i) {
    std::vector<std::string> dims;
    for (std::size_t j = 0; j < base[i].shape.size(); ++j) {
      const std::uint64_t d = base[i].shape[j];
      const bool on_n = n2[i].shape[j] != d, on_k = k2[i].shape[j] != d;
      if (!on_n && !on_k) {
        dims.push_back(fmt::format("{}", d));
        continue;
      }
      const char* var = on_n ? "N" : "K";
      const std::uint64_t x = P / d;
      const bool ceil = (on_n ? n1 : k1)[i].shape[j] == d + 1 && x > 1;
      dims.push_back(x == 1 ? std::string(var) : ceil ? fmt::format("ceil({}/{})", var, x) : fmt::format("{}/{}", var, x));
    }
    parts.push_back(fmt::format("{} {} [{}]", base[i].suffix,
                                follows_source(base[i].suffix) ? "(weight dtype)" : dtype_name(base[i].dtype),
                                fmt::join(dims, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::pair<std::string, std::string> split_name(std::string_view name) {
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return {std::string(), std::string(name)};
  return {std::string(name.substr(0, dot)), std::string(name.substr(dot + 1))};
}

std::optional<float> read_f32_scalar(const Checkpoint& q, const TensorRef* t) {
  if (!t || t->info->dtype != DType::F32 || t->info->nbytes() != 4) return std::nullopt;
  auto d = q.data(*t);
  float v;
  std::memcpy(&v, d.data(), 4);
  return v;
}

std::uint32_t f32_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

bool is_float_dtype(DType t) {
  return t == DType::BF16 || t == DType::F16 || t == DType::F32 || t == DType::F64;
}

/** Element `i` of a BF16/F16/F32/F64 buffer as double. */
double load_elem(const std::byte* p, DType t, std::uint64_t i) {
  switch (t) {
    case DType::BF16: {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return half::bf16_to_float(h);
    }
    case DType::F16: {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return half::f16_to_float(h);
    }
    case DType::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    default: return 0;
  }
}

/** Count of non-finite elements and the first index (bit tests, no conversion). */
std::pair<std::uint64_t, std::uint64_t> count_nonfinite(std::span<const std::byte> d, DType t) {
  std::uint64_t n = 0, first = 0;
  auto note = [&](std::uint64_t i) {
    if (n++ == 0) first = i;
  };
  if (t == DType::BF16 || t == DType::F16) {
    const std::uint16_t mask = t == DType::BF16 ? 0x7F80 : 0x7C00;
    const std::uint64_t cnt = d.size() / 2;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint16_t h;
      std::memcpy(&h, d.data() + 2 * i, 2);
      if ((h & mask) == mask) note(i);
    }
  } else if (t == DType::F32) {
    const std::uint64_t cnt = d.size() / 4;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint32_t b;
      std::memcpy(&b, d.data() + 4 * i, 4);
      if ((b & 0x7F800000u) == 0x7F800000u) note(i);
    }
  } else if (t == DType::F64) {
    const std::uint64_t cnt = d.size() / 8;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint64_t b;
      std::memcpy(&b, d.data() + 8 * i, 8);
      if ((b & 0x7FF0000000000000ull) == 0x7FF0000000000000ull) note(i);
    }
  }
  return {n, first};
}

std::string index_str(const std::vector<std::uint64_t>& shape, std::uint64_t flat) {
  if (shape.empty()) return "[]";
  std::vector<std::uint64_t> idx(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::uint64_t s = shape[i] ? shape[i] : 1;
    idx[i] = flat % s;
    flat /= s;
  }
  return format_shape(idx);
}


// ---- geometry ------------------------------------------------------------------------------------

struct Geometry {
  const ModelInfo& info;
  const Json& text;

  std::int64_t get(std::string_view key) const {
    if (!text.is_object()) return 0;
    auto it = text.find(key);
    return it != text.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
  }
  bool flag(std::string_view key) const {
    if (!text.is_object()) return false;
    auto it = text.find(key);
    return it != text.end() && it->is_boolean() && it->get<bool>();
  }

  /** Expected [rows, cols] of a 2-D weight of role `base` in a layer, or nullopt when unknown. */
  std::optional<std::pair<std::int64_t, std::int64_t>> expect(Role base, const TensorClass& c) const {
    const std::int64_t H = info.hidden_size, A = info.num_heads;
    if (H <= 0) return std::nullopt;
    const bool full = c.layer_type == "full_attention";
    std::int64_t d = info.head_dim > 0 ? info.head_dim : (A > 0 ? H / A : 0);
    std::int64_t kv = info.num_kv_heads > 0 ? info.num_kv_heads : A;
    std::int64_t q_mult = 1;
    std::int64_t I = info.intermediate_size;
    const bool in_stack = c.text_stack && c.layer >= 0 && static_cast<std::size_t>(c.layer) < info.layer_head_dim.size();
    if (in_stack && info.layer_head_dim[static_cast<std::size_t>(c.layer)] > 0) {
      // Effective per-layer geometry (Gemma-4 globals / per_layer_config already applied by ModelInfo).
      d = info.layer_head_dim[static_cast<std::size_t>(c.layer)];
      if (static_cast<std::size_t>(c.layer) < info.layer_kv_heads.size() &&
          info.layer_kv_heads[static_cast<std::size_t>(c.layer)] > 0)
        kv = info.layer_kv_heads[static_cast<std::size_t>(c.layer)];
    } else if (info.family == Family::GEMMA4) {
      if (full && info.global_head_dim > 0) d = info.global_head_dim;
      if (full && info.attention_k_eq_v && info.num_global_kv_heads > 0) kv = info.num_global_kv_heads;
    }
    if (info.family == Family::GEMMA4) {
      const std::int64_t shared = info.num_kv_shared_layers;
      if (shared > 0 && c.layer >= 0 && c.text_stack && c.layer >= info.num_layers - shared &&
          (info.use_double_wide_mlp || flag("use_double_wide_mlp")))
        I *= 2;
    }
    if (info.attn_output_gate) q_mult = 2;
    const std::int64_t Im = info.moe_intermediate_size, Is = info.shared_expert_intermediate_size;
    auto pair = [](std::int64_t r, std::int64_t cc) -> std::optional<std::pair<std::int64_t, std::int64_t>> {
      if (r <= 0 || cc <= 0) return std::nullopt;
      return std::make_pair(r, cc);
    };
    // Multi-head latent attention (DeepSeek-V2/V3): per-head q/k width nope + rope, v width v_head_dim.
    const std::int64_t qk = info.qk_nope_head_dim + info.qk_rope_head_dim, vd = info.v_head_dim;
    if (info.spec().mla || info.kv_lora_rank > 0) {
      switch (base) {
        case Role::ATTN_Q: return A > 0 && qk > 0 ? pair(A * qk, H) : std::nullopt;
        case Role::ATTN_Q_A: return pair(info.q_lora_rank, H);
        case Role::ATTN_Q_B: return A > 0 && qk > 0 ? pair(A * qk, info.q_lora_rank) : std::nullopt;
        case Role::ATTN_KV_A: return pair(info.kv_lora_rank + info.qk_rope_head_dim, H);
        case Role::ATTN_KV_B:
          return A > 0 && info.qk_nope_head_dim > 0 && vd > 0 ? pair(A * (info.qk_nope_head_dim + vd), info.kv_lora_rank)
                                                              : std::nullopt;
        case Role::ATTN_O: return A > 0 && vd > 0 ? pair(H, A * vd) : std::nullopt;
        default: break;
      }
    }
    switch (base) {
      case Role::ATTN_Q: return A > 0 && d > 0 ? pair(A * d * q_mult, H) : std::nullopt;
      case Role::ATTN_QKV: return A > 0 && kv > 0 && d > 0 ? pair((A + 2 * kv) * d, H) : std::nullopt;
      case Role::MLP_GATE_UP: return pair(2 * I, H);
      case Role::SHARED_EXPERT_GATE_UP: return pair(2 * Is, H);
      case Role::ATTN_K:
      case Role::ATTN_V: return kv > 0 && d > 0 ? pair(kv * d, H) : std::nullopt;
      case Role::ATTN_O: return A > 0 && d > 0 ? pair(H, A * d) : std::nullopt;
      case Role::MLP_GATE:
      case Role::MLP_UP: return pair(I, H);
      case Role::MLP_DOWN: return pair(H, I);
      case Role::EXPERT_GATE:
      case Role::EXPERT_UP: return pair(Im, H);
      case Role::EXPERT_DOWN: return pair(H, Im);
      case Role::SHARED_EXPERT_GATE:
      case Role::SHARED_EXPERT_UP: return pair(Is, H);
      case Role::SHARED_EXPERT_DOWN: return pair(H, Is);
      default: return std::nullopt;
    }
  }
};

/** Whether config.json states the geometry of module `c` (verify's shape rules apply): routed experts, and
 * attention / MLP modules directly under an attention or MLP block. A module under another parent (the
 * sparse-attention `indexer`, a numbered sublayer `self_attn.0`) has a geometry of its own. */
bool geometry_stated(const TensorClass& c) {
  switch (c.base_role) {
    case Role::EXPERT_GATE: case Role::EXPERT_UP: case Role::EXPERT_DOWN: return true;
    default: break;
  }
  const std::string_view mod = c.module;
  const std::size_t dot = mod.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view head = mod.substr(0, dot);
  const std::string_view parent = head.substr(head.rfind('.') == std::string_view::npos ? 0 : head.rfind('.') + 1);
  // An attention module under an attention block, an MLP module under an MLP block: a `gate_proj` under
  // `self_attn` (AFMoE's attention output gate) is not the MLP gate the config's intermediate size describes.
  static constexpr std::array<std::string_view, 6> kAttn{"self_attn", "attn",       "attention",
                                                         "self_attention", "cross_attn", "mixer"};
  static constexpr std::array<std::string_view, 11> kMlp{"mlp",         "block_sparse_moe", "moe",           "feed_forward",
                                                         "ffn",         "sparse_moe",       "shared_expert", "shared_experts",
                                                         "shared_mlp",  "mixer",            "linear_attn"};
  const bool attn_role = c.base_role == Role::ATTN_Q || c.base_role == Role::ATTN_K || c.base_role == Role::ATTN_V ||
                         c.base_role == Role::ATTN_O || c.base_role == Role::ATTN_QKV || c.base_role == Role::ATTN_Q_A ||
                         c.base_role == Role::ATTN_Q_B || c.base_role == Role::ATTN_KV_A ||
                         c.base_role == Role::ATTN_KV_B;
  return attn_role ? std::find(kAttn.begin(), kAttn.end(), parent) != kAttn.end()
                   : std::find(kMlp.begin(), kMlp.end(), parent) != kMlp.end();
}

bool is_attention_or_mlp(Role r) {
  switch (r) {
    case Role::ATTN_Q: case Role::ATTN_K: case Role::ATTN_V: case Role::ATTN_O: case Role::ATTN_QKV:
    case Role::ATTN_Q_A: case Role::ATTN_Q_B: case Role::ATTN_KV_A: case Role::ATTN_KV_B:
    case Role::MLP_GATE: case Role::MLP_UP: case Role::MLP_DOWN: case Role::MLP_GATE_UP:
    case Role::SHARED_EXPERT_GATE_UP:
    case Role::EXPERT_GATE: case Role::EXPERT_UP: case Role::EXPERT_DOWN:
    case Role::SHARED_EXPERT_GATE: case Role::SHARED_EXPERT_UP: case Role::SHARED_EXPERT_DOWN:
      return true;
    default: return false;
  }
}

// ---- the structural pass -------------------------------------------------------------------------

struct Structure {
  std::map<std::string, Module> modules;  // by module name
  std::optional<QuantConfig> qc;
  std::optional<IgnoreMatcher> ignore;
  Scheme scheme = Scheme::UNKNOWN;
  Layout layout = layout_of(QuantScheme::NVFP4A16);  // the scheme the tensors are checked against
  // The weights' observer of the config group checked (codec/observer.h): the re-encode proof uses it.
  // observer_known is false for a name fp4forge cannot reproduce (observer_name says which).
  Observer observer = Observer::MINMAX;
  bool observer_known = true;
  std::string observer_name = "memoryless_minmax";
  std::vector<FusedSet> sets;             // R1 + vLLM packed, over quantized and kept Linear-like modules
  std::set<std::string> kept_linear;      // unquantized modules with a 2-D float `weight`
};

constexpr const char* kHintRequant = "re-run `fp4forge quantize` from the unquantized source";

void check_quant_config(const Checkpoint& q, Structure& s, Sink& sink, VerifyStats& st) {
  std::string key = "quantization_config";
  const Json* qcj = find_quant_config(q.config(), &key);
  if (!qcj) {
    sink.add({"quant-config-missing", Severity::ERROR, "", "config.json has no quantization_config: vLLM "
              "loads the checkpoint as unquantized and cannot map weight_packed / weight_scale",
              {}, "quantization_config", "a compressed-tensors quantization_config", "(absent)",
              "the quantizer did not write its config; " + std::string(kHintRequant)});
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
  std::vector<QuantScheme> found;  // the preset of each group that names one, in file order
  std::optional<QuantScheme> nearest;  // without one: the closest preset of the first group (tensors checked as it)
  for (const ConfigGroup& g : c.groups) {
    const SchemeInfo si = detect_scheme(g, c.format);
    const std::string label = scheme_label(g, c.format);
    if (si.scheme == Scheme::NVFP4) s.scheme = Scheme::NVFP4;
    const std::string gkey = fmt::format("{}.config_groups.{}", key, g.name);
    if (auto qs = quant_scheme_of(g, c.format); qs.ok()) {
      if (std::find(found.begin(), found.end(), *qs) == found.end()) found.push_back(*qs);
      const auto mism = scheme_mismatches(*qs, g, c.format);
      if (mism.empty()) continue;
      sink.add({"quant-config-unsupported", Severity::ERROR, gkey,
                fmt::format("{}: scheme is {} ({}), but not exactly the {} preset: {}", gkey, label, si.detail, label,
                            fmt::join(mism, "; ")),
                {}, gkey, fmt::format("the {} preset (docs/schemes.md)", label), fmt::format("{}", fmt::join(mism, "; ")),
                "vLLM picks and builds its kernel from these fields; verify proves the presets as compressed-tensors "
                "writes them"});
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
    if (!nearest) nearest = best;
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
  st.scheme = scheme_labels(c);
  for (const ConfigGroup& g : c.groups) {  // the observer of the first group that names a preset
    auto qs = quant_scheme_of(g, c.format);
    if (!qs.ok() || !g.weights) continue;
    const std::string& name = g.weights->observer;
    const auto o = name.empty() ? std::optional<Observer>(Observer::MINMAX) : observer_from_config(name);
    s.observer_name = name.empty() ? std::string(observer_config_name(Observer::MINMAX)) : name;
    // observer_kwargs change the search (expand, grid, norm, ...): fp4forge reproduces the defaults only.
    s.observer_known = o.has_value() && observer_supported(*qs, *o) && !g.weights->observer_kwargs;
    if (g.weights->observer_kwargs) s.observer_name += " with observer_kwargs";
    if (s.observer_known) s.observer = *o;
    st.observer = s.observer_name;
    break;
  }
  if (!found.empty()) s.layout = layout_of(found.front());
  else if (nearest) s.layout = layout_of(*nearest);
  if (found.size() > 1) {
    std::vector<std::string_view> names;
    for (QuantScheme p : found) names.push_back(quant_scheme_preset(p));
    sink.add({"quant-config-unsupported", Severity::ERROR, "schemes",
              fmt::format("{}.config_groups name {} schemes ({}): verify proves one scheme per checkpoint; the tensors "
                          "are checked as {}",
                          key, found.size(), fmt::join(names, ", "), names.front()),
              {}, key + ".config_groups", "one scheme", fmt::format("{}", fmt::join(names, ", ")),
              "a mixed-precision checkpoint: verify it with another tool, or quantize with one --scheme"});
  }
  if (c.groups.size() > 1) {
    sink.add({"quant-config-multi-group", Severity::WARNING, "",
              fmt::format("{}.config_groups has {} groups; some loaders (TensorRT-LLM PyTorch backend) keep "
                          "only one",
                          key, c.groups.size()),
              {}, key + ".config_groups", "1", fmt::format("{}", c.groups.size()),
              "fp4forge writes a single group (F26)"});
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

void collect_modules(const Checkpoint& q, const ModelInfo& info, Structure& s, Sink& sink, VerifyStats& st,
                     bool kv_cache_scheme) {
  const Layout& L = s.layout;
  const bool nvfp4 = scheme_traits(L.qs).global_scale;
  for (const TensorRef& t : q.tensors()) {
    auto [mod, param] = split_name(t.name);
    if (one_of(std::string_view(param), kSchemeParams) || one_of(std::string_view(param), kExtraQuantParams)) {
      Module& m = s.modules[mod];
      m.name = mod;
      m.params[param] = &t;
    } else if (one_of(std::string_view(param), kKvScales) && !kv_cache_scheme) {
      sink.add({"orphan-scale", Severity::WARNING, family_of(t.name),
                fmt::format("'{}' is a KV-cache scale but quantization_config has no kv_cache_scheme", t.name),
                {t.name}, "quantization_config.kv_cache_scheme", "a kv_cache_scheme", "(none)",
                "a leaked calibration buffer; remove it or declare the KV-cache scheme"});
    }
  }
  const std::set<std::string_view> written(L.suffixes.begin(), L.suffixes.end());
  const std::string expected_layout = L.describe();
  for (auto& [name, m] : s.modules) {
    // The payload: weight_packed (4-bit schemes), or an F8_E4M3 `weight` (FP8).
    if (const TensorRef* p = m.param(L.payload); p && (L.payload != "weight" || p->info->dtype == DType::F8_E4M3))
      m.payload = p;
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
    if (!m.payload) {
      std::vector<std::string> orphans;
      for (const TensorRef* t : m.members()) orphans.push_back(t->name);
      if (!orphans.empty()) {
        const std::string what =
            nvfp4 ? std::string("a weight_packed: scale tensors of a module that is not NVFP4-quantized")
                  : fmt::format("{}: scale tensors of a module that is not {}-quantized",
                                L.payload == "weight" ? "an F8_E4M3 weight" : "a " + std::string(L.payload), L.word);
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
    const DType sdt = m.scale && nvfp4::is_source_dtype(m.scale->info->dtype) ? m.scale->info->dtype : DType::BF16;
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
      const bool dtype_ok = src ? nvfp4::is_source_dtype(t->info->dtype) : t->info->dtype == spec.dtype;
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
  const ShapeRule rule = shape_rule(s.layout.qs);
  if (rule.n_multiple <= 1) return;
  std::map<std::string, const FusedSet*> set_of;
  for (const FusedSet& set : s.sets)
    for (const auto& mem : set.members) set_of[mem] = &set;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized() || !m.valid || m.n % rule.n_multiple == 0) continue;
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
  const Layout& L = s.layout;
  const bool nvfp4 = scheme_traits(L.qs).global_scale;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
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
                          name, format_shape(m.weight->info->shape), as_target(s.layout), payload_text(s.layout)),
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
                          blk, payload_text(s.layout)),
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
                          name, ig.entry(static_cast<std::size_t>(i)), payload_text(s.layout)),
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
    if (quant.size() != set.members.size() || !has_global_scale(s.layout.qs)) continue;
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
    const auto pos = name.find(".experts.");
    if (pos == std::string::npos) continue;
    auto& b = blocks[name.substr(0, pos + 8)];
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

/** NaN/Inf, zero and negative elements of a BF16/F16/F32 scale tensor, with the first index of each. */
struct ScaleScan {
  std::uint64_t nonfinite = 0, zero = 0, negative = 0, first = 0, bad = 0;
};
ScaleScan scan_scales(std::span<const std::byte> d, DType t) {
  ScaleScan r;
  const std::uint64_t es = dtype_bits(t) / 8, cnt = d.size() / es;
  for (std::uint64_t i = 0; i < cnt; ++i) {
    const double v = load_elem(d.data(), t, i);
    if (!std::isfinite(v)) ++r.nonfinite;
    else if (v == 0.0) ++r.zero;
    else if (v < 0.0) ++r.negative;
    else continue;
    if (r.bad++ == 0) r.first = i;
  }
  return r;
}

/** E4M3 weight_scale bytes of NVFP4A16 (as before the other schemes existed). */
void check_nvfp4_scales(const Checkpoint& q, const Module& m, const std::string& fam, Sink& sink, VerifyStats& st) {
  auto d = q.data(*m.scale);
  std::uint64_t nan = 0, neg = 0, first_nan = 0, first_neg = 0;
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    const auto b = static_cast<std::uint8_t>(d[i]);
    if ((b & 0x7F) == 0x7F) {
      if (nan++ == 0) first_nan = i;
    } else if ((b & 0x80) && (b & 0x7F)) {
      if (neg++ == 0) first_neg = i;
    }
  }
  st.scale_bytes_scanned += d.size();
  q.shards()[m.scale->shard].release(*m.scale->info);
  if (nan) {
    sink.add({"scale-nan-byte", Severity::ERROR, fam,
              fmt::format("'{}' has {} E4M3 NaN byte(s) (0x7F/0xFF), first at {}", m.scale->name, nan,
                          index_str(m.scale->info->shape, first_nan)),
              {m.scale->name}, "", "no 0x7F / 0xFF scale byte", fmt::format("{} NaN bytes", nan),
              "an unsaturated cast of a zero or huge group amax (F16); every weight in those groups decodes "
              "to NaN"});
  }
  if (neg) {
    sink.add({"scale-negative", Severity::ERROR, fam,
              fmt::format("'{}' has {} negative E4M3 scale byte(s), first at {}", m.scale->name, neg,
                          index_str(m.scale->info->shape, first_neg)),
              {m.scale->name}, "", "scales >= 0", fmt::format("{} negative", neg),
              "vLLM's Marlin path converts scales assuming they are non-negative"});
  }
}

/** MXFP4A16's E8M0 weight_scale bytes: 0xFF is NaN; 253 and 254 are above anything a finite weight gives. */
void check_e8m0_scales(const Checkpoint& q, const Module& m, const std::string& fam, Sink& sink, VerifyStats& st) {
  auto d = q.data(*m.scale);
  std::uint64_t nan = 0, high = 0, first_nan = 0, first_high = 0;
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    const auto b = static_cast<std::uint8_t>(d[i]);
    if (b == 0xFF) {
      if (nan++ == 0) first_nan = i;
    } else if (b >= 253) {
      if (high++ == 0) first_high = i;
    }
  }
  st.scale_bytes_scanned += d.size();
  q.shards()[m.scale->shard].release(*m.scale->info);
  if (nan) {
    sink.add({"scale-nan-byte", Severity::ERROR, fam,
              fmt::format("'{}' has {} E8M0 NaN byte(s) (0xFF), first at {}", m.scale->name, nan,
                          index_str(m.scale->info->shape, first_nan)),
              {m.scale->name}, "", "no 0xFF scale byte", fmt::format("{} NaN bytes", nan),
              "every weight of those 32-column groups decodes to NaN; upstream never writes 0xFF for finite weights"});
  }
  if (high) {
    sink.add({"scale-out-of-range", Severity::WARNING, fam,
              fmt::format("'{}' has {} E8M0 scale byte(s) of 253 or 254 (scale >= 2^126), first at {}", m.scale->name,
                          high, index_str(m.scale->info->shape, first_high)),
              {m.scale->name}, "", "scale bytes <= 252 (the largest a finite weight gives)",
              fmt::format("{} bytes >= 253", high),
              "values of magnitude >= 2 (254) or >= 4 (253) in those groups dequantize to +-inf; a corrupt byte or "
              "a quantizer other than compressed-tensors"});
  }
}

/** A weight_scale in the weight's dtype (FP8, W4A16): finite and > 0 (upstream writes eps for a zero group). */
void check_float_scales(const Checkpoint& q, const Module& m, const std::string& fam, Sink& sink, VerifyStats& st) {
  if (!nvfp4::is_source_dtype(m.scale->info->dtype)) return;  // quantized-module-incomplete already
  auto d = q.data(*m.scale);
  const ScaleScan r = scan_scales(d, m.scale->info->dtype);
  st.scale_bytes_scanned += d.size();
  q.shards()[m.scale->shard].release(*m.scale->info);
  if (r.bad == 0) return;
  std::vector<std::string> what;
  if (r.nonfinite) what.push_back(fmt::format("{} NaN/Inf", r.nonfinite));
  if (r.zero) what.push_back(fmt::format("{} zero", r.zero));
  if (r.negative) what.push_back(fmt::format("{} negative", r.negative));
  sink.add({"scale-invalid", Severity::ERROR, fam,
            fmt::format("'{}' ({}) has {} scale(s) that are not finite and > 0 ({}), first at {}", m.scale->name,
                        dtype_name(m.scale->info->dtype), r.bad, fmt::join(what, ", "),
                        index_str(m.scale->info->shape, r.first)),
            {m.scale->name}, "", "finite scales > 0", fmt::format("{}", fmt::join(what, ", ")),
            "a corrupt scale: its row, block or group dequantizes to NaN/Inf, zero or flipped values (compressed-tensors "
            "replaces a zero scale by eps, and never writes a negative one)"});
}

/** FP8 weight codes: 0x7F / 0xFF are NaN in float8_e4m3fn (upstream clamps to +-448 first, so never). */
void check_fp8_codes(const Checkpoint& q, const Module& m, const std::string& fam, Sink& sink, VerifyStats& st) {
  if (m.payload->info->dtype != DType::F8_E4M3) return;
  auto d = q.data(*m.payload);
  std::uint64_t nan = 0, first = 0;
  for (std::uint64_t i = 0; i < d.size(); ++i)
    if ((static_cast<std::uint8_t>(d[i]) & 0x7F) == 0x7F && nan++ == 0) first = i;
  st.payload_bytes_scanned += d.size();
  q.shards()[m.payload->shard].release(*m.payload->info);
  if (nan == 0) return;
  sink.add({"weight-nan-code", Severity::ERROR, fam,
            fmt::format("'{}' has {} float8_e4m3fn NaN code(s) (0x7F/0xFF), first at {}", m.payload->name, nan,
                        index_str(m.payload->info->shape, first)),
            {m.payload->name}, "", "no 0x7F / 0xFF weight byte", fmt::format("{} NaN codes", nan),
            "an unclamped cast (compressed-tensors clamps to +-448, so a NaN code never comes from finite weights) or "
            "a corrupt byte; those weights are NaN in every matmul"});
}

void check_values(const Checkpoint& q, const Structure& s, Sink& sink, VerifyStats& st) {
  const QuantScheme qs = s.layout.qs;
  std::set<const TensorRef*> quant_tensors;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    for (const TensorRef* t : m.members()) quant_tensors.insert(t);
    const std::string fam = family_of(name);
    switch (scheme_traits(qs).value_check) {  // the scheme table says how its stored values are checked
      case ValueCheck::E4M3_SCALES:
        if (m.scale && m.scale->info->dtype == DType::F8_E4M3) check_nvfp4_scales(q, m, fam, sink, st);
        break;
      case ValueCheck::E8M0_SCALES:
        if (m.scale && m.scale->info->dtype == DType::U8) check_e8m0_scales(q, m, fam, sink, st);
        break;
      case ValueCheck::FP8_PAYLOAD:
        check_fp8_codes(q, m, fam, sink, st);
        if (m.scale) check_float_scales(q, m, fam, sink, st);
        break;
      case ValueCheck::FLOAT_SCALES:
        if (m.scale) check_float_scales(q, m, fam, sink, st);
        break;
    }
    if (!has_global_scale(qs)) continue;
    if (auto g = read_f32_scalar(q, m.gs); g && (!std::isfinite(*g) || !(*g > 0.0f))) {
      sink.add({"global-scale-invalid", Severity::ERROR, fam,
                fmt::format("'{}' is {}, expected a finite value > 0", m.gs->name, *g), {m.gs->name}, "",
                "finite and > 0", fmt::format("{}", *g),
                "an all-zero or corrupt amax (F15); the module dequantizes to NaN/Inf or zero"});
    }
  }
  // Kept floating tensors: no NaN/Inf.
  for (const TensorRef& t : q.tensors()) {
    if (quant_tensors.count(&t) || !is_float_dtype(t.info->dtype)) continue;
    auto d = q.data(t);
    const auto [n, first] = count_nonfinite(d, t.info->dtype);
    st.kept_values_scanned += t.info->numel();
    q.shards()[t.shard].release(*t.info);
    if (n == 0) continue;
    sink.add({"nonfinite-kept-tensor", Severity::ERROR, family_of(t.name),
              fmt::format("'{}' ({} {}) has {} NaN/Inf value(s), first at {}", t.name, dtype_name(t.info->dtype),
                          format_shape(t.info->shape), n, index_str(t.info->shape, first)),
              {t.name}, "", "finite values", fmt::format("{} non-finite", n),
              "the tensor is corrupt (in the source already, or damaged on copy) (F17)"});
  }
}

void check_geometry(const Checkpoint& q, const ModelInfo& info, const Structure& s, Sink& sink) {
  const Geometry geo{info, text_config(q.config())};
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
    if (!(c.text_stack || c.role == Role::MTP) || !is_attention_or_mlp(c.base_role)) continue;
    // A family outside the registry: its class may transform the config's widths (LFM2 rescales its MLP
    // width, AFMoE gates its attention), so the config does not state the shapes for sure.
    if (info.family == Family::UNKNOWN || !geometry_stated(c)) {
      unchecked.push_back(name);
      continue;
    }
    const auto want = geo.expect(c.base_role, c);
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

// ---- the source comparison ---------------------------------------------------------------------

/** A 2-D source weight: a plain `.weight`, or one expert's part of a fused 3-D tensor. */
struct SourceView {
  const TensorRef* tensor = nullptr;
  std::string label;           // "name" or "name[e, rows a:b]"
  DType dtype = DType::BF16;
  std::uint64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;  // contiguous row-major [rows, cols] (into the mmap, or `owned`)
  std::vector<std::byte> owned;     // transposed copy when the family layout needs it
  const Fp8Weight* fp8 = nullptr;   // an FP8 source weight: expanded to bf16 into `owned` by expand()
  MatrixSlice slice;                // the module's matrix inside `fp8`
};

/** An FP8 source view's bf16 expansion, made just before its comparison (so memory holds one job's). */
Status expand(const Checkpoint& src, SourceView& v) {
  if (v.fp8 == nullptr || v.data != nullptr) return {};
  v.owned.resize(static_cast<std::size_t>(v.rows * v.cols * 2));
  FP4FORGE_TRY(dequant_slice_rows(src, *v.fp8, v.slice, 0, v.rows, reinterpret_cast<std::uint16_t*>(v.owned.data())));
  v.data = v.owned.data();
  return {};
}

/** Frees an expanded view. */
void unexpand(SourceView& v) {
  if (v.fp8 == nullptr) return;
  v.data = nullptr;
  std::vector<std::byte>().swap(v.owned);
}

std::size_t elem_size(DType t) { return dtype_bits(t) / 8; }

/** Resolves the source of quantized module `m` ([n, k]): a plain `.weight`, or one expert's part of a fused
 * 3-D tensor (model/experts.h decides the layout). Error text on failure; `undecided` is set when the
 * source's fused layout cannot be decided (a warning: the module could not be checked). */
std::optional<std::string> resolve_source(const Checkpoint& src, const Fp8Source* fp8,
                                          std::span<const ExpertBlock> blocks, const std::string& module,
                                          std::uint64_t n, std::uint64_t k, SourceView& out, bool& undecided) {
  undecided = false;
  if (const TensorRef* t = src.find(module + ".weight")) {
    const auto& sh = t->info->shape;
    if (sh.size() != 2 || sh[0] != n || sh[1] != k)
      return fmt::format("source '{}' is {}, the quantized module is [{}, {}]", t->name, format_shape(sh), n, k);
    out.tensor = t;
    out.label = t->name;
    out.dtype = t->info->dtype;
    out.rows = n;
    out.cols = k;
    if (const Fp8Weight* w = fp8 ? fp8->find(t->name) : nullptr) {
      out.fp8 = w;
      out.dtype = DType::BF16;
      out.slice = {0, n, k, k, 1};
      return std::nullopt;
    }
    out.data = src.data(*t).data();
    return std::nullopt;
  }
  const ExpertBlock* b = block_of(blocks, module);
  if (b == nullptr || b->storage != ExpertStorage::FUSED) return std::string("no source tensor '" + module + ".weight'");
  if (!b->problem.empty()) {
    undecided = true;
    return b->problem;
  }
  const ExpertPart* p = part_of(blocks, module);
  if (p == nullptr)
    return fmt::format("no source tensor '{}.weight', and the fused experts of '{}' hold no such part", module, b->key);
  const TensorRef* t = src.find(p->tensor);
  if (t == nullptr) return fmt::format("fused source '{}' missing", p->tensor);
  if (p->slice.rows != n || p->slice.cols != k)
    return fmt::format("fused source '{}' {} holds {} as [{}, {}] ({}), the quantized module is [{}, {}]", t->name,
                       format_shape(t->info->shape), module, p->slice.rows, p->slice.cols,
                       orientation_name(b->orientation), n, k);
  out.tensor = t;
  out.dtype = t->info->dtype;
  out.rows = n;
  out.cols = k;
  const std::size_t es = elem_size(t->info->dtype);
  if (const Fp8Weight* w = fp8 ? fp8->find(t->name) : nullptr) {
    out.fp8 = w;
    out.dtype = DType::BF16;
    out.slice = p->slice;
  } else if (p->slice.contiguous()) {
    out.data = src.data(*t).data() + p->slice.offset * es;
  } else {
    out.owned.resize(n * k * es);
    gather_rows(src.data(*t).data(), es, p->slice, 0, n, out.owned.data());
    out.data = out.owned.data();
  }
  out.label = fmt::format("{}[{} of expert {}, {}]", t->name, role_name(p->role), p->expert,
                          orientation_name(b->orientation));
  return std::nullopt;
}

struct Member {
  const Module* mod = nullptr;
  SourceView src;
  float amax = 0;              // max|w|
  float observed_amax = 0;     // max of the searched maxima (a searched observer), else amax
  std::vector<float> maxima;   // a searched observer: each group's searched max (nvfp4_search.h)
  bool ok = false;
};

/** Differences between one stored member and its re-encoding, over the chunks compared so far. */
struct MemberDiff {
  std::string what;              // a dtype/shape difference (the bytes were not compared)
  std::uint64_t elements = 0;    // differing elements
  std::uint64_t first = 0;       // flat index of the first
};

/**
 * A module of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK or W4A16 against its source: re-encoded whole by the
 * scheme's encoder (encode_linear on the best codec path, byte-identical to the scalar reference on every path; in chunks of whole 128-row blocks) and compared byte for byte,
 * every member; dequantized (decode_linear_rows) and its relative RMS error compared with the re-encoding's.
 * A byte difference is a warning (a GPU run or another quantizer differs too, docs/schemes.md); an error
 * far above the reference's is error-outlier. nullopt when the source cannot be encoded.
 */
std::optional<TensorError> compare_reencoded(const Checkpoint& q, const Layout& L, const Module& m,
                                             const SourceView& src, const VerifyOptions& opts, Sink& sink,
                                             VerifyStats& st, ThreadPool& pool, const float* maxima) {
  const std::uint64_t n = m.n, k = m.k;
  const DType dt = src.dtype;
  const std::size_t es = elem_size(dt);
  const auto specs = linear_tensors(L.qs, n, k, dt);
  // The stored tensor of each part (weight_shape was compared with [N, K] by the structural pass).
  std::vector<const TensorRef*> stored(specs.size(), nullptr);
  std::vector<MemberDiff> diffs(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].part == LinearPart::SHAPE) continue;
    stored[i] = m.param(specs[i].suffix);
    if (stored[i] && (stored[i]->info->dtype != specs[i].dtype || stored[i]->info->shape != specs[i].shape))
      diffs[i].what = fmt::format("{} {} where the encoding of the {} source is {} {}", dtype_name(stored[i]->info->dtype),
                                  format_shape(stored[i]->info->shape), dtype_name(dt), dtype_name(specs[i].dtype),
                                  format_shape(specs[i].shape));
  }
  const TensorRef* scale_t = m.scale;
  LinearData have{q.data(*m.payload).data(), q.data(*scale_t).data(), scale_t->info->dtype, 1.0f};
  std::vector<char> row_bad(n, 0);
  const std::uint64_t block = fp8::kBlock;
  const std::uint64_t chunk = ((std::max<std::uint64_t>(1, (1u << 20) / std::max<std::uint64_t>(k, 1)) + block - 1) / block) * block;
  // Row chunks in parallel (whole 128-row blocks); each chunk's differences and sums kept apart and merged
  // in chunk order, so the report is the same for any -j. row_bad is written on disjoint row ranges.
  struct ChunkResult {
    bool ok = true;
    std::vector<MemberDiff> diffs;
    double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
  };
  const std::size_t nchunks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  std::vector<ChunkResult> results(nchunks);
  parallel_for(pool, nchunks, [&](std::size_t c) {
    ChunkResult& cr = results[c];
    cr.diffs.resize(specs.size());
    const std::uint64_t r0 = c * chunk, r1 = std::min(n, r0 + chunk), rows = r1 - r0;
    const nvfp4::WeightView v{src.data + r0 * k * es, dt, rows, k};
    // The config's observer: its searched maxima (these rows' groups), else min-max.
    const std::uint64_t gpr = maxima != nullptr ? k / scheme_traits(L.qs).search_cols : 0;
    auto enc = maxima != nullptr ? encode_linear_maxima(L.qs, v, maxima + r0 * gpr, m.name) : encode_linear(L.qs, v, m.name);
    if (!enc.ok()) {  // refused sources (NaN/Inf) were reported by the amax pass
      cr.ok = false;
      return;
    }
    const auto before = linear_tensors(L.qs, r0, k, dt);  // what rows [0, r0) take of each member
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!stored[i] || !diffs[i].what.empty()) continue;
      const EncodedTensor& e = (*enc)[i];
      const std::size_t tes = dtype_bits(e.dtype) / 8;
      const std::uint64_t off = before[i].bytes();
      const std::byte* have_bytes = q.data(*stored[i]).data() + off;
      if (std::memcmp(have_bytes, e.bytes.data(), e.bytes.size()) == 0) continue;
      const bool per_row = !e.shape.empty() && e.shape[0] == rows;
      const std::uint64_t row_elems = e.shape.size() == 2 ? e.shape[1] : 1;
      for (std::uint64_t j = 0; j < e.bytes.size() / tes; ++j) {
        if (std::memcmp(have_bytes + j * tes, e.bytes.data() + j * tes, tes) == 0) continue;
        if (cr.diffs[i].elements++ == 0) cr.diffs[i].first = off / tes + j;
        const std::uint64_t unit = j / row_elems;
        if (per_row) {
          row_bad[r0 + unit] = 1;
        } else {  // a 128 x 128 block scale: every row of its block
          for (std::uint64_t r = r0 + unit * block; r < std::min(r1, r0 + (unit + 1) * block); ++r) row_bad[r] = 1;
        }
      }
    }
    // Errors against the source: the stored tensors and the re-encoding, dequantized alike.
    thread_local std::vector<float> deq, ref, mm;
    deq.resize(rows * k);
    ref.resize(rows * k);
    decode_linear_rows(L.qs, have, n, k, r0, r1, deq.data());
    const LinearData mine{(*enc)[0].bytes.data(), (*enc)[1].bytes.data(), (*enc)[1].dtype, 1.0f};
    decode_linear_rows(L.qs, mine, rows, k, 0, rows, ref.data());
    // A searched observer: what min-max would have written, for the quality report.
    std::optional<std::vector<EncodedTensor>> minmax;
    if (maxima != nullptr) {
      auto e = encode_linear(L.qs, v, m.name);
      if (e.ok()) {
        minmax = std::move(e).value();
        mm.resize(rows * k);
        const LinearData mmd{(*minmax)[0].bytes.data(), (*minmax)[1].bytes.data(), (*minmax)[1].dtype, 1.0f};
        decode_linear_rows(L.qs, mmd, rows, k, 0, rows, mm.data());
      }
    }
    for (std::uint64_t i = 0; i < rows * k; ++i) {
      const double w = load_elem(src.data, dt, r0 * k + i);
      const double dq = deq[i], rf = ref[i];
      cr.err2 += (dq - w) * (dq - w);
      cr.ref2 += (rf - w) * (rf - w);
      cr.src2 += w * w;
      const double mv = minmax ? mm[i] : rf;
      cr.mm2 += (mv - w) * (mv - w);
    }
  });
  double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
  for (const ChunkResult& cr : results) {
    if (!cr.ok) return std::nullopt;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (cr.diffs[i].elements == 0) continue;
      if (diffs[i].elements == 0) diffs[i].first = cr.diffs[i].first;
      diffs[i].elements += cr.diffs[i].elements;
    }
    err2 += cr.err2;
    ref2 += cr.ref2;
    src2 += cr.src2;
    mm2 += cr.mm2;
  }
  auto rel = [&](double e2) {
    if (src2 > 0) return std::sqrt(e2 / src2);
    return e2 > 0 || std::isnan(e2) ? std::numeric_limits<double>::infinity() : 0.0;
  };
  TensorError te;
  te.module = m.name;
  te.source = src.label;
  te.rows = n;
  te.cols = k;
  te.rel_rms = rel(err2);
  te.ref_rel_rms = rel(ref2);
  te.minmax_rel_rms = rel(mm2);  // min-max's encoding (the reference itself without a searched observer)
  if (std::isnan(te.rel_rms)) te.rel_rms = std::numeric_limits<double>::infinity();  // NaN codes or scales
  te.global_scale = std::numeric_limits<float>::quiet_NaN();
  te.expected_global_scale = std::numeric_limits<float>::quiet_NaN();
  st.reencoded_rows += n;
  std::vector<std::string> details;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!diffs[i].what.empty()) {
      details.push_back(fmt::format("{} is {}", specs[i].suffix, diffs[i].what));
      std::fill(row_bad.begin(), row_bad.end(), 1);
    } else if (diffs[i].elements) {
      std::uint64_t total = 1;
      for (auto d : specs[i].shape) total *= d;
      details.push_back(fmt::format("{}: {} of {} elements differ, first at {}", specs[i].suffix, diffs[i].elements,
                                    total, index_str(specs[i].shape, diffs[i].first)));
    }
  }
  if (!details.empty()) {
    const auto bad = static_cast<std::uint64_t>(std::count(row_bad.begin(), row_bad.end(), 1));
    st.reencode_mismatched_rows += bad;
    std::vector<std::string> ts;
    for (const TensorRef* t : stored)
      if (t) ts.push_back(t->name);
    sink.add({"reencode-mismatch", Severity::WARNING, family_of(m.name),
              fmt::format("'{}': {} of {} rows differ from the {} reference encoding of the source ({})", m.name, bad,
                          n, L.word, fmt::join(details, "; ")),
              ts, "", fmt::format("byte-identical to compressed-tensors 0.18's {} (docs/schemes.md)", L.word),
              fmt::format("{}", fmt::join(details, "; ")),
              "another quantizer (GPTQ, an MSE observer), an upstream GPU run of an F16/F32 source (docs/schemes.md, "
              "'CPU and GPU differ upstream'), or corrupted bytes; error-outlier tells whether the values are far off"});
  }
  const double limit = std::max(opts.outlier_factor * te.ref_rel_rms, opts.outlier_floor);
  if (!(te.rel_rms <= limit)) {
    std::vector<std::string> ts;
    for (const TensorRef* t : stored)
      if (t) ts.push_back(t->name);
    sink.add({"error-outlier", Severity::ERROR, family_of(m.name),
              fmt::format("'{}' relative RMS error vs source is {:.4g}, the reference {} encoding of the same source "
                          "gives {:.4g} (limit {:.4g})",
                          m.name, te.rel_rms, L.word, te.ref_rel_rms, limit),
              ts, "", fmt::format("<= {:.4g}", limit), fmt::format("{:.4g}", te.rel_rms),
              "corrupt scales or codes, or a tensor quantized from other data"});
  }
  return te;
}

void compare_against(const Checkpoint& q, const Checkpoint& src, const Fp8Source* fp8, const ModelInfo& info,
                     const Structure& s, const VerifyOptions& opts, Sink& sink, VerifyStats& st) {
  st.against = true;
  // The config's observer decides the reference encoding (a searched one: its search, per member).
  const std::optional<SearchSpec> search = s.observer_known ? search_spec(s.observer) : std::nullopt;
  ThreadPool pool(opts.jobs);  // the search and the row chunks of each module
  if (!s.observer_known)
    sink.add({"observer-unknown", Severity::WARNING, "observer",
              fmt::format("the weights' observer is \"{}\", which fp4forge cannot reproduce: the global-scale check and "
                          "the re-encode proof were skipped; errors are compared with a min-max encoding",
                          s.observer_name),
              {}, "quantization_config.config_groups.*.weights.observer",
              "memoryless_minmax, nvfp4_expanded_mse or memoryless_mse (docs/schemes.md#observers)", s.observer_name,
              "a calibrated or custom observer (GPTQ, imatrix, kwargs); the values are still compared with the source"});
  std::set<std::string> src_used;  // source tensors accounted for
  // An FP8 source is compared as its bf16 expansion: its scales and activation scales are no tensors of it.
  if (fp8)
    for (const auto& t : src.tensors())
      if (fp8->consumed(t.name)) src_used.insert(t.name);
  std::set<const TensorRef*> q_used;
  // Sets to process: fused sets whose members are all valid quantized modules, then singletons.
  std::vector<std::vector<const Module*>> work;
  std::set<std::string> in_set;
  for (const FusedSet& set : s.sets) {
    std::vector<const Module*> ms;
    for (const auto& mem : set.members) {
      const Module& m = s.modules.at(mem);
      if (m.quantized() && m.valid && !in_set.count(mem)) ms.push_back(&m);
    }
    if (ms.size() != set.members.size()) continue;
    for (auto* m : ms) in_set.insert(m->name);
    work.push_back(std::move(ms));
  }
  for (const auto& [name, m] : s.modules)
    if (m.quantized() && m.valid && !in_set.count(name)) work.push_back({&m});
  // Invalid quantized modules: their tensors are accounted for, not compared.
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    for (const TensorRef* t : m.members()) q_used.insert(t);
  }
  // Resolve sources first so fused 3-D sources can be released when their last slice is done.
  struct Job {
    std::vector<Member> members;
    std::string sort_key;
  };
  std::vector<Job> jobs;
  std::unordered_map<const TensorRef*, std::size_t> src_refs;
  const std::vector<ExpertBlock> src_blocks = find_expert_blocks(named_shapes(src), info, opts.experts);
  for (auto& ms : work) {
    Job job;
    for (const Module* m : ms) {
      Member mem;
      mem.mod = m;
      bool undecided = false;
      auto err = resolve_source(src, fp8, src_blocks, m->name, m->n, m->k, mem.src, undecided);
      if (err && undecided) {
        sink.add({"source-layout-undecided", Severity::WARNING, family_of(m->name) + " source",
                  fmt::format("could not compare '{}' with its source: {}", m->name, *err), {m->payload->name}, "",
                  "a decidable fused-expert layout", *err, "pass --expert-orientation to verify"});
        continue;
      }
      if (err) {
        sink.add({"extra-tensor", Severity::ERROR, family_of(m->name) + " source",
                  fmt::format("quantized module '{}' has no matching source weight: {}", m->name, *err),
                  {m->payload->name}, "", "a source weight of the same shape", *err,
                  "is --against the checkpoint this was quantized from?"});
        continue;
      }
      mem.ok = true;
      src_used.insert(mem.src.tensor->name);
      ++src_refs[mem.src.tensor];
      job.members.push_back(std::move(mem));
    }
    if (job.members.empty()) continue;
    job.sort_key = job.members[0].src.label;
    jobs.push_back(std::move(job));
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.sort_key < b.sort_key; });
  // Progress: source bytes compared (each quantized member's slice, then each kept tensor), in one unit.
  auto member_bytes = [](const Member& m) {
    return m.src.rows * m.src.cols * static_cast<std::uint64_t>(dtype_bits(m.src.dtype) / 8);
  };
  std::uint64_t total_bytes = 0, total_items = jobs.size();
  for (const Job& j : jobs)
    for (const Member& m : j.members) total_bytes += member_bytes(m);
  for (const TensorRef& t : q.tensors())
    if (!q_used.count(&t)) {
      total_bytes += t.info->nbytes();
      ++total_items;
    }
  ProgressScope progress(opts.progress, "verify", total_bytes, total_items);

  double sum_w = 0, sum_rel = 0, sum_ref = 0, sum_mm = 0;
  auto record = [&](TensorError te) {
    ++st.compared_quantized;
    const double w = static_cast<double>(te.rows) * static_cast<double>(te.cols);
    if (std::isfinite(te.rel_rms)) {
      sum_w += w;
      sum_rel += w * te.rel_rms;
      sum_ref += w * te.ref_rel_rms;
      sum_mm += w * te.minmax_rel_rms;
    }
    st.max_rel_rms = std::max(st.max_rel_rms, te.rel_rms);
    st.per_tensor.push_back(std::move(te));
  };
  std::vector<std::byte> pk1, sc1;
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    Job& job = jobs[ji];
    // Read-ahead: the next job's source and quantized tensors load while this one computes.
    if (ji + 1 < jobs.size())
      for (const Member& mem : jobs[ji + 1].members) {
        if (mem.src.tensor != nullptr) src.shards()[mem.src.tensor->shard].prefetch(*mem.src.tensor->info);
        for (const TensorRef* t : mem.mod->members()) q.shards()[t->shard].prefetch(*t->info);
      }
    struct Unexpand {  // an FP8 source's expansion lives for its job only
      Job& j;
      ~Unexpand() {
        for (Member& m : j.members) unexpand(m.src);
      }
    } unexpand_at_end{job};
    // amax per member (R4 check on the source), then the set's expected gs.
    float set_amax = 0, set_observed = 0;  // max|w| and the observer's max over the fused set
    bool src_ok = true;
    for (Member& mem : job.members) {
      if (Status e = expand(src, mem.src); !e) {
        sink.add({"nonfinite-kept-tensor", Severity::ERROR, family_of(mem.src.tensor->name) + " (source)",
                  fmt::format("source: {}", e.error().message), {mem.src.tensor->name}, "", "finite source values",
                  "non-finite", "the source itself is corrupt (F17); the quantized tensor cannot be judged"});
        src_ok = false;
        break;
      }
      nvfp4::WeightView v{mem.src.data, mem.src.dtype, mem.src.rows, mem.src.cols};
      if (!nvfp4::is_source_dtype(mem.src.dtype)) {
        sink.add({"extra-tensor", Severity::ERROR, family_of(mem.mod->name) + " source-dtype",
                  fmt::format("source '{}' has dtype {}, not BF16/F16/F32", mem.src.label, dtype_name(mem.src.dtype)),
                  {mem.src.tensor->name}, "", "BF16, F16 or F32", std::string(dtype_name(mem.src.dtype)), ""});
        src_ok = false;
        break;
      }
      auto a = nvfp4::amax(v, mem.src.label);
      if (!a.ok()) {
        sink.add({"nonfinite-kept-tensor", Severity::ERROR, family_of(mem.src.tensor->name) + " (source)",
                  fmt::format("source: {}", a.error().message), {mem.src.tensor->name}, "", "finite source values",
                  "non-finite", "the source itself is corrupt (F17); the quantized tensor cannot be judged"});
        src_ok = false;
        break;
      }
      mem.amax = *a;
      mem.observed_amax = *a;
      set_amax = std::max(set_amax, *a);
      if (search) {  // the observer's search, as quantize ran it
        auto m = searched_group_maxima(s.layout.qs, v, *search, mem.src.label, &pool);
        if (!m.ok()) {
          src_ok = false;
          break;
        }
        mem.maxima = std::move(m).value();
        mem.observed_amax = 0;
        for (float x : mem.maxima) mem.observed_amax = std::max(mem.observed_amax, x);
      }
      set_observed = std::max(set_observed, mem.observed_amax);
    }
    if (src_ok) {
      const DType dt = job.members[0].src.dtype;
      const float gs_set = nvfp4::global_scale(set_observed, dt);  // what the config's observer gives
      const float gs_minmax = nvfp4::global_scale(set_amax, dt);
      for (Member& mem : job.members) {
        const Module& m = *mem.mod;
        if (!scheme_traits(s.layout.qs).global_scale) {
          // Every other scheme: the whole module re-encoded and compared byte for byte.
          if (auto te = compare_reencoded(q, s.layout, m, mem.src, opts, sink, st, pool,
                                          search ? mem.maxima.data() : nullptr))
            record(std::move(*te));
          continue;
        }
        const std::uint64_t n = m.n, k = m.k;
        const float gs_q = read_f32_scalar(q, m.gs).value_or(std::numeric_limits<float>::quiet_NaN());
        const float gs_own = nvfp4::global_scale(mem.observed_amax, mem.src.dtype);
        TensorError te;
        te.module = m.name;
        te.source = mem.src.label;
        te.rows = n;
        te.cols = k;
        te.global_scale = gs_q;
        te.expected_global_scale = gs_set;
        // Global scale vs the source statistics.
        if (s.observer_known && std::isfinite(gs_q) && gs_q > 0 && f32_bits(gs_q) != f32_bits(gs_set) &&
            f32_bits(gs_q) != f32_bits(gs_own)) {
          auto dev = [&](float e) { return e > 0 ? std::max(gs_q / e, e / gs_q) : 1e30f; };
          const float d = std::min(dev(gs_set), dev(gs_own));
          if (d > 1.01f) {
            sink.add({"global-scale-wrong", d > 2.0f ? Severity::ERROR : Severity::WARNING, family_of(m.name),
                      fmt::format("'{}' weight_global_scale is {}, the source {} {} gives {} (off by {:.3g}x)",
                                  m.name, gs_q, search ? "searched max" : "amax", set_observed, gs_set, d),
                      {m.gs->name}, "", fmt::format("{} (2688/amax, §2.2)", gs_set), fmt::format("{}", gs_q),
                      "a divisor/multiplier mix-up (F19) or a scale from other data; dequantized values are "
                      "scaled wrongly"});
          }
        }
        // Dequantize in row chunks and compare with the source and with the reference encoding.
        const float gs_ref = gs_set;
        const std::uint64_t chunk = std::max<std::uint64_t>(1, (1u << 20) / std::max<std::uint64_t>(k, 1));
        const auto packed = q.data(*m.payload);
        const auto scales = q.data(*m.scale);
        const bool gs_usable = std::isfinite(gs_q) && gs_q > 0;
        nvfp4::WeightView v{mem.src.data, mem.src.dtype, n, k};
        const float* maxima = mem.maxima.empty() ? nullptr : mem.maxima.data();
        // Row chunks in parallel; each chunk's sums kept apart and added in order (the same total for any -j).
        struct ChunkSums {
          double err2 = 0, ref2 = 0, mm2 = 0, src2 = 0;
          bool ok = true;
        };
        const std::size_t nchunks = static_cast<std::size_t>((n + chunk - 1) / chunk);
        std::vector<ChunkSums> sums(nchunks);
        parallel_for(pool, nchunks, [&](std::size_t c) {
          const std::uint64_t r0 = c * chunk, r1 = std::min(n, r0 + chunk), rows = r1 - r0;
          // Per-thread buffers, reused across chunks and modules (one allocation per worker, not per chunk).
          thread_local std::vector<float> deq, ref, mm;
          thread_local std::vector<std::byte> pk, sc;
          deq.resize(rows * k);
          ref.resize(rows * k);
          pk.resize(rows * k / 2);
          sc.resize(rows * k / 16);
          ChunkSums& cs = sums[c];
          nvfp4::decode_rows(packed.data() + r0 * k / 2, scales.data() + r0 * k / 16, gs_usable ? gs_q : 1.0f, rows,
                             k, deq.data());
          // The reference encoding with the config's observer (a searched one: its maxima).
          auto e = maxima ? nvfp4::encode_rows_maxima(v, gs_ref, maxima + r0 * (k / 16), r0, r1, pk.data(), sc.data(), m.name)
                          : nvfp4::encode_rows(v, gs_ref, r0, r1, pk.data(), sc.data(), m.name);
          if (!e.ok()) {
            cs.ok = false;
            return;
          }
          nvfp4::decode_rows(pk.data(), sc.data(), gs_ref, rows, k, ref.data());
          // And, for a searched observer, what min-max would have written: the quality report's baseline.
          if (maxima) {
            mm.resize(rows * k);
            if (!nvfp4::encode_rows(v, gs_minmax, r0, r1, pk.data(), sc.data(), m.name).ok()) {
              cs.ok = false;
              return;
            }
            nvfp4::decode_rows(pk.data(), sc.data(), gs_minmax, rows, k, mm.data());
          }
          for (std::uint64_t i = 0; i < rows * k; ++i) {
            const double w = load_elem(mem.src.data, mem.src.dtype, r0 * k + i);
            const double dq = deq[i], rf = ref[i];
            cs.err2 += (dq - w) * (dq - w);
            cs.ref2 += (rf - w) * (rf - w);
            cs.src2 += w * w;
            if (maxima) cs.mm2 += (mm[i] - w) * (mm[i] - w);
          }
          if (!maxima) cs.mm2 = cs.ref2;
        });
        double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
        bool enc_ok = true;
        for (const ChunkSums& cs : sums) {
          enc_ok = enc_ok && cs.ok;
          err2 += cs.err2;
          ref2 += cs.ref2;
          mm2 += cs.mm2;
          src2 += cs.src2;
        }
        if (!enc_ok) continue;
        auto rel = [&](double e2) {
          if (src2 > 0) return std::sqrt(e2 / src2);
          return e2 > 0 || std::isnan(e2) ? std::numeric_limits<double>::infinity() : 0.0;
        };
        te.rel_rms = rel(err2);
        te.ref_rel_rms = rel(ref2);
        te.minmax_rel_rms = rel(mm2);
        if (!gs_usable) te.rel_rms = std::numeric_limits<double>::infinity();
        // Sampled rows re-encoded by the scalar reference codec with the checkpoint's own gs (F18).
        if (gs_usable && opts.reencode_rows > 0 && s.observer_known) {
          const std::uint64_t want = std::min<std::uint64_t>(opts.reencode_rows, n);
          std::uint64_t bad = 0, first_bad = 0;
          pk1.resize(k / 2);
          sc1.resize(k / 16);
          for (std::uint64_t i = 0; i < want; ++i) {
            const std::uint64_t r = want == 1 ? 0 : i * (n - 1) / (want - 1);
            const bool enc = maxima ? nvfp4::encode_rows_maxima(v, gs_q, maxima + r * (k / 16), r, r + 1, pk1.data(),
                                                                sc1.data(), m.name).ok()
                                    : nvfp4::encode_rows_with("scalar", v, gs_q, r, r + 1, pk1.data(), sc1.data(), m.name).ok();
            if (!enc) break;
            ++st.reencoded_rows;
            if (std::memcmp(pk1.data(), packed.data() + r * k / 2, k / 2) != 0 ||
                std::memcmp(sc1.data(), scales.data() + r * k / 16, k / 16) != 0) {
              if (bad++ == 0) first_bad = r;
            }
          }
          st.reencode_mismatched_rows += bad;
          if (bad) {
            sink.add({"reencode-mismatch", Severity::WARNING, family_of(m.name),
                      fmt::format("'{}': {} of {} sampled rows differ from the scalar reference encoding of the source "
                                  "with the checkpoint's own global scale and observer {} (first row {})",
                                  m.name, bad, want, s.observer_name, first_bad),
                      {m.payload->name}, "",
                      fmt::format("byte-identical to compressed-tensors' RTN with observer {} (nvfp4a16-format.md §2)",
                                  s.observer_name),
                      fmt::format("{} rows differ", bad),
                      "another quantizer (MSE observer, ModelOpt) or environment-dependent numerics (F18)"});
          }
        }
        const double limit = std::max(opts.outlier_factor * te.ref_rel_rms, opts.outlier_floor);
        if (!(te.rel_rms <= limit)) {
          sink.add({"error-outlier", Severity::ERROR, family_of(m.name),
                    fmt::format("'{}' relative RMS error vs source is {:.4g}, the reference NVFP4 encoding of the same "
                                "source gives {:.4g} (limit {:.4g})",
                                m.name, te.rel_rms, te.ref_rel_rms, limit),
                    {m.payload->name, m.scale->name, m.gs->name}, "", fmt::format("<= {:.4g}", limit),
                    fmt::format("{:.4g}", te.rel_rms),
                    "wrong global scale (F19), corrupt scales or codes, or a tensor quantized from other data"});
        }
        record(std::move(te));
      }
    }
    for (Member& mem : job.members) {
      const Module& m = *mem.mod;
      progress.add(member_bytes(mem));
      for (const TensorRef* t : m.members()) q.shards()[t->shard].release(*t->info);
      if (--src_refs[mem.src.tensor] == 0) src.shards()[mem.src.tensor->shard].release(*mem.src.tensor->info);
      std::vector<float>().swap(mem.maxima);  // the job's searched maxima: 1/8 of its BF16 bytes, freed now
    }
  }
  if (sum_w > 0) {
    st.mean_rel_rms = sum_rel / sum_w;
    st.mean_ref_rel_rms = sum_ref / sum_w;
    st.mean_minmax_rel_rms = sum_mm / sum_w;
  }
  std::sort(st.per_tensor.begin(), st.per_tensor.end(),
            [](const TensorError& a, const TensorError& b) { return a.module < b.module; });
  st.worst = st.per_tensor;
  std::stable_sort(st.worst.begin(), st.worst.end(),
                   [](const TensorError& a, const TensorError& b) { return a.rel_rms > b.rel_rms; });
  if (st.worst.size() > opts.worst_n) st.worst.resize(opts.worst_n);

  // Kept tensors: bit-identical to the source.
  if (!jobs.empty()) progress.add(0, jobs.size());
  for (const TensorRef& t : q.tensors()) {
    if (q_used.count(&t)) continue;
    progress.add(t.info->nbytes(), 1);
    const TensorRef* o = src.find(t.name);
    if (!o) {
      sink.add({"extra-tensor", Severity::ERROR, family_of(t.name),
                fmt::format("'{}' is in the quantized checkpoint but not in the source", t.name), {t.name}, "",
                "only tensors derived from the source", "extra tensor",
                "leaked buffers or a different source checkpoint (F20)"});
      continue;
    }
    src_used.insert(o->name);
    ++st.compared_kept;
    std::string why;
    if (const Fp8Weight* w = fp8 ? fp8->find(o->name) : nullptr) {  // kept FP8 weight: its bf16 expansion
      if (t.info->dtype != DType::BF16 || t.info->shape != o->info->shape) {
        why = fmt::format("{} {} where the FP8 source's expansion is BF16 {}", dtype_name(t.info->dtype),
                          format_shape(t.info->shape), format_shape(o->info->shape));
      } else {
        const auto a = q.data(t);
        const std::uint64_t n = o->info->numel(), chunk = 1u << 20;
        std::vector<std::uint16_t> e(static_cast<std::size_t>(std::min(n, chunk)));
        for (std::uint64_t i = 0; i < n && why.empty(); i += chunk) {
          const std::uint64_t c = std::min(chunk, n - i);
          if (Status d = dequant_elements(src, *w, i, c, e.data()); !d) {
            why = d.error().message;
            break;
          }
          if (std::memcmp(a.data() + i * 2, e.data(), c * 2) != 0) {
            std::uint64_t j = 0;
            while (j < c && std::memcmp(a.data() + (i + j) * 2, &e[j], 2) == 0) ++j;
            why = fmt::format("element {} of {} differs from the bf16 expansion of the FP8 source", i + j, n);
          }
        }
        q.shards()[t.shard].release(*t.info);
        src.shards()[o->shard].release(*o->info);
      }
    } else if (t.info->dtype != o->info->dtype || t.info->shape != o->info->shape) {
      why = fmt::format("{} {} vs source {} {}", dtype_name(t.info->dtype), format_shape(t.info->shape),
                        dtype_name(o->info->dtype), format_shape(o->info->shape));
    } else {
      const auto a = q.data(t), b = src.data(*o);
      if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) {
        std::uint64_t i = 0;
        while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
        why = fmt::format("bytes differ from offset {} of {}", i, a.size());
      }
      q.shards()[t.shard].release(*t.info);
      src.shards()[o->shard].release(*o->info);
    }
    if (!why.empty()) {
      sink.add({"kept-tensor-modified", Severity::ERROR, family_of(t.name),
                fmt::format("kept tensor '{}' is not bit-identical to the source: {}", t.name, why), {t.name}, "",
                "bit-identical passthrough", why,
                "passthrough tensors must be copied unchanged (norms, routers, towers, MTP ...)"});
    }
  }
  for (const TensorRef& t : src.tensors()) {
    if (src_used.count(t.name)) continue;
    sink.add({"missing-tensor", Severity::ERROR, family_of(t.name),
              fmt::format("source tensor '{}' ({} {}) has no counterpart in the quantized checkpoint", t.name,
                          dtype_name(t.info->dtype), format_shape(t.info->shape)),
              {t.name}, "", fmt::format("passthrough, or {}", fmt::join(s.layout.suffixes, "/")), "(absent)",
              "dropped on the way (MTP tensors, F8) or quantized under another name"});
  }
}

}  // namespace

std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info) {
  VerifyStats st;
  return verify_structure(q, info, VerifyOptions{}, &st);
}

namespace {

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
                "", "unquantized experts", s.layout.word + " experts",
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
bool fp8_release(const Checkpoint& q, Sink& sink, bool scan_values) {
  auto src = read_fp8_source(q);
  if (!src.ok()) {
    // A source detection refuses: a CT checkpoint of another scheme is left to the structural checks.
    const std::string method = [&] {
      auto it = q.config().find("quantization_config");
      if (it == q.config().end() || !it->is_object()) return std::string();
      const auto m = it->find("quant_method");  // untrusted: any JSON type (a number is not exit 5)
      return m != it->end() && m->is_string() ? m->get<std::string>() : std::string();
    }();
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
  // Values too (issue 27 #8: NaN / Inf scales and NaN codes were called consistent): the scan quantize runs.
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

/** Issue 27 #11: a group whose targets select no quantized module (an empty list, a `re:` target that matches
 * nothing on disk) declares packed tensors vLLM will not build as quantized. */
void check_targets(const Structure& s, Sink& sink) {
  if (!s.qc) return;
  for (const ConfigGroup& g : s.qc->groups) {
    const std::string gkey = fmt::format("quantization_config.config_groups.{}.targets", g.name);
    if (g.targets.empty()) {
      sink.add({"quant-config-invalid", Severity::ERROR, gkey,
                fmt::format("{} is empty: vLLM applies the group to no module, so the packed weights are loaded as "
                            "if unquantized (and fail)",
                            gkey),
                {}, gkey, "[\"Linear\"] (or the modules' names)", "[]", kHintRequant});
      continue;
    }
    for (const std::string& t : g.targets) {
      if (t.rfind("re:", 0) != 0) continue;
      auto re = Regex::compile(std::string_view(t).substr(3));
      if (!re.ok()) {
        sink.add({"quant-config-invalid", Severity::ERROR, gkey,
                  fmt::format("{}: target '{}' cannot be evaluated: {}", gkey, t, re.error().message), {}, gkey,
                  "a pattern vLLM can evaluate", t, kHintRequant});
        continue;
      }
      bool any = false;
      for (const auto& [name, m] : s.modules)
        if (m.quantized() && re->match_prefix(name)) {
          any = true;
          break;
        }
      if (!any)
        sink.add({"quant-config-invalid", Severity::ERROR, gkey,
                  fmt::format("{}: target '{}' matches no quantized module on disk: the group applies to nothing it "
                              "describes",
                              gkey, t),
                  {}, gkey, "a target that selects the packed modules", t, kHintRequant});
    }
  }
}

/** Issue 27 #11: schemes whose scales are stored in the weight's dtype (FP8, W4A16): compressed-tensors writes
 * them in the model's dtype, which the text embedding carries. An F16 scale in a bf16 model is a re-save or an
 * edit: loaders cast or refuse it, and the values it holds were rounded twice. Checked without --against. */
void check_scale_dtype(const Checkpoint& q, const ModelInfo& info, const Structure& s, Sink& sink) {
  // Issue 27 #11: the config's weights.scale_dtype against what the stored scales are. compressed-tensors builds
  // the scale parameters in that dtype when it loads the checkpoint, so a changed field loads every scale cast.
  // A null or absent field (releases written before compressed-tensors recorded it) is not checked.
  if (s.qc) {
    const std::string_view preset = scheme_traits(s.layout.qs).weights.scale_dtype;
    std::optional<DType> stored;
    std::string example;
    for (const auto& [name, m] : s.modules)
      if (m.quantized() && m.scale) {
        stored = m.scale->info->dtype;
        example = m.scale->name;
        break;
      }
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
    for (const ConfigGroup& g : s.qc->groups) {
      if (!g.weights || g.weights->scale_dtype.empty()) continue;
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
  const ValueCheck vc = scheme_traits(s.layout.qs).value_check;
  if (vc != ValueCheck::FP8_PAYLOAD && vc != ValueCheck::FLOAT_SCALES) return;
  std::optional<DType> model;
  for (const TensorRef& t : q.tensors()) {
    const TensorClass c = classify(t.name, t.info->shape, info);
    if (c.role == Role::EMBEDDING && c.text_stack && nvfp4::is_source_dtype(t.info->dtype)) {
      model = t.info->dtype;
      break;
    }
  }
  if (!model) return;  // no text embedding to tell the model's dtype: not checked
  std::vector<std::string> off;
  for (const auto& [name, m] : s.modules)
    if (m.quantized() && m.scale && nvfp4::is_source_dtype(m.scale->info->dtype) && m.scale->info->dtype != *model)
      off.push_back(m.scale->name);
  if (off.empty()) return;
  const TensorRef* first = q.find(off.front());
  sink.add({"scale-dtype-mismatch", Severity::ERROR, "scales",
            fmt::format("{} weight_scale tensor(s) are {} in a {} model (e.g. '{}'): the scheme stores its scales in "
                        "the model's dtype",
                        off.size(), dtype_name(first->info->dtype), dtype_name(*model), off.front()),
            off, "", std::string(dtype_name(*model)), std::string(dtype_name(first->info->dtype)),
            "a re-save or an edit changed the scales' dtype; " + std::string(kHintRequant)});
}

void run_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts, Structure& s, Sink& sink,
                   VerifyStats& st) {
  st.tensors = q.tensors().size();
  if (fp8_release(q, sink, opts.scan_values)) return;
  check_quant_config(q, s, sink, st);
  collect_modules(q, info, s, sink, st, s.qc && s.qc->kv_cache_scheme);
  check_targets(s, sink);
  check_scale_dtype(q, info, s, sink);
  check_policy(info, s, sink);
  check_coverage(q, info, s, sink);
  check_fused_sets(q, info, s, sink, st);
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
  if (st.quantized_params == 0 || (st.text_linear_params > 0 && st.text_quantized_params == 0))
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


}  // namespace

std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts,
                                      VerifyStats* stats) {
  VerifyStats local;
  VerifyStats& st = stats ? *stats : local;
  Structure s;
  Sink sink(opts.max_listed);
  run_structure(q, info, opts, s, sink, st);
  return sink.take();
}

Result<VerifyReport> verify_checkpoint(const Checkpoint& q, const Checkpoint* against, const VerifyOptions& opts) {
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo info, read_checkpoint_info(q));
  VerifyReport rep;
  rep.qdir = q.dir().string();
  rep.strict = opts.strict;
  if (against) rep.against = against->dir().string();
  Structure s;
  Sink sink(opts.max_listed);
  for (const auto* ck : {&q, against})
    if (ck)
      for (const auto& n : ck->notes())
        sink.add({n.kind, Severity::WARNING, ck == &q ? "q" : "source", n.message, {}, "", "", "",
                  "transformers and vLLM ignore the field; 'fp4forge doctor --fix' rewrites it"});
  run_structure(q, info, opts, s, sink, rep.stats);
  if (against) {
    // A source of another model first, loudly (as diff does): every comparison after it would be noise.
    FP4FORGE_ASSIGN_OR_RETURN(ModelInfo src_info, read_checkpoint_info(*against));
    const ArchClass qc = classify_arch(q, info), sc = classify_arch(*against, src_info);
    std::vector<std::string> diffs;
    if (info.family != src_info.family)
      diffs.push_back(fmt::format("family {} vs {}", family_name(info.family), family_name(src_info.family)));
    if (!(qc == sc)) diffs.push_back(fmt::format("class {} vs {}", qc.describe(), sc.describe()));
    if (info.hidden_size != src_info.hidden_size)
      diffs.push_back(fmt::format("hidden_size {} vs {}", info.hidden_size, src_info.hidden_size));
    if (info.num_layers != src_info.num_layers)
      diffs.push_back(fmt::format("num_hidden_layers {} vs {}", info.num_layers, src_info.num_layers));
    if (!diffs.empty()) {
      sink.add({"against-other-model", Severity::ERROR, "against",
                fmt::format("--against is not the model this checkpoint was quantized from: {}; nothing was "
                            "compared", fmt::join(diffs, ", ")),
                {}, "", "the same model (family, class, hidden_size, layers)", fmt::format("{}", fmt::join(diffs, ", ")),
                "pass the unquantized checkpoint this one was made from"});
    } else {
      FP4FORGE_ASSIGN_OR_RETURN(std::optional<Fp8Source> fp8, read_fp8_source(*against));
      if (fp8) rep.against_format = fp8_source_json(*fp8);
      compare_against(q, *against, fp8 ? &*fp8 : nullptr, info, s, opts, sink, rep.stats);
    }
  }
  // A file truncated or rewritten while it was read gives zeros or mixed data: no verdict on that.
  FP4FORGE_TRY(q.check_unchanged());
  if (against) FP4FORGE_TRY(against->check_unchanged());
  rep.findings = sink.take();
  return rep;
}

// ---- rendering -----------------------------------------------------------------------------------

namespace {

Json tensor_error_json(const TensorError& e) {
  Json j;
  j["module"] = e.module;
  j["source"] = e.source;
  j["shape"] = {e.rows, e.cols};
  auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  j["rel_rms"] = num(e.rel_rms);
  j["ref_rel_rms"] = num(e.ref_rel_rms);
  j["minmax_rel_rms"] = num(e.minmax_rel_rms);
  j["global_scale"] = num(e.global_scale);
  j["expected_global_scale"] = num(e.expected_global_scale);
  return j;
}

std::array<std::size_t, 3> severity_counts(const std::vector<Finding>& fs) {
  std::array<std::size_t, 3> c{0, 0, 0};
  for (const auto& f : fs) ++c[static_cast<std::size_t>(f.severity)];
  return c;
}

}  // namespace

nlohmann::ordered_json to_json(const VerifyReport& r) {
  const std::string& qdir = r.qdir;
  const std::string& against = r.against;
  Json j;
  const auto c = severity_counts(r.findings);
  j["ok"] = r.ok();
  j["strict"] = r.strict;
  j["qdir"] = qdir;
  j["against"] = against.empty() ? Json(nullptr) : Json(against);
  j["against_format"] = r.against_format;
  j["scheme"] = r.stats.scheme;
  j["observer"] = r.stats.observer.empty() ? Json(nullptr) : Json(r.stats.observer);
  j["counts"] = {{"error", c[0]}, {"warning", c[1]}, {"info", c[2]}};
  Json fs = Json::array();
  for (const auto& f : r.findings) fs.push_back(to_json(f));
  j["findings"] = std::move(fs);
  const VerifyStats& s = r.stats;
  Json st;
  st["tensors"] = s.tensors;
  st["quantized_modules"] = s.quantized_modules;
  st["kept_tensors"] = s.kept_tensors;
  st["kept_linear"] = s.kept_linear;
  st["quantized_params"] = s.quantized_params;
  st["total_params"] = s.total_params;
  st["quantized_share"] = s.quantized_share();
  st["text_linear_params"] = s.text_linear_params;
  st["text_quantized_share"] = s.text_quantized_share();
  st["fused_sets"] = s.fused_sets;
  st["scale_bytes_scanned"] = s.scale_bytes_scanned;
  st["payload_bytes_scanned"] = s.payload_bytes_scanned;
  st["kept_values_scanned"] = s.kept_values_scanned;
  if (s.against) {
    Json a;
    a["compared_quantized"] = s.compared_quantized;
    a["compared_kept"] = s.compared_kept;
    a["mean_rel_rms"] = s.mean_rel_rms;
    a["max_rel_rms"] = std::isfinite(s.max_rel_rms) ? Json(s.max_rel_rms) : Json(nullptr);
    a["mean_ref_rel_rms"] = s.mean_ref_rel_rms;
    a["mean_minmax_rel_rms"] = s.mean_minmax_rel_rms;
    a["reencoded_rows"] = s.reencoded_rows;
    a["reencode_mismatched_rows"] = s.reencode_mismatched_rows;
    Json w = Json::array();
    for (const auto& e : s.worst) w.push_back(tensor_error_json(e));
    a["worst"] = std::move(w);
    Json p = Json::array();
    for (const auto& e : s.per_tensor) p.push_back(tensor_error_json(e));
    a["per_tensor"] = std::move(p);
    a["quality"] = to_json(quality_report(s));
    st["against"] = std::move(a);
  } else {
    st["against"] = nullptr;
  }
  j["stats"] = std::move(st);
  return j;
}

std::string to_text(const VerifyReport& r) {
  const std::string& qdir = r.qdir;
  const std::string& against = r.against;
  std::string out;
  const VerifyStats& s = r.stats;
  out += fmt::format("verify {}{}\n", qdir, against.empty() ? std::string() : "  (against " + against + ")");
  if (r.against_format.is_object())
    out += fmt::format("  against an FP8 source, compared as its bf16 expansion: {}\n",
                       r.against_format.value("label", std::string()));
  out += fmt::format("  scheme {}{} · {} tensors · {} quantized modules · {} kept tensors ({} Linear-like) · "
                     "quantized share {:.1f}% of {} parameters · {} fused sets\n",
                     s.scheme, s.observer.empty() ? std::string() : " (observer " + s.observer + ")", s.tensors,
                     s.quantized_modules, s.kept_tensors, s.kept_linear,
                     100.0 * s.quantized_share(), s.total_params, s.fused_sets);
  if (s.text_linear_params > 0)
    out += fmt::format("  text stack: {:.1f}% of {} Linear-like parameters quantized\n", 100.0 * s.text_quantized_share(),
                       s.text_linear_params);
  if (s.against) {
    out += fmt::format("  vs source: {} quantized tensors, rel RMS mean {:.4f} (reference encoding {:.4f}), max {:.4f}; "
                       "{} kept tensors bit-compared; {} rows re-encoded, {} differ\n",
                       s.compared_quantized, s.mean_rel_rms, s.mean_ref_rel_rms, s.max_rel_rms, s.compared_kept,
                       s.reencoded_rows, s.reencode_mismatched_rows);
    if (s.mean_minmax_rel_rms != s.mean_ref_rel_rms && s.mean_minmax_rel_rms > 0)
      out += fmt::format("  observer {}: rel RMS {:.4f} where min-max gives {:.4f} ({:+.1f}%)\n", s.observer,
                         s.mean_rel_rms, s.mean_minmax_rel_rms,
                         100.0 * (s.mean_rel_rms - s.mean_minmax_rel_rms) / s.mean_minmax_rel_rms);
    if (s.mean_minmax_rel_rms != s.mean_ref_rel_rms && s.mean_minmax_rel_rms > 0) out += to_text(quality_report(s));
    if (!s.worst.empty()) {
      out += "  worst tensors (rel RMS / reference):\n";
      for (const auto& e : s.worst)
        out += fmt::format("    {:.4f} / {:.4f}  {}\n", e.rel_rms, e.ref_rel_rms, e.module);
    }
  }
  for (const auto& f : r.findings) {
    out += fmt::format("{:<7} {}: {}\n", severity_name(f.severity), f.kind, f.message);
    if (!f.tensors.empty()) {
      const std::size_t show = std::min<std::size_t>(f.tensors.size(), 5);
      out += fmt::format("        tensors: {}{}\n",
                         fmt::join(f.tensors.begin(), f.tensors.begin() + static_cast<std::ptrdiff_t>(show), ", "),
                         f.tensors.size() > show ? fmt::format(" (+{} more)", f.tensors.size() - show) : "");
    }
    if (!f.hint.empty()) out += fmt::format("        hint: {}\n", f.hint);
  }
  const auto c = severity_counts(r.findings);
  out += fmt::format("result: {} ({} error(s), {} warning(s), {} info)\n", r.ok() ? "OK" : "FAILED", c[0], c[1], c[2]);
  return out;
}

int exit_code(const VerifyReport& r) { return r.ok() ? 0 : 1; }

}  // namespace fp4forge
