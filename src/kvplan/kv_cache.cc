#include "fp4forge/kvplan/kv_cache.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>

#include "fp4forge/util/checked.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

using Json = nlohmann::ordered_json;

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // no a + b overflow
std::uint64_t cdivu(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

/** Equality key of a spec after unification (vLLM groups layers whose specs compare equal). */
using SpecKey = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::uint64_t,
                           std::uint64_t, std::uint64_t>;
SpecKey key_of(const LayerSpec& s) {
  return {static_cast<int>(s.kind), s.kv_heads, s.head_dim, s.window, s.block_size, s.page_bytes,
          s.conv_state_bytes, s.ssm_state_bytes};
}

std::string json_string(const Json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

namespace {
constexpr std::array<std::pair<KvCacheDtype, std::string_view>, 8> kKvDtypeNames{{
    {KvCacheDtype::AUTO, "auto"},
    {KvCacheDtype::BF16, "bfloat16"},
    {KvCacheDtype::FP8, "fp8"},
    {KvCacheDtype::FP8_E4M3, "fp8_e4m3"},
    {KvCacheDtype::FP8_E5M2, "fp8_e5m2"},
    {KvCacheDtype::FP8_PER_TOKEN_HEAD, "fp8_per_token_head"},
    {KvCacheDtype::INT8_PER_TOKEN_HEAD, "int8_per_token_head"},
    {KvCacheDtype::INT4_PER_TOKEN_HEAD, "int4_per_token_head"},
}};
}  // namespace

Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view text) {
  const std::string d = util::ascii_lower(text);
  if (d == "bf16") return KvCacheDtype::BF16;
  for (const auto& [dtype, name] : kKvDtypeNames)
    if (d == name) return dtype;
  return make_error(Errc::USAGE,
                    "unsupported kv_cache_dtype '{}'; expected auto, bf16 (bfloat16), fp8, fp8_e4m3, fp8_e5m2, "
                    "fp8_per_token_head, int8_per_token_head or int4_per_token_head",
                    text);
}

std::string_view kv_cache_dtype_name(KvCacheDtype d) noexcept {
  for (const auto& [dtype, name] : kKvDtypeNames)
    if (dtype == d) return name;
  return "auto";
}

int kv_cache_dtype_bytes(KvCacheDtype d, int model_dtype_bytes) noexcept {
  if (d == KvCacheDtype::AUTO) return model_dtype_bytes;
  return d == KvCacheDtype::BF16 ? 2 : 1;
}

bool per_token_head(KvCacheDtype d) noexcept {
  return d == KvCacheDtype::FP8_PER_TOKEN_HEAD || d == KvCacheDtype::INT8_PER_TOKEN_HEAD ||
         d == KvCacheDtype::INT4_PER_TOKEN_HEAD;
}

std::uint64_t kv_head_token_bytes(KvCacheDtype d, std::int64_t head_dim, int dtype_bytes) noexcept {
  const auto hd = static_cast<std::uint64_t>(head_dim);
  if (!per_token_head(d)) return 2 * hd * static_cast<std::uint64_t>(dtype_bytes);
  // Triton backend (v1/attention/backends/triton_attn.py:276-289 at 017e9f4448): K and V content plus two fp32
  // scales per token and head; int4 packs two values per byte.
  return (d == KvCacheDtype::INT4_PER_TOKEN_HEAD ? hd : 2 * hd) + 8;
}

Result<ModelDtype> parse_model_dtype(std::string_view text) {
  const std::string d = util::ascii_lower(text);
  if (d == "auto") return ModelDtype::AUTO;
  if (d == "bfloat16") return ModelDtype::BFLOAT16;
  if (d == "float16" || d == "half") return ModelDtype::FLOAT16;
  if (d == "float32" || d == "float") return ModelDtype::FLOAT32;
  return make_error(Errc::USAGE, "unsupported dtype '{}'; expected auto, bfloat16, float16 or float32", text);
}

std::string_view model_dtype_name(ModelDtype d) noexcept {
  switch (d) {
    case ModelDtype::AUTO: return "auto";
    case ModelDtype::BFLOAT16: return "bfloat16";
    case ModelDtype::FLOAT16: return "float16";
    case ModelDtype::FLOAT32: return "float32";
  }
  return "auto";
}

Result<StateDtype> parse_state_dtype(std::string_view text) {
  const std::string d = util::ascii_lower(text);
  if (d == "auto") return StateDtype::AUTO;
  if (d == "float32" || d == "fp32") return StateDtype::FLOAT32;
  if (d == "bfloat16" || d == "bf16") return StateDtype::BFLOAT16;
  if (d == "float16" || d == "fp16" || d == "half") return StateDtype::FLOAT16;
  return make_error(Errc::USAGE, "unsupported mamba state dtype '{}'; expected auto, float32, bfloat16 or float16",
                    text);
}

std::string_view state_dtype_name(StateDtype d) noexcept {
  switch (d) {
    case StateDtype::AUTO: return "auto";
    case StateDtype::FLOAT32: return "float32";
    case StateDtype::BFLOAT16: return "bfloat16";
    case StateDtype::FLOAT16: return "float16";
  }
  return "auto";
}

int state_dtype_bytes(StateDtype d, int dflt) noexcept {
  if (d == StateDtype::AUTO) return dflt;
  return d == StateDtype::FLOAT32 ? 4 : 2;
}

std::string_view layer_kind_name(LayerKind k) noexcept {
  switch (k) {
    case LayerKind::FULL: return "full_attention";
    case LayerKind::SLIDING: return "sliding_window";
    case LayerKind::STATE: return "mamba_state";
  }
  return "full_attention";
}

std::string_view grouping_mode_name(GroupingMode m) noexcept {
  switch (m) {
    case GroupingMode::NONE: return "none";
    case GroupingMode::UNIFORM: return "uniform";
    case GroupingMode::UNIFORM_TYPE: return "uniform_type";
    case GroupingMode::HYBRID: return "hybrid";
  }
  return "none";
}

namespace {

/** The element sizes: the KV dtype (with the model dtype for `auto`), the conv and SSM state dtypes. */
Status kv_dtypes(const Json& text, const KvOptions& opts, KvLayout& out) {
  out.kv_dtype_bytes = kv_cache_dtype_bytes(opts.kv_cache_dtype, opts.dtype == ModelDtype::FLOAT32 ? 4 : 2);
  out.conv_dtype_bytes = state_dtype_bytes(opts.mamba_cache_dtype, 2);
  StateDtype ssm = opts.mamba_ssm_cache_dtype;
  if (ssm == StateDtype::AUTO) {  // the config's mamba_ssm_dtype, read here (config.json is this function's input)
    const std::string cfg = json_string(text, "mamba_ssm_dtype");
    auto r = cfg.empty() ? Result<StateDtype>(StateDtype::AUTO) : parse_state_dtype(cfg);
    if (!r.ok())
      return make_error(Errc::BAD_INPUT, "config.json: mamba_ssm_dtype '{}' is not supported; expected "
                        "float32, bfloat16 or float16", cfg);
    ssm = *r;
  }
  out.ssm_dtype_bytes = state_dtype_bytes(ssm, out.conv_dtype_bytes);

  return {};
}

/** A layer type plan has no KV formula for: refused (never a number it cannot stand behind), with what is not
 * modelled and what the operator can do (issue 55: DeepSeek-V4's compressed attention, Llama-4's chunked). */
Error unmodelled_layer_type(const ModelInfo& info, std::int64_t layer, const std::string& type) {
  std::string what;
  if (type == "compressed_sparse_attention" || type == "heavily_compressed_attention")
    what = "DeepSeek-V4's compressed attention (layer types compressed_sparse_attention and "
           "heavily_compressed_attention, sized by compress_rates) has no KV formula in plan yet";
  else if (type == "chunked_attention")
    what = "Llama-4's chunked local attention (attention_chunk_size) is not modelled yet";
  else if (type == "mamba" || type == "attention+mamba" || type == "rwkv" || type == "linear_attention (Mamba)")
    what = fmt::format("a recurrent state ({}) outside Granite-4 hybrid's Mamba-2 has no state formula in plan yet",
                       type == "rwkv"              ? "RWKV"
                       : type == "attention+mamba" ? "Mamba beside attention in one layer"
                                                   : "Mamba");
  else if (type == "linear_attention")
    what = "linear attention outside the GatedDeltaNet of Qwen3-Next / Qwen3.5 (MiniMax's lightning attention, "
           "Kimi's KDA, ...) has no state formula in plan yet";
  else
    what = fmt::format("layer type '{}' has no KV formula in plan", type);
  return make_error(Errc::BAD_INPUT,
                    "config.json: layer {} of {} ({}) is '{}': {}; plan sizes full_attention, sliding_attention, "
                    "linear_attention, Mamba-2 and MLA layers and refuses the rest rather than guess; hint: "
                    "size this seat by starting it on vLLM (its log's \"GPU KV cache size\" and \"Maximum "
                    "concurrency\" lines) until plan models the type",
                    layer, info.num_layers, info.model_type.empty() ? "-" : info.model_type, type, what);
}

/** Every decoder layer's cache: a state (Mamba-2, GatedDeltaNet), an MLA latent, or K/V heads (full or
 * sliding); KV-shared layers noted apart. Sets the sliding window in effect and whether any layer keeps a state. */
Status read_layers(const ModelInfo& info, const Json& text, const KvOptions& opts, KvLayout& out, std::int64_t& window,
                   bool& has_state) {
  const std::int64_t n = info.num_layers;
  if (n <= 0)
    return make_error(Errc::BAD_INPUT, "config.json: num_hidden_layers is missing or 0; the KV cache "
                      "cannot be sized without the layer count");
  if (static_cast<std::int64_t>(info.layer_types.size()) != n)
    return make_error(Errc::BAD_INPUT, "config.json: layer_types has {} entries, expected num_hidden_layers "
                      "= {}", info.layer_types.size(), n);
  const int tp = opts.tp;
  const std::int64_t shared_from =
      info.num_kv_shared_layers > 0 ? std::max<std::int64_t>(0, n - info.num_kv_shared_layers) : n;

  window = info.sliding_window;
  if (info.family == Family::GEMMA4 && json_string(text, "use_bidirectional_attention") == "all" &&
      window > 0)
    window = window / 2 + 1;  // transformers sets the window to w//2+1 for encoder-like Gemma-4

  const bool per_layer = info.layer_head_dim.size() == static_cast<std::size_t>(n) &&
                         info.layer_kv_heads.size() == static_cast<std::size_t>(n);
  if (info.num_heads > 0 && info.num_heads % tp != 0)
    return make_error(Errc::BAD_INPUT, "tp = {} does not divide num_attention_heads = {}; vLLM refuses "
                      "this tensor-parallel size", tp, info.num_heads);
  has_state = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string& t = info.layer_types[static_cast<std::size_t>(i)];
    LayerSpec s;
    s.layer = static_cast<int>(i);
    if (info.spec().mixer == Mixer::MAMBA2 && (t == "linear_attention" || t == "mamba")) {
      // Mamba-2 (Granite-4 hybrid): vLLM's MambaStateShapeCalculator.mamba2_state_shape. conv state
      // [(I + 2·G'·N) / tp, d_conv - 1] with G' = G padded to a multiple of tp, ssm state
      // [heads / tp, d_head, N]; I = mamba_expand · hidden_size.
      auto json_int = [](const auto& j, std::string_view k) { return integral_of(j, k).value_or(0); };
      const std::int64_t heads = json_int(text, "mamba_n_heads"), dh = json_int(text, "mamba_d_head");
      const std::int64_t N = json_int(text, "mamba_d_state"), kc = json_int(text, "mamba_d_conv");
      std::int64_t G = json_int(text, "mamba_n_groups");
      const std::int64_t expand = json_int(text, "mamba_expand");
      const std::int64_t I = expand > 0 ? expand * info.hidden_size : heads * dh;
      if (heads <= 0 || dh <= 0 || N <= 0 || kc <= 0 || G <= 0 || I <= 0)
        return make_error(Errc::BAD_INPUT, "config.json: layer {} is a Mamba-2 layer but mamba_n_heads/mamba_d_head/"
                          "mamba_d_state/mamba_d_conv/mamba_n_groups = {}/{}/{}/{}/{}; expected all > 0",
                          i, heads, dh, N, kc, G);
      if (G % tp != 0) G += tp - G;  // extra_groups_for_head_shards
      if (heads % tp != 0 || (I + 2 * G * N) % tp != 0)
        return make_error(Errc::BAD_INPUT, "tp = {} does not divide mamba_n_heads = {}; vLLM refuses this "
                          "tensor-parallel size", tp, heads);
      s.kind = LayerKind::STATE;
      s.conv_state_bytes = static_cast<std::uint64_t>((I + 2 * G * N) / tp * (kc - 1)) *
                           static_cast<std::uint64_t>(out.conv_dtype_bytes);
      s.ssm_state_bytes = static_cast<std::uint64_t>(heads / tp * dh * N) * static_cast<std::uint64_t>(out.ssm_dtype_bytes);
      has_state = true;
      out.layers.push_back(s);
      continue;
    }
    if (t == "linear_attention") {
      const std::int64_t hk = info.linear_num_key_heads, hv = info.linear_num_value_heads;
      const std::int64_t dk = info.linear_key_head_dim, dv = info.linear_value_head_dim;
      const std::int64_t kc = info.linear_conv_kernel_dim;
      // Outside the GatedDeltaNet families, the formula applies where the config gives GatedDeltaNet's geometry
      // (OLMo hybrid: linear_num_key_heads, ..., linear_conv_kernel_dim); other linear attention (MiniMax's
      // lightning, Kimi's KDA, Nemotron-H's Mamba-2 layers as transformers 5.x names them) is refused.
      if (info.spec().mixer != Mixer::GATED_DELTANET && (hk <= 0 || hv <= 0 || dk <= 0 || dv <= 0 || kc <= 0))
        return unmodelled_layer_type(info, i, info.recurrent_state_keys ? "linear_attention (Mamba)" : t);
      if (hk <= 0 || hv <= 0 || dk <= 0 || dv <= 0 || kc <= 0)
        return make_error(Errc::BAD_INPUT, "config.json: layer {} is linear_attention but linear_num_key_heads"
                          "/linear_num_value_heads/linear_key_head_dim/linear_value_head_dim/"
                          "linear_conv_kernel_dim = {}/{}/{}/{}/{}; expected all > 0", i, hk, hv, dk, dv, kc);
      if (hk % tp != 0 || hv % tp != 0)
        return make_error(Errc::BAD_INPUT, "tp = {} does not divide linear_num_key_heads = {} and "
                          "linear_num_value_heads = {}; vLLM refuses this tensor-parallel size", tp, hk, hv);
      const std::int64_t hkr = hk / tp, hvr = hv / tp;
      const std::int64_t conv_dim = 2 * hkr * dk + hvr * dv;
      s.kind = LayerKind::STATE;
      s.conv_state_bytes = static_cast<std::uint64_t>((kc - 1 + opts.spec_tokens) * conv_dim) *
                           static_cast<std::uint64_t>(out.conv_dtype_bytes);
      s.ssm_state_bytes = static_cast<std::uint64_t>(hvr * dv * dk) * static_cast<std::uint64_t>(out.ssm_dtype_bytes);
      has_state = true;
      out.layers.push_back(s);
      continue;
    }
    if (t != "full_attention" && t != "sliding_attention") return unmodelled_layer_type(info, i, t);
    if (i >= shared_from) {
      out.kv_shared_layers.push_back(static_cast<int>(i));
      continue;
    }
    if (info.spec().mla || info.kv_lora_rank > 0) {
      if (per_token_head(opts.kv_cache_dtype))
        return make_error(Errc::USAGE, "kv_cache_dtype {} is a Triton-backend format vLLM does not offer for "
                          "multi-head latent attention; use auto or fp8", kv_cache_dtype_name(opts.kv_cache_dtype));
      // Multi-head latent attention (DeepSeek-V2/V3): vLLM's MLAAttentionSpec caches one latent of
      // kv_lora_rank + qk_rope_head_dim per token and layer (no K/V pair, not split by tensor parallelism).
      if (info.kv_lora_rank <= 0 || info.qk_rope_head_dim <= 0)
        return make_error(Errc::BAD_INPUT, "config.json: an MLA model needs kv_lora_rank and qk_rope_head_dim > 0, "
                          "got {} and {}", info.kv_lora_rank, info.qk_rope_head_dim);
      s.kv_heads = 1;
      s.head_dim = info.kv_lora_rank + info.qk_rope_head_dim;
      s.bytes_per_token = static_cast<std::uint64_t>(s.head_dim * out.kv_dtype_bytes);
      s.kind = LayerKind::FULL;
      out.naive_bytes_per_token += s.bytes_per_token;
      out.growing_bytes_per_token += s.bytes_per_token;
      out.layers.push_back(s);
      continue;
    }
    const std::int64_t kv = per_layer ? info.layer_kv_heads[static_cast<std::size_t>(i)] : info.num_kv_heads;
    const std::int64_t d = per_layer ? info.layer_head_dim[static_cast<std::size_t>(i)] : info.head_dim;
    if (kv <= 0 || d <= 0)
      return make_error(Errc::BAD_INPUT, "config.json: layer {} ({}) has num_key_value_heads = {} and "
                        "head_dim = {}; expected both > 0", i, t, kv, d);
    if (kv % tp != 0 && tp % kv != 0)
      return make_error(Errc::BAD_INPUT, "tp = {} neither divides nor is a multiple of the {} kv heads of "
                        "layer {}; vLLM refuses this tensor-parallel size", tp, kv, i);
    s.kv_heads = std::max<std::int64_t>(1, kv / tp);
    s.head_dim = d;
    s.bytes_per_token = static_cast<std::uint64_t>(s.kv_heads) * kv_head_token_bytes(opts.kv_cache_dtype, d, out.kv_dtype_bytes);
    if (t == "sliding_attention") {
      if (window <= 0)
        return make_error(Errc::BAD_INPUT, "config.json: layer {} is sliding_attention but sliding_window "
                          "is missing or 0", i);
      s.window = window;
      s.kind = opts.hybrid_kv_cache_manager ? LayerKind::SLIDING : LayerKind::FULL;
    } else {
      s.kind = LayerKind::FULL;
    }
    out.naive_bytes_per_token += s.bytes_per_token;
    if (s.kind == LayerKind::FULL) out.growing_bytes_per_token += s.bytes_per_token;
    out.layers.push_back(s);
  }
  return {};
}

/** MTP speculative decoding: vLLM builds the draft model's decoder layers beside the main ones; their KV
 * joins the grouping. Returns how many layers it added. */
std::int64_t add_mtp_layers(const ModelInfo& info, const KvOptions& opts, KvLayout& out) {
  // MTP speculative decoding: vLLM builds the draft model's decoder layers (one full-attention layer each, with
  // the main model's attention geometry) beside the main ones, and their KV joins the grouping (Qwen3.5-27B with
  // MTP: 17 full-attention layers, so groups of 17 and the 48 linear-attention layers padded to 3 x 17; vLLM
  // prints "Add 3 padding layers"). Traced on club-3090 start-up logs (tests/data/plan/vllm-logs.json).
  std::int64_t mtp_added = 0;
  const std::int64_t n = info.num_layers;
  if (opts.spec_tokens > 0 && info.mtp_num_hidden_layers > 0) {
    const auto tmpl = std::find_if(out.layers.rbegin(), out.layers.rend(), [](const LayerSpec& l) {
      return l.kind == LayerKind::FULL && l.window == 0;
    });
    if (tmpl != out.layers.rend()) {
      const LayerSpec base = *tmpl;
      for (std::int64_t k = 0; k < info.mtp_num_hidden_layers; ++k) {
        LayerSpec d = base;
        d.layer = static_cast<int>(n + k);
        out.naive_bytes_per_token += d.bytes_per_token;
        out.growing_bytes_per_token += d.bytes_per_token;
        out.layers.push_back(d);
        ++mtp_added;
      }
    }
  }
  return mtp_added;
}

/** Block sizes (the hybrid alignment of attention blocks to the state page) and every layer's page. */
void size_pages(const KvOptions& opts, bool has_state, std::int64_t mtp_added, std::int64_t window, KvLayout& out) {
  // Block sizes (§4.2 hybrid alignment) and pages.
  const std::int64_t user_block = opts.block_size;
  std::int64_t attn_block = user_block > 0 ? user_block : 16;
  if (has_state) {
    std::uint64_t tok = 0;
    for (const auto& s : out.layers)
      if (s.kind != LayerKind::STATE) tok = std::max(tok, s.bytes_per_token);
    const auto& st = *std::find_if(out.layers.begin(), out.layers.end(),
                                   [](const LayerSpec& s) { return s.kind == LayerKind::STATE; });
    out.state_bytes = st.conv_state_bytes + st.ssm_state_bytes;
    if (tok > 0) {
      const auto a = static_cast<std::uint64_t>(opts.kernel_block_alignment);
      const auto aligned = static_cast<std::int64_t>(a * cdivu(out.state_bytes, a * tok));
      attn_block = (user_block > 0 && user_block >= aligned) ? user_block : aligned;
      const std::uint64_t attn_page = static_cast<std::uint64_t>(attn_block) * tok;
      out.state_padding_bytes = attn_page - out.state_bytes;
    }
    out.attn_block_size = attn_block;
  }
  for (auto& s : out.layers) {
    s.block_size = attn_block;
    if (s.kind == LayerKind::STATE)
      s.page_bytes = out.state_bytes + out.state_padding_bytes;
    else
      s.page_bytes = static_cast<std::uint64_t>(attn_block) * s.bytes_per_token;
  }
  if (!has_state) out.attn_block_size = attn_block;
  if (has_state && opts.spec_tokens > 0)
    out.notes.push_back(fmt::format(
        "{} speculative tokens add {} conv-state rows and {} state pages per request", opts.spec_tokens,
        opts.spec_tokens, opts.spec_tokens));
  if (mtp_added > 0)
    out.notes.push_back(fmt::format("the MTP draft model adds {} full-attention layer(s) of KV to the grouping",
                                    mtp_added));
  if (!opts.hybrid_kv_cache_manager && window > 0)
    out.notes.push_back("hybrid KV-cache manager disabled: sliding-window layers store all tokens");

}

/** vLLM's grouping: one group when every layer's spec is equal (or of one type), else hybrid groups of g
 * same-spec layers with page sizes unified. */
Status group_layers(const KvOptions& opts, KvLayout& out) {
  if (out.layers.empty()) {
    out.mode = GroupingMode::NONE;
    return {};
  }
  const auto state_pages = (opts.prefix_caching ? 2 : 1) + opts.spec_tokens;

  // 1. all specs equal -> one group of every layer.
  const SpecKey k0 = key_of(out.layers.front());
  const bool all_equal = std::all_of(out.layers.begin(), out.layers.end(),
                                     [&](const LayerSpec& s) { return key_of(s) == k0; });
  // 2. same type (and window / block) but different pages -> one group, per-layer pages.
  const auto& f = out.layers.front();
  const bool same_type = std::all_of(out.layers.begin(), out.layers.end(), [&](const LayerSpec& s) {
    return s.kind == f.kind && s.block_size == f.block_size &&
           (s.kind != LayerKind::SLIDING || s.window == f.window);
  });
  if (all_equal || same_type) {
    KvGroup g;
    g.kind = f.kind;
    g.block_size = f.block_size;
    g.window = f.kind == LayerKind::SLIDING ? f.window : 0;
    g.state_pages = f.kind == LayerKind::STATE ? state_pages : 0;
    for (const auto& s : out.layers) g.layers.push_back(s.layer);
    if (all_equal) {
      out.mode = GroupingMode::UNIFORM;
      out.page_bytes = f.page_bytes;
      out.group_size = static_cast<std::int64_t>(out.layers.size());
    } else {
      out.mode = GroupingMode::UNIFORM_TYPE;
      out.page_bytes = 0;
      for (const auto& s : out.layers) out.page_bytes += s.page_bytes;
      out.group_size = 1;
    }
    out.groups.push_back(std::move(g));
    out.min_block_size = f.block_size;
    return {};
  }

  // 3. hybrid: unify page sizes by growing the block of smaller-page layers.
  out.mode = GroupingMode::HYBRID;
  std::uint64_t max_page = 0;
  for (const auto& s : out.layers) max_page = std::max(max_page, s.page_bytes);
  for (auto& s : out.layers) {
    if (s.page_bytes == max_page) continue;
    if (s.page_bytes == 0 || max_page % s.page_bytes != 0)
      return make_error(Errc::BAD_INPUT, "layer {}: KV page of {} bytes does not divide the largest page "
                        "({} bytes); vLLM cannot unify these page sizes (NotImplementedError)",
                        s.layer, s.page_bytes, max_page);
    const std::uint64_t ratio = max_page / s.page_bytes;
    if (s.kind == LayerKind::STATE)
      return make_error(Errc::BAD_INPUT, "layer {}: state page ({} bytes) is smaller than the attention page "
                        "({} bytes) after alignment; unsupported layout", s.layer, s.page_bytes, max_page);
    s.block_size *= static_cast<std::int64_t>(ratio);
    s.page_bytes = max_page;
  }
  out.page_bytes = max_page;
  // Same-spec layers, in order of first appearance.
  std::vector<std::pair<SpecKey, std::vector<int>>> types;
  for (std::size_t idx = 0; idx < out.layers.size(); ++idx) {
    const SpecKey k = key_of(out.layers[idx]);
    auto it = std::find_if(types.begin(), types.end(), [&](const auto& p) { return p.first == k; });
    if (it == types.end()) {
      types.push_back({k, {}});
      it = types.end() - 1;
    }
    it->second.push_back(static_cast<int>(idx));
  }
  std::size_t min_n = SIZE_MAX, max_n = 0;
  for (const auto& t : types) {
    min_n = std::min(min_n, t.second.size());
    max_n = std::max(max_n, t.second.size());
  }
  std::size_t g = min_n;
  if (static_cast<double>(max_n) < static_cast<double>(min_n) * 1.5) g = max_n;
  out.group_size = static_cast<std::int64_t>(g);
  out.min_block_size = INT64_MAX;
  for (const auto& t : types) {
    const std::size_t num_groups = (t.second.size() + g - 1) / g;
    for (std::size_t gi = 0; gi < num_groups; ++gi) {
      KvGroup grp;
      const LayerSpec& s0 = out.layers[static_cast<std::size_t>(t.second.front())];
      grp.kind = s0.kind;
      grp.block_size = s0.block_size;
      grp.window = s0.kind == LayerKind::SLIDING ? s0.window : 0;
      grp.state_pages = s0.kind == LayerKind::STATE ? state_pages : 0;
      for (std::size_t j = gi; j < t.second.size(); j += num_groups)  // layers[i::num_groups]
        grp.layers.push_back(out.layers[static_cast<std::size_t>(t.second[j])].layer);
      out.min_block_size = std::min(out.min_block_size, grp.block_size);
      out.groups.push_back(std::move(grp));
    }
  }
  return {};
}

}  // namespace

Result<KvLayout> build_kv_layout(const ModelInfo& info, const nlohmann::ordered_json& config,
                                 const KvOptions& opts) {
  if (opts.tp < 1) return make_error(Errc::USAGE, "tp = {} is invalid; expected an integer >= 1", opts.tp);
  if (opts.spec_tokens < 0)
    return make_error(Errc::USAGE, "spec_tokens = {} is invalid; expected >= 0", opts.spec_tokens);
  if (opts.block_size < 0 || opts.kernel_block_alignment < 1)
    return make_error(Errc::USAGE, "block_size = {} is invalid; expected a positive integer", opts.block_size);
  const Json& text = text_config(config);
  KvLayout out;
  out.tp = opts.tp;
  FP4FORGE_TRY(kv_dtypes(text, opts, out));
  std::int64_t window = 0;
  bool has_state = false;
  if (Status st = read_layers(info, text, opts, out, window, has_state); !st.ok()) {
    // A refusal that tp = 1 does not meet is the tensor-parallel size's: the sizes up to 16 the layers take are the
    // hint (issue 55 tryout E-6: tp=3 said what was wrong, not what would do).
    Error e = st.error();
    if (opts.tp > 1) {
      std::vector<std::string> good;
      for (std::int64_t t = 1; t <= 16; ++t) {
        KvOptions o = opts;
        o.tp = t;
        KvLayout scratch = out;
        std::int64_t w = 0;
        bool state = false;
        if (read_layers(info, text, o, scratch, w, state).ok()) good.push_back(std::to_string(t));
      }
      if (!good.empty() && good.front() == "1") {
        std::string list = good.back();
        for (std::size_t i = good.size() - 1; i-- > 0;) list = good[i] + (i + 2 == good.size() ? " or " : ", ") + list;
        e.message += fmt::format("; hint: tp={} would do (the seat's tp= key)", list);
      }
    }
    return e;
  }
  const std::int64_t mtp_added = add_mtp_layers(info, opts, out);
  if (has_state && !opts.hybrid_kv_cache_manager)
    return make_error(Errc::USAGE, "hybrid_manager=off is not possible for a model with linear-attention "
                      "layers: vLLM needs the hybrid KV-cache manager for them");

  size_pages(opts, has_state, mtp_added, window, out);
  FP4FORGE_TRY(group_layers(opts, out));
  return out;
}

KvDemand kv_demand(const KvLayout& layout, std::int64_t max_model_len, std::int64_t in_flight_tokens) {
  KvDemand d;
  d.max_model_len = max_model_len;
  d.in_flight_tokens = in_flight_tokens;
  for (const auto& g : layout.groups) {
    std::int64_t blocks = 0;
    switch (g.kind) {
      case LayerKind::FULL: blocks = cdiv(max_model_len, g.block_size); break;
      case LayerKind::SLIDING: {
        const std::int64_t tokens = std::min(g.window - 1 + in_flight_tokens, max_model_len);
        blocks = cdiv(tokens, g.block_size) + 1;
        break;
      }
      case LayerKind::STATE: blocks = g.state_pages; break;
    }
    d.blocks_per_group.push_back(blocks);
    d.blocks_per_request += blocks;
  }
  d.bytes_per_request = util::sat_mul({static_cast<std::uint64_t>(layout.group_size), layout.page_bytes,
                                       static_cast<std::uint64_t>(d.blocks_per_request)});
  return d;
}

std::int64_t kv_num_blocks(const KvLayout& layout, std::uint64_t available_bytes) {
  if (layout.page_bytes == 0 || layout.group_size <= 0) return 0;
  return static_cast<std::int64_t>(available_bytes / layout.page_bytes /
                                   static_cast<std::uint64_t>(layout.group_size));
}

double kv_max_concurrency(const KvDemand& demand, std::int64_t num_blocks) {
  if (demand.blocks_per_request <= 0) return 0.0;
  return static_cast<double>(num_blocks) / static_cast<double>(demand.blocks_per_request);
}

std::int64_t kv_cache_tokens(const KvLayout& layout, std::int64_t num_blocks) {
  if (layout.groups.empty()) return 0;
  return num_blocks / static_cast<std::int64_t>(layout.groups.size()) * layout.min_block_size;
}

KvReport kv_report(const KvLayout& layout, const KvDemand& demand, std::int64_t num_blocks, const VllmRules& rules) {
  KvReport r;
  switch (rules.tokens) {
    case TokensReport::BLOCKS:
      r.tokens = num_blocks * layout.min_block_size;
      r.max_concurrency = demand.max_model_len > 0 ? static_cast<double>(r.tokens) / static_cast<double>(demand.max_model_len) : 0.0;
      return r;
    case TokensReport::PER_GROUP:
      r.tokens = kv_cache_tokens(layout, num_blocks);
      r.max_concurrency = kv_max_concurrency(demand, num_blocks);
      return r;
    case TokensReport::CONCURRENCY:
      r.max_concurrency = kv_max_concurrency(demand, num_blocks);
      r.tokens = static_cast<std::int64_t>(r.max_concurrency * static_cast<double>(demand.max_model_len));
      return r;
  }
  return r;
}

std::uint64_t kv_bytes_for_concurrency(const KvLayout& layout, const KvDemand& demand, double target) {
  const double need = std::ceil(target * static_cast<double>(demand.blocks_per_request) - 1e-9);
  const std::uint64_t blocks = util::sat_from_double(need);
  return util::sat_mul({blocks, layout.page_bytes, static_cast<std::uint64_t>(std::max<std::int64_t>(0, layout.group_size))});
}

std::int64_t largest_max_model_len(const KvLayout& layout, std::uint64_t available_bytes, std::int64_t in_flight_tokens,
                                   std::int64_t upper, double concurrency) {
  if (layout.groups.empty()) return upper;
  auto fits = [&](std::int64_t len) {
    const KvDemand d = kv_demand(layout, len, in_flight_tokens);
    return (concurrency > 1.0 ? kv_bytes_for_concurrency(layout, d, concurrency) : d.bytes_per_request) <=
           available_bytes;
  };
  if (upper < 1 || !fits(1)) return 0;
  if (fits(upper)) return upper;
  std::int64_t lo = 1, hi = upper;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

bool vllm_large_gpu(std::uint64_t gpu_total_bytes, std::string_view gpu_name) {
  const bool a100 = util::ascii_lower(gpu_name).find("a100") != std::string::npos;
  return gpu_total_bytes >= 70ull * 1024 * 1024 * 1024 && !a100;
}

std::int64_t default_max_num_batched_tokens(std::uint64_t gpu_total_bytes, std::string_view gpu_name) {
  return vllm_large_gpu(gpu_total_bytes, gpu_name) ? 8192 : 2048;
}

}  // namespace fp4forge::kvplan
