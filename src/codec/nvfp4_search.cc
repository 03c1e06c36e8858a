// NVFP4A16 searched observers (nvfp4_search.h): llm-compressor observers/mse_quant.py as model_free runs
// it (eager), over compressed-tensors 0.18 calculate_qparams / fake_quantize, in the weight dtype D.
// Each line of search_group names the upstream expression it transcribes.
#include "fp4forge/codec/nvfp4_search.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "codec/nvfp4_internal.h"
#include "codec/nvfp4_search_internal.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/half.h"

namespace fp4forge::nvfp4 {
namespace {

using detail::round_d;
using detail::tensor_error;

using scheme_ref::eps_d;

}  // namespace

float detail::max_d(DType dt) noexcept {
  switch (dt) {
    case DType::BF16: return half::bf16_to_float(0x7F7F);
    case DType::F16: return 65504.0f;
    default: return std::numeric_limits<float>::max();
  }
}

float detail::norm_d(double norm, DType dt) noexcept { return round_d(static_cast<float>(norm), dt); }

std::string detail::searched_range_overflow(DType dt, double expand, float value, std::uint64_t row, std::uint64_t col) {
  return fmt::format("element [{}, {}] = {:g} is too large for the searched observer: its search starts from max|w| x {} "
                     "rounded to {} ({:g} at most), which is infinite here, so upstream's searched maximum is infinite "
                     "and its global scale 0 (llm-compressor cannot quantize this weight with it either); expected "
                     "|w| < {:.4g} under --observer mse; hint: --observer minmax quantizes it (or --ignore the module)",
                     row, col, value, expand, dtype_name(dt), max_d(dt), static_cast<double>(max_d(dt)) / expand);
}

namespace {

/** The first group of rows [r0, r1) whose searched maximum is not finite (an overflowed expanded range), refused with
 * its largest element; every path (reference, table, Highway) returns the reference's maxima, infinity included. */
Status check_searched_maxima(const WeightView& w, const SearchSpec& spec, std::uint64_t r0, std::uint64_t r1,
                             const float* group_max, std::string_view name) {
  const std::uint64_t gpr = w.cols / kGroupSize, groups = (r1 - r0) * gpr;
  for (std::uint64_t g = 0; g < groups; ++g) {
    if (std::isfinite(group_max[g])) continue;
    const std::uint64_t row = r0 + g / gpr, c0 = (g % gpr) * kGroupSize;
    float v = 0.0f;
    std::uint64_t col = c0;
    for (std::uint64_t j = 0; j < kGroupSize; ++j) {
      const float x = detail::load_elem(w.data, w.dtype, row * w.cols + c0 + j);
      if (std::fabs(x) > std::fabs(v)) {
        v = x;
        col = c0 + j;
      }
    }
    return tensor_error(Errc::BAD_INPUT, name, detail::searched_range_overflow(w.dtype, spec.expand, v, row, col));
  }
  return {};
}

}  // namespace

namespace {

using detail::max_d;
using detail::norm_d;

// cast_to_fp4 after the clamp to [-6, 6]: sign(y) * the E2M1 magnitude nearest |y| (the same thresholds
// as Appendix A fp4_code).
float fp4_value(float y) noexcept { return fp4_to_float(detail::ref_fp4_code(y)); }

// flD(|d|^norm_D) for every 15-bit magnitude of a 16-bit D, computed with the reference's std::pow.
struct PowTable {
  std::vector<float> v;
  bool non_decreasing = true;  ///< in the magnitude bits (so in |d|): what the range bound needs
  PowTable(DType dt, float nd) : v(0x8000) {
    for (std::uint32_t b = 0; b < 0x8000; ++b) {
      const float d = dt == DType::BF16 ? half::bf16_to_float(static_cast<std::uint16_t>(b))
                                        : half::f16_to_float(static_cast<std::uint16_t>(b));
      v[b] = round_d(std::pow(d, nd), dt);
      // NaN entries (magnitudes above infinity) are never looked up: flD(|d|) of finite values stays finite or inf.
      if (b > 0 && !std::isnan(v[b]) && !std::isnan(v[b - 1]) && v[b] < v[b - 1]) non_decreasing = false;
    }
  }
  float at(float d, DType dt) const noexcept {
    return v[(dt == DType::BF16 ? half::float_to_bf16(d) : half::float_to_f16(d)) & 0x7FFF];
  }
};

// The table of a 16-bit D for the observers' exponent (2.4, taken in D), built once; nullptr for F32 or any
// other exponent (the powers are then computed per element).
const PowTable* pow_table(DType dt, float nd) {
  static const PowTable bf16(DType::BF16, norm_d(2.4, DType::BF16));
  static const PowTable f16(DType::F16, norm_d(2.4, DType::F16));
  if (dt == DType::BF16 && nd == norm_d(2.4, DType::BF16)) return &bf16;
  if (dt == DType::F16 && nd == norm_d(2.4, DType::F16)) return &f16;
  return nullptr;
}

}  // namespace

const float* detail::pow_table_values(DType dt, float nd) {
  const PowTable* t = pow_table(dt, nd);
  return t != nullptr ? t->v.data() : nullptr;
}

namespace {

// The reference: one group of 16 values (exact in D, as float), `steps` steps; returns the group's searched
// max. With `pt` (the table path) each power is looked up in the table built with the same std::pow.
float search_group(const float* x, DType dt, const SearchSpec& sp, int steps, const PowTable* pt, StepMask* improved) {
  float a = 0.0f;  // torch.amin / torch.amax over the group; max(|min|, |max|) below is symmetric in RNE
  for (int j = 0; j < 16; ++j) a = std::max(a, std::fabs(x[j]));
  const float m0 = round_d(a * static_cast<float>(sp.expand), dt);  // min_val = amin(...) * expand
  const float nd = norm_d(sp.norm, dt);
  float best = max_d(dt);                                          // best_error = full_like(finfo.max)
  int best_i = 0;                                                  // best_max_val = max_val.clone()
  for (int i = 0; i < steps; ++i) {
    const float p = static_cast<float>(1.0 - i / sp.grid);         // p = 1 - i / grid
    const float m = round_d(m0 * p, dt);                            // shrinked_max_val = max_val * p
    float s = round_d(m / 6.0f, dt);                                // max_val_pos / (float(bit_range) / 2)
    if (s == 0.0f) s = eps_d(dt);                                   // where(scales == 0, eps, scales)
    float sum = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float y = round_d(x[j] / s, dt);                              // scaled = x / scale
      y = std::min(std::max(y, -6.0f), 6.0f);                       // clamp(q_min, q_max)
      const float dq = round_d(fp4_value(y) * s, dt);               // cast_to_fp4(...).to(D) * scale
      const float d = round_d(dq - x[j], dt);                       // q - observed
      sum += pt != nullptr ? pt->at(d, dt)                          // .abs().pow(norm); sum in float
                           : round_d(std::pow(std::fabs(d), nd), dt);
    }
    const float err = round_d(sum, dt);                             // torch.sum(..., dim=(0, -1)) in D
    if (err < best) {                                               // improved = err < best_error
      best = err;
      best_i = i;
      improved->set(static_cast<std::size_t>(i));
    }
  }
  // best_max_val: the candidate of the best step (step 0 is the expanded range itself, p = 1).
  return round_d(m0 * static_cast<float>(1.0 - best_i / sp.grid), dt);
}

}  // namespace

bool detail::steps_bound_ranges(const float* ps, int steps) noexcept {
  for (int i = 0; i < steps; ++i)
    if (!(ps[i] > 0.0f) || (i + 1 < steps && !(static_cast<double>(ps[i]) <= 1.1 * static_cast<double>(ps[i + 1]))))
      return false;
  return true;
}

bool detail::divide_by_six_exact(DType dt) {
  auto check = [](DType d) {
    const float inv6 = 1.0f / 6.0f;
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const float m = d == DType::BF16 ? half::bf16_to_float(static_cast<std::uint16_t>(b))
                                       : half::f16_to_float(static_cast<std::uint16_t>(b));
      if (!std::isfinite(m)) continue;
      if (std::bit_cast<std::uint32_t>(round_d(m * inv6, d)) != std::bit_cast<std::uint32_t>(round_d(m / 6.0f, d))) return false;
    }
    return true;
  };
  static const bool bf16 = check(DType::BF16), f16 = check(DType::F16);
  return dt == DType::BF16 ? bf16 : dt == DType::F16 && f16;
}

bool detail::steps_diff_exact(float expand, const float* ps, int steps) noexcept {
  for (int i = 0; i < steps; ++i)
    if (!(static_cast<double>(expand) * static_cast<double>(ps[i]) >= 0.52)) return false;
  return true;
}

namespace {
std::vector<std::int32_t> build_thresholds(DType dt) {
  const int mant = dt == DType::BF16 ? 7 : 10;
  const std::uint32_t n = 1u << mant, one = dt == DType::BF16 ? 0x3F80u : 0x3C00u, max_bits = dt == DType::BF16 ? 0x7F7Fu : 0x7BFFu;
  auto value = [dt](std::uint32_t b) {
    return dt == DType::BF16 ? half::bf16_to_float(static_cast<std::uint16_t>(b)) : half::f16_to_float(static_cast<std::uint16_t>(b));
  };
  std::vector<std::int32_t> t(7 * static_cast<std::size_t>(n));
  // The E2M1 magnitude index the reference decides for x under s (search_group's arithmetic).
  auto index = [dt](float x, float s) {
    float y = round_d(x / s, dt);
    y = std::min(std::max(y, -6.0f), 6.0f);
    return static_cast<int>(detail::ref_fp4_code(y) & 7);
  };
  for (std::uint32_t m = 0; m < n; ++m) {
    const float s = value(one | m);
    for (int k = 0; k < 7; ++k) {
      // Largest magnitude bits b (finite) with index(b) <= k: index is non-decreasing in b, index(0) = 0.
      std::uint32_t lo = 0, hi = max_bits;
      while (lo < hi) {
        const std::uint32_t mid = (lo + hi + 1) / 2;
        if (index(value(mid), s) <= k) lo = mid;
        else hi = mid - 1;
      }
      t[static_cast<std::size_t>(n) * static_cast<std::size_t>(k) + m] =
          static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(value(lo)));
    }
  }
  return t;
}
}  // namespace

const std::int32_t* detail::search_thresholds(DType dt) {
  static const std::vector<std::int32_t> bf16 = build_thresholds(DType::BF16);
  static const std::vector<std::int32_t> f16 = build_thresholds(DType::F16);
  return dt == DType::F16 ? f16.data() : bf16.data();
}

std::int32_t detail::threshold_base(std::int32_t s_bits, int k, int mant) noexcept {
  const auto b = std::bit_cast<std::int32_t>(std::bit_cast<float>(s_bits) * kE2M1Midpoints[k]);  // exact: <= 3 + 11 bits
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(b) & ~((1u << (23 - mant)) - 1u));
}

namespace {
// threshold = threshold_base + (delta - 2) D-ulps, delta in 2 bits at bit 2k of the mantissa's entry; empty when
// some threshold lies outside that window (then the kernel gathers the thresholds themselves).
std::vector<std::int32_t> build_threshold_deltas(DType dt) {
  const int mant = dt == DType::BF16 ? 7 : 10;
  const std::size_t n = std::size_t{1} << mant;
  const std::int32_t* t = detail::search_thresholds(dt);
  std::vector<std::int32_t> out(n, 0);
  for (std::size_t m = 0; m < n; ++m) {
    const auto s_bits = static_cast<std::int32_t>(0x3F800000u | (static_cast<std::uint32_t>(m) << (23 - mant)));
    for (int k = 0; k < 7; ++k) {
      const std::int32_t diff = t[n * static_cast<std::size_t>(k) + m] - detail::threshold_base(s_bits, k, mant);
      const std::int32_t ulps = diff / (std::int32_t{1} << (23 - mant)) + 2;
      if (diff % (std::int32_t{1} << (23 - mant)) != 0 || ulps < 0 || ulps > 3) return {};
      out[m] |= ulps << (2 * k);
    }
  }
  return out;
}
}  // namespace

const std::int32_t* detail::search_threshold_deltas(DType dt) {
  static const std::vector<std::int32_t> bf16 = build_threshold_deltas(DType::BF16);
  static const std::vector<std::int32_t> f16 = build_threshold_deltas(DType::F16);
  const auto& v = dt == DType::F16 ? f16 : bf16;
  return v.empty() ? nullptr : v.data();
}

namespace {

// Argument checks shared by search and encode: encode_rows on an empty range checks dtype, row range and
// K % 16 with the codec's own messages; amax_rows finds non-finite weights (R4) with its message.
Status check_rows(const WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name, float gs = 1.0f) {
  FP4FORGE_TRY(encode_rows(w, gs, r0, r0, nullptr, nullptr, name));
  if (r1 < r0 || r1 > w.rows)
    return tensor_error(Errc::BAD_INPUT, name,
                        fmt::format("row range [{}, {}) is outside the tensor's {} rows", r0, r1, w.rows));
  FP4FORGE_TRY(amax_rows(w, r0, r1, name));
  return {};
}

}  // namespace

std::vector<std::string> search_paths() {
  std::vector<std::string> out{"scalar", "table"};
  for (const auto& p : detail::search_simd_paths()) out.push_back(p.name);
  return out;
}

Status search_rows(const WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0, std::uint64_t r1,
                   float* group_max_out, StepMask* improved, std::string_view name, std::string_view path) {
  FP4FORGE_TRY(detail::search_rows_raw(w, spec, steps, r0, r1, group_max_out, improved, name, path));
  if (r0 == r1 || w.cols == 0) return {};
  return check_searched_maxima(w, spec, r0, r1, group_max_out, name);
}

Status detail::search_rows_raw(const WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                               std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name,
                               std::string_view path) {
  const bool ref = path == "scalar";
  // A Highway path (BF16 sources; F16 and F32 run the table path), the dispatched best for an empty path.
  detail::SearchKernel simd = nullptr, simd_f16 = nullptr;
  bool dispatched = path.empty();
  if (!path.empty() && !ref && path != "table") {
    for (const auto& p : detail::search_simd_paths())
      if (p.name == path) {
        simd = p.fn;
        simd_f16 = p.f16;
      }
    if (simd == nullptr) {
      std::string names;
      for (const auto& n : search_paths()) names += (names.empty() ? "" : ", ") + n;
      return make_error(Errc::USAGE, "search path '{}' is not available on this CPU/build; expected one of: {}", path,
                        names);
    }
  }
  if (spec.total_steps() > kMaxSearchSteps || steps < 0 || steps > spec.total_steps())
    return tensor_error(Errc::INTERNAL, name,
                        fmt::format("search of {} steps (of {}) is outside the supported 0..{}", steps,
                                    spec.total_steps(), kMaxSearchSteps));
  FP4FORGE_TRY(check_rows(w, r0, r1, name));
  if (r0 == r1 || w.cols == 0) return {};
  const DType dt = w.dtype;
  const float nd = norm_d(spec.norm, dt);
  std::array<float, kMaxSearchSteps> ps{};
  for (int i = 0; i < steps; ++i) ps[static_cast<std::size_t>(i)] = static_cast<float>(1.0 - i / spec.grid);
  const PowTable* pt = pow_table(dt, nd);
  StepMask local;
  const std::byte* base = w.data + r0 * w.cols * detail::elem_size(dt);
  const std::uint64_t groups = (r1 - r0) * (w.cols / kGroupSize);
  const float expand = static_cast<float>(spec.expand);
  // The Highway kernels: BF16 on every target, F16 where the target converts to F16 exactly.
  detail::SearchKernel kernel = nullptr;
  if (dt == DType::BF16) kernel = simd != nullptr ? simd : dispatched ? &detail::search_bf16_dispatched : nullptr;
  if (dt == DType::F16) {
    if (simd_f16 != nullptr) kernel = simd_f16;
    else if (dispatched && detail::search_f16_native()) kernel = &detail::search_f16_dispatched;
  }
  if (kernel != nullptr && pt != nullptr) {
    const bool need_mask = improved != nullptr && spec.patience <= steps;
    const detail::SearchArgs args{steps, expand, ps.data(), eps_d(dt), max_d(dt), pt->v.data(), detail::search_thresholds(dt),
                                  need_mask, pt->non_decreasing && detail::steps_bound_ranges(ps.data(), steps),
                                  dt == DType::BF16 && detail::steps_diff_exact(expand, ps.data(), steps),
                                  detail::search_threshold_deltas(dt), detail::divide_by_six_exact(dt)};
    std::array<std::uint8_t, kMaxSearchSteps> imp{};
    kernel(reinterpret_cast<const std::uint16_t*>(base), groups, &args, group_max_out, imp.data());
    if (need_mask)
      for (int i = 0; i < steps; ++i)
        if (imp[static_cast<std::size_t>(i)]) improved->set(static_cast<std::size_t>(i));
    return {};
  }
  for (std::uint64_t g = 0; g < groups; ++g) {
    float x[16];
    for (std::uint64_t j = 0; j < 16; ++j) x[j] = detail::load_elem(base, dt, g * 16 + j);
    group_max_out[g] = search_group(x, dt, spec, steps, ref ? nullptr : pt, &local);
  }
  if (improved != nullptr) *improved |= local;
  return {};
}

Result<std::vector<float>> searched_maxima(const WeightView& w, const SearchSpec& spec, std::string_view name,
                                           std::string_view path) {
  std::vector<float> out(static_cast<std::size_t>(w.rows * (w.cols / kGroupSize)));
  StepMask improved;
  const int total = spec.total_steps();
  FP4FORGE_TRY(search_rows(w, spec, total, 0, w.rows, out.data(), &improved, name, path));
  if (const int run = steps_run(spec, improved); run < total)
    FP4FORGE_TRY(search_rows(w, spec, run, 0, w.rows, out.data(), nullptr, name, path));
  return out;
}

Status encode_rows_maxima(const WeightView& w, float gs, const float* group_max, std::uint64_t r0, std::uint64_t r1,
                          std::byte* packed_out, std::byte* scale_out, std::string_view name, std::string_view path) {
  FP4FORGE_TRY(check_rows(w, r0, r1, name, gs));
  if (r0 == r1 || w.cols == 0) return {};
  const std::byte* base = w.data + r0 * w.cols * detail::elem_size(w.dtype);
  // calculate_qparams(best_min, best_max, args, global_scale): the min-max recipe on the searched max. The
  // Highway kernel (the best target, or the one named) where every max is a value of the source dtype, as a
  // searched max is; the scalar reference otherwise and for "scalar".
  FP4FORGE_ASSIGN_OR_RETURN(const detail::Kernels* k, detail::kernels_for(path));
  if (!k->encode_maxima(base, w.dtype, r1 - r0, w.cols, gs, group_max, packed_out, scale_out))
    detail::ref_encode_maxima(base, w.dtype, r1 - r0, w.cols, gs, group_max, packed_out, scale_out);
  return {};
}

Result<EncodedSet> encode_fused_observed(std::span<const WeightView> members, std::span<const std::string> names,
                                         Observer observer, std::string_view path) {
  const auto spec = search_spec(observer);
  if (!spec) return encode_fused(members, names, path);
  if (members.empty())
    return make_error(Errc::INTERNAL, "encode_fused_observed: empty fused set; expected at least one member");
  if (names.size() != members.size())
    return make_error(Errc::INTERNAL, "encode_fused_observed: {} names for {} members", names.size(), members.size());
  // Every member checked (dtype, K, R4) before any search, like encode_fused.
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].dtype != members[0].dtype)
      return tensor_error(Errc::BAD_INPUT, names[i],
                          fmt::format("fused-set member has dtype {} but '{}' has {}; a fused set shares one "
                                      "source dtype", dtype_name(members[i].dtype), names[0],
                                      dtype_name(members[0].dtype)));
    FP4FORGE_TRY(check_rows(members[i], 0, members[i].rows, names[i]));
  }
  const std::string_view search_path = path == "scalar" ? "scalar" : "";
  std::vector<std::vector<float>> maxima;
  EncodedSet set;
  for (std::size_t i = 0; i < members.size(); ++i) {
    FP4FORGE_ASSIGN_OR_RETURN(auto m, searched_maxima(members[i], *spec, names[i], search_path));
    for (float v : m) set.amax = std::max(set.amax, v);
    maxima.push_back(std::move(m));
  }
  set.global_scale = global_scale(set.amax, members[0].dtype);
  FP4FORGE_TRY(detail::encode_members(members, set, [&](std::size_t i, const WeightView& w, std::byte* pk, std::byte* sc) {
    return encode_rows_maxima(w, set.global_scale, maxima[i].data(), 0, w.rows, pk, sc, names[i]);
  }));
  return set;
}

}  // namespace fp4forge::nvfp4
