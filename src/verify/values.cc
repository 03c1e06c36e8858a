// verify: scales and codes of every quantized module scanned for NaN/Inf, zeros and negatives, FP8 NaN codes.
#include "verify/internal.h"

namespace fp4forge::verify_internal {
namespace {

/** A global scale made for a largest weight above this (FP16's largest finite value) is no LLM's. */
constexpr float kImplausibleAmax = 65504.0f;

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
void check_nvfp4_scales(const Checkpoint& q, const Module& m, const std::string& fam, FindingSink& sink,
                        VerifyStats& st) {
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
    sink.add(finding_kind("scale-nan-byte"),
             {.group = fam,
              .message = fmt::format("'{}' has {} E4M3 NaN byte(s) (0x7F/0xFF), first at {}", m.scale->name, nan,
                                     index_str(m.scale->info->shape, first_nan)),
              .tensors = {m.scale->name},
              .expected = "no 0x7F / 0xFF scale byte",
              .actual = fmt::format("{} NaN bytes", nan),
              .hint = "every weight in those groups decodes to NaN: a corrupted byte (a copy or disk fault), or a "
                      "quantizer's unsaturated cast of a zero or huge group amax (F16); quantize again from the "
                      "source"});
  }
  if (neg) {
    sink.add(finding_kind("scale-negative"),
             {.group = fam,
              .message = fmt::format("'{}' has {} negative E4M3 scale byte(s), first at {}", m.scale->name, neg,
                                     index_str(m.scale->info->shape, first_neg)),
              .tensors = {m.scale->name},
              .expected = "scales >= 0",
              .actual = fmt::format("{} negative", neg),
              .hint = "vLLM's Marlin path converts scales assuming they are non-negative"});
  }
}

/** MXFP4A16's E8M0 weight_scale bytes: 0xFF is NaN; 253 and 254 are above anything a finite weight gives. */
void check_e8m0_scales(const Checkpoint& q, const Module& m, const std::string& fam, FindingSink& sink,
                       VerifyStats& st) {
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
    sink.add(
        finding_kind("scale-nan-byte"),
        {.group = fam,
         .message = fmt::format("'{}' has {} E8M0 NaN byte(s) (0xFF), first at {}", m.scale->name, nan,
                                index_str(m.scale->info->shape, first_nan)),
         .tensors = {m.scale->name},
         .expected = "no 0xFF scale byte",
         .actual = fmt::format("{} NaN bytes", nan),
         .hint =
             "every weight of those 32-column groups decodes to NaN; upstream never writes 0xFF for finite weights"});
  }
  if (high) {
    sink.add(
        finding_kind("scale-out-of-range"),
        {.group = fam,
         .message = fmt::format("'{}' has {} E8M0 scale byte(s) of 253 or 254 (scale >= 2^126), first at {}",
                                m.scale->name, high, index_str(m.scale->info->shape, first_high)),
         .tensors = {m.scale->name},
         .expected = "scale bytes <= 252 (the largest a finite weight gives)",
         .actual = fmt::format("{} bytes >= 253", high),
         .hint = "values of magnitude >= 2 (254) or >= 4 (253) in those groups dequantize to +-inf; a corrupt byte or "
                 "a quantizer other than compressed-tensors"});
  }
}

/** A weight_scale in the weight's dtype (FP8, W4A16): finite and > 0 (upstream writes eps for a zero group). */
void check_float_scales(const Checkpoint& q, const Module& m, const std::string& fam, FindingSink& sink,
                        VerifyStats& st) {
  if (!is_source_dtype(m.scale->info->dtype)) return;  // quantized-module-incomplete already
  auto d = q.data(*m.scale);
  const ScaleScan r = scan_scales(d, m.scale->info->dtype);
  st.scale_bytes_scanned += d.size();
  q.shards()[m.scale->shard].release(*m.scale->info);
  if (r.bad == 0) return;
  std::vector<std::string> what;
  if (r.nonfinite) what.push_back(fmt::format("{} NaN/Inf", r.nonfinite));
  if (r.zero) what.push_back(fmt::format("{} zero", r.zero));
  if (r.negative) what.push_back(fmt::format("{} negative", r.negative));
  sink.add(finding_kind("scale-invalid"),
           {.group = fam,
            .message = fmt::format("'{}' ({}) has {} scale(s) that are not finite and > 0 ({}), first at {}",
                                   m.scale->name, dtype_name(m.scale->info->dtype), r.bad, fmt::join(what, ", "),
                                   index_str(m.scale->info->shape, r.first)),
            .tensors = {m.scale->name},
            .expected = "finite scales > 0",
            .actual = fmt::format("{}", fmt::join(what, ", ")),
            .hint = "a corrupt scale: its row, block or group dequantizes to NaN/Inf, zero or flipped values "
                    "(compressed-tensors "
                    "replaces a zero scale by eps, and never writes a negative one)"});
}

/** FP8 weight codes: 0x7F / 0xFF are NaN in float8_e4m3fn (upstream clamps to +-448 first, so never). */
void check_fp8_codes(const Checkpoint& q, const Module& m, const std::string& fam, FindingSink& sink, VerifyStats& st) {
  if (m.payload->info->dtype != DType::F8_E4M3) return;
  auto d = q.data(*m.payload);
  std::uint64_t nan = 0, first = 0;
  for (std::uint64_t i = 0; i < d.size(); ++i)
    if ((static_cast<std::uint8_t>(d[i]) & 0x7F) == 0x7F && nan++ == 0) first = i;
  st.payload_bytes_scanned += d.size();
  q.shards()[m.payload->shard].release(*m.payload->info);
  if (nan == 0) return;
  sink.add(
      finding_kind("weight-nan-code"),
      {.group = fam,
       .message = fmt::format("'{}' has {} float8_e4m3fn NaN code(s) (0x7F/0xFF), first at {}", m.payload->name, nan,
                              index_str(m.payload->info->shape, first)),
       .tensors = {m.payload->name},
       .expected = "no 0x7F / 0xFF weight byte",
       .actual = fmt::format("{} NaN codes", nan),
       .hint =
           "an unclamped cast (compressed-tensors clamps to +-448, so a NaN code never comes from finite weights) or "
           "a corrupt byte; those weights are NaN in every matmul"});
}

}  // namespace

void check_values(const Checkpoint& q, const Structure& s, FindingSink& sink, VerifyStats& st) {
  std::set<const TensorRef*> quant_tensors;
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    const QuantScheme qs = s.layout(m).qs;
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
      sink.add(finding_kind("global-scale-invalid"),
               {.group = fam,
                .message = fmt::format("'{}' is {}, expected a finite value > 0", m.gs->name, *g),
                .tensors = {m.gs->name},
                .expected = "finite and > 0",
                .actual = fmt::format("{}", *g),
                .hint = "an all-zero or corrupt amax (F15); the module dequantizes to NaN/Inf or zero"});
    } else if (g && !s.source_given && nvfp4::kGlobalScaleNumerator / *g > kImplausibleAmax) {
      // Without the source nothing measures the values; a global scale made for a weight beyond FP16's range is no
      // LLM's (issue 55 tryout K: a byte-flipped scale, 6.7e7x too small, was OK). --against measures every one.
      sink.add(finding_kind("global-scale-wrong"),
               {.group = fam,
                .message = fmt::format("'{}' is {:g}: it is made for a largest weight of {:g} (2688 / global scale), "
                                       "beyond FP16's range and any LLM weight's: the module dequantizes to weights "
                                       "that large",
                                       m.gs->name, *g, nvfp4::kGlobalScaleNumerator / *g),
                .tensors = {m.gs->name},
                .expected = fmt::format("a largest weight <= {:g} (global scale >= {:g})", kImplausibleAmax,
                                        nvfp4::kGlobalScaleNumerator / kImplausibleAmax),
                .actual = fmt::format("{:g}", *g),
                .hint = "a corrupt or mis-scaled global scale (F19): verify --against SRC measures the module's "
                        "error against its source"});
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
    sink.add(
        finding_kind("nonfinite-kept-tensor"),
        {.group = family_of(t.name),
         .message = fmt::format("'{}' ({} {}) has {} NaN/Inf value(s), first at {}", t.name, dtype_name(t.info->dtype),
                                format_shape(t.info->shape), n, index_str(t.info->shape, first)),
         .tensors = {t.name},
         .expected = "finite values",
         .actual = fmt::format("{} non-finite", n),
         .hint = "the tensor is corrupt (in the source already, or damaged on copy) (F17)"});
  }
}

}  // namespace fp4forge::verify_internal
