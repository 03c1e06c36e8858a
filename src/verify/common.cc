// verify's small readers and the scheme layout (verify/internal.h).
#include "verify/internal.h"

namespace fp4forge::verify_internal {

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
  const auto [module, leaf] = names::split_leaf(name);
  return {std::string(module), std::string(leaf)};
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

/** Element `i` of a BF16/F16/F32/F64 buffer as double: the codec's source reader, and F64. */
double load_elem(const std::byte* p, DType t, std::uint64_t i) {
  if (t == DType::F64) {
    double d;
    std::memcpy(&d, p + 8 * i, 8);
    return d;
  }
  return is_source_dtype(t) ? nvfp4::load_source_elem(p, t, i) : 0.0;
}

void load_floats(const std::byte* p, DType t, std::uint64_t i, std::uint64_t n, float* out) {
  auto widen16 = [&](float (*conv)(std::uint16_t) noexcept) {  // the 16-bit dtypes: one conversion per element
    for (std::uint64_t k = 0; k < n; ++k) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * (i + k), 2);
      out[k] = conv(h);
    }
  };
  switch (t) {
    case DType::BF16: widen16(half::bf16_to_float); return;
    case DType::F16: widen16(half::f16_to_float); return;
    case DType::F32: std::memcpy(out, p + 4 * i, static_cast<std::size_t>(n) * 4); return;
    default:  // not a source dtype of the 4-bit schemes (refused before any comparison)
      for (std::uint64_t k = 0; k < n; ++k) out[k] = static_cast<float>(load_elem(p, t, i + k));
  }
}

std::string index_str(const std::vector<std::uint64_t>& shape, std::uint64_t flat) { return format_index(shape, flat); }


/** Whether config.json states the geometry of module `c` (verify's shape rules apply): routed experts, and
 * attention / MLP modules directly under an attention or MLP block. A module under another parent (the
 * sparse-attention `indexer`, a numbered sublayer `self_attn.0`) has a geometry of its own. */
bool geometry_stated(const TensorClass& c) {
  switch (c.base_role) {
    case Role::EXPERT_GATE: case Role::EXPERT_UP: case Role::EXPERT_DOWN: return true;
    default: break;
  }
  // The block the module sits in: `self_attn` of `model.layers.0.self_attn.q_proj`.
  if (c.module.find('.') == std::string::npos) return false;
  const std::string_view parent = names::leaf_of(names::module_of(c.module));
  // An attention module under an attention block, an MLP module under an MLP block: a `gate_proj` under
  // `self_attn` (AFMoE's attention output gate) is not the MLP gate the config's intermediate size describes.
  // Beside the block names classify reads (model/tensor_names.h), verify accepts a `mixer` block for either and
  // a `linear_attn` block for an MLP module.
  if (role_is_linear_of(c.base_role, RoleGroup::ATTENTION))
    return names::one_of(parent, names::kAttentionContexts) || parent == "mixer";
  return names::one_of(parent, names::kMlpContexts) || names::one_of(parent, names::kSharedExpertContexts) ||
         parent == "mixer" || parent == "linear_attn";
}

}  // namespace fp4forge::verify_internal
