// Searched observers of the group schemes W4A16 and MXFP4A16 (scheme_search.h) and the table's whole-tensor
// search. llm-compressor observers/mse_quant.py (_grid_search_mse, _grid_search_eager, _calculate_error) as
// model_free runs it (eager), over compressed-tensors 0.18 calculate_qparams and fake_quantize
// (lifecycle/forward_helpers.py::_quantize_dequantize), in the weight dtype D. Each line of search_group
// names the upstream expression it transcribes.
#include "fp4forge/codec/scheme_search.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "codec/nvfp4_search_internal.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/w4a16.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge {
namespace {

using scheme_ref::load_elem;
using scheme_ref::round_d;

// ---- torch's CPU sum (ATen native/cpu/SumKernel.cpp, cascade_sum) ---------------------------------------

constexpr std::size_t kLanes = 16;  // Vectorized<float>::size() with the AVX512 CPU capability
using Lanes = std::array<float, kLanes>;

// utils::CeilLog2: 1 for x <= 2, else the bit width of x - 1.
std::int64_t ceil_log2(std::int64_t x) {
  if (x <= 2) return 1;
  return static_cast<std::int64_t>(std::bit_width(static_cast<std::uint64_t>(x) - 1));
}

// multi_row_sum<T, 4>: four interleaved sums over `size` rows (row i, column k is load(4 i + k)), chunked in
// levels of 2^level_power rows so that only sums of similar magnitude are added.
template <typename T, typename Load, typename Add>
std::array<T, 4> multi_row_sum(std::int64_t size, const Load& load, const Add& add, const T& zero) {
  constexpr int kLevels = 4;
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2(size) / kLevels);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  std::array<std::array<T, 4>, kLevels> acc;
  for (auto& a : acc) a.fill(zero);
  std::int64_t i = 0;
  for (; i + level_step <= size;) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < 4; ++k) acc[0][k] = add(acc[0][k], load(4 * i + k));
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < 4; ++k) {
        acc[j][k] = add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = zero;
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i)
    for (int k = 0; k < 4; ++k) acc[0][k] = add(acc[0][k], load(4 * i + k));
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < 4; ++k) acc[0][k] = add(acc[0][k], acc[j][k]);
  return acc[0];
}

// row_sum<T>: the row read as (-1, 4), multi_row_sum over it, the remainder added to the first partial sum,
// then the four partials in order.
template <typename T, typename Load, typename Add>
T row_sum(std::int64_t size, const Load& load, const Add& add, const T& zero) {
  const std::int64_t size_ilp = size / 4;
  auto partial = multi_row_sum<T>(size_ilp, load, add, zero);
  for (std::int64_t i = size_ilp * 4; i < size; ++i) partial[0] = add(partial[0], load(i));
  for (int k = 1; k < 4; ++k) partial[0] = add(partial[0], partial[k]);
  return partial[0];
}

}  // namespace

float torch_cpu_sum(const float* terms, std::size_t n, DType src) noexcept {
  const auto add = [](float a, float b) { return a + b; };
  const auto size = static_cast<std::int64_t>(n);
  // vec_t::size(): 16 floats, or 32 BF16/F16 values (Vectorized<BFloat16/Half> on AVX512).
  const std::int64_t vec_numel = src == DType::F32 ? 16 : 32;
  if (size < vec_numel)  // scalar_inner_sum: row_sum over the values themselves
    return row_sum<float>(size, [&](std::int64_t i) { return terms[i]; }, add, 0.0f);
  // vectorized_inner_sum: row_sum over whole vectors (a BF16/F16 vector is loaded as its two float halves
  // added lane by lane: InnerSumCastLoadPolicy), the tail in order, then the lanes in order.
  const auto vload = [&](std::int64_t v) {
    Lanes l;
    const float* p = terms + v * vec_numel;
    for (std::size_t j = 0; j < kLanes; ++j) l[j] = vec_numel == 16 ? p[j] : p[j] + p[j + kLanes];
    return l;
  };
  const auto vadd = [](Lanes a, const Lanes& b) {
    for (std::size_t j = 0; j < kLanes; ++j) a[j] += b[j];
    return a;
  };
  const std::int64_t vec_size = size / vec_numel;
  const Lanes acc = row_sum<Lanes>(vec_size, vload, vadd, Lanes{});
  float final_acc = 0.0f;
  for (std::int64_t k = vec_size * vec_numel; k < size; ++k) final_acc += terms[k];
  for (std::size_t j = 0; j < kLanes; ++j) final_acc += acc[j];
  return final_acc;
}

namespace {

// One group scheme's calculate_qparams and fake-quantize on a candidate max.
struct GroupRule {
  std::uint64_t cols;
  std::string_view scheme;
  /** The scale of a group whose (searched) max is m; false when it is undefined (MXFP4 overflow). */
  bool (*scale)(float m, DType dt, float* s);
  /** flD(dequant(quant(x))) under scale s: _quantize_dequantize(...).to(D). */
  float (*fq)(float x, float s, DType dt);
};

bool w4a16_scale(float m, DType dt, float* s) {
  // max_val_pos / (float(bit_range) / 2): bit range 7 - (-8) = 15; scale_dtype None; zeros -> finfo(D).eps.
  float v = round_d(m / (static_cast<float>(w4a16::kQMax - w4a16::kQMin) / 2.0f), dt);
  if (v == 0.0f) v = scheme_ref::eps_d(dt);
  *s = v;
  return true;
}
float w4a16_fq(float x, float s, DType dt) {
  float q = round_d(x / s, dt);                                                                   // x / scale
  q = std::min(std::max(q, static_cast<float>(w4a16::kQMin)), static_cast<float>(w4a16::kQMax));  // clamp
  q = std::nearbyint(q);                                                        // torch.round (half to even)
  return round_d(q * s, dt);                                                    // (q - 0).to(D) * scale
}

bool mxfp4_scale(float m, DType dt, float* s) {
  std::uint8_t code = 0;  // generate_mx_scales, round to uint8, 2^(e - 127) in D, zeros -> eps(uint8) = 1
  return mxfp4::group_scale(m, dt, &code, s);
}
float mxfp4_fq(float x, float s, DType dt) {
  float y = round_d(x / s, dt);                                   // x / scale
  y = std::min(std::max(y, -6.0f), 6.0f);                         // clamp(q_min, q_max)
  return round_d(nvfp4::fp4_to_float(nvfp4::detail::ref_fp4_code(y)) * s, dt);  // cast_to_fp4(...).to(D) * scale
}

constexpr GroupRule kW4A16{w4a16::kGroupSize, "W4A16", w4a16_scale, w4a16_fq};
constexpr GroupRule kMxfp4{mxfp4::kGroupSize, "MXFP4A16", mxfp4_scale, mxfp4_fq};

// The reference: one group of rule.cols values (exact in D, as float), `steps` steps; returns the searched max.
// `pow` is the D table of flD(|d|^norm_D) (nullptr: std::pow per element, F32).
float search_group(const GroupRule& rule, const float* x, DType dt, const SearchSpec& sp, int steps, const float* ps,
                   const float* pow, float nd, float* terms, StepMask* improved) {
  float a = 0.0f;  // max(|amin|, |amax|) of the group: exact in D
  for (std::uint64_t j = 0; j < rule.cols; ++j) a = std::max(a, std::fabs(x[j]));
  const float m0 = round_d(a * static_cast<float>(sp.expand), dt);  // max_val = amax(...) * expand
  float best = nvfp4::detail::max_d(dt);                             // best_error = full_like(finfo.max)
  int best_i = 0;                                                    // best_max_val = max_val.clone()
  for (int i = 0; i < steps; ++i) {
    const float m = round_d(m0 * ps[i], dt);  // shrinked_max_val = max_val * p
    float s = 1.0f;
    if (!rule.scale(m, dt, &s)) continue;    // unreachable: m <= m0, whose scale the caller checked
    for (std::uint64_t j = 0; j < rule.cols; ++j) {
      const float d = round_d(rule.fq(x[j], s, dt) - x[j], dt);  // q - observed
      terms[j] = pow != nullptr ? pow[(dt == DType::BF16 ? half::float_to_bf16(d) : half::float_to_f16(d)) & 0x7FFF]
                                : round_d(std::pow(std::fabs(d), nd), dt);  // .abs().pow(norm)
    }
    const float err = round_d(torch_cpu_sum(terms, rule.cols, dt), dt);  // torch.sum(..., dim=(0, -1))
    if (err < best) {                                                    // improved = err < best_error
      best = err;
      best_i = i;
      improved->set(static_cast<std::size_t>(i));
    }
  }
  return round_d(m0 * ps[best_i], dt);  // best_max_val: the candidate of the best step (step 0: p = 1)
}

Status search_rows_rule(const GroupRule& rule, const nvfp4::WeightView& w, const SearchSpec& spec, int steps,
                        std::uint64_t r0, std::uint64_t r1, float* group_max_out, StepMask* improved,
                        std::string_view name) {
  if (spec.total_steps() > kMaxSearchSteps || steps < 0 || steps > spec.total_steps())
    return scheme_ref::tensor_error(name, fmt::format("search of {} steps (of {}) is outside the supported 0..{}",
                                                      steps, spec.total_steps(), kMaxSearchSteps));
  FP4FORGE_ASSIGN_OR_RETURN(const nvfp4::WeightView rows, scheme_ref::rows_of(w, r0, r1, name));
  if (rows.rows == 0) return {};
  // The encoder's own refusals first (dtype, shape, K % G, NaN/Inf), with its messages.
  FP4FORGE_TRY(scheme_ref::check_weight(rows, name, rule.scheme));
  if (w.cols % rule.cols != 0)
    return scheme_ref::tensor_error(
        name, fmt::format("shape [{}, {}]: K = {} is not a multiple of {} (K % {} = {}); {} needs whole groups of {} "
                          "columns (compressed-tensors refuses it too); leave it unquantized",
                          w.rows, w.cols, w.cols, rule.cols, rule.cols, w.cols % rule.cols, rule.scheme, rule.cols));
  const DType dt = w.dtype;
  const float nd = nvfp4::detail::norm_d(spec.norm, dt);
  const float* pow = nvfp4::detail::pow_table_values(dt, nd);
  std::array<float, kMaxSearchSteps> ps{};
  for (int i = 0; i < std::max(steps, 1); ++i) ps[static_cast<std::size_t>(i)] = static_cast<float>(1.0 - i / spec.grid);
  const std::uint64_t gpr = w.cols / rule.cols;
  std::vector<float> x(rule.cols), terms(rule.cols);
  StepMask local;
  for (std::uint64_t r = 0; r < rows.rows; ++r)
    for (std::uint64_t g = 0; g < gpr; ++g) {
      for (std::uint64_t j = 0; j < rule.cols; ++j) x[j] = load_elem(rows.data, dt, r * w.cols + g * rule.cols + j);
      float s = 1.0f;
      float a = 0.0f;
      for (float v : x) a = std::max(a, std::fabs(v));
      if (const float m0 = round_d(a * static_cast<float>(spec.expand), dt); !std::isfinite(m0)) {
        std::uint64_t col = g * rule.cols;
        for (std::uint64_t j = 0; j < rule.cols; ++j)
          if (std::fabs(x[j]) == a) {
            col = g * rule.cols + j;
            break;
          }
        return scheme_ref::tensor_error(
            name, nvfp4::detail::searched_range_overflow(dt, spec.expand, x[col - g * rule.cols], r0 + r, col));
      }
      if (!rule.scale(round_d(a * static_cast<float>(spec.expand), dt), dt, &s))
        return scheme_ref::tensor_error(
            name, fmt::format("row {}, group {} (columns {}..{}): max |w| = {} has no {} scale (it rounds past the "
                              "largest finite {} power of two); {} refuses it",
                              r0 + r, g, g * rule.cols, g * rule.cols + rule.cols - 1, a, rule.scheme,
                              dtype_name(dt), rule.scheme));
      group_max_out[r * gpr + g] = search_group(rule, x.data(), dt, spec, steps, ps.data(), pow, nd, terms.data(), &local);
    }
  if (improved != nullptr) *improved |= local;
  return {};
}

}  // namespace

Status w4a16_search_rows(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                         std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name) {
  return search_rows_rule(kW4A16, w, spec, steps, r0, r1, group_max_out, improved, name);
}

Status mxfp4_search_rows(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                         std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name) {
  return search_rows_rule(kMxfp4, w, spec, steps, r0, r1, group_max_out, improved, name);
}

Result<std::vector<float>> searched_group_maxima(QuantScheme s, const nvfp4::WeightView& w, const SearchSpec& spec,
                                                 std::string_view name, ThreadPool* pool) {
  const SchemeTraits& t = scheme_traits(s);
  if (t.search_rows == nullptr || t.search_cols == 0)
    return make_error(Errc::USAGE, "scheme {} takes no searched observer", t.name);
  const std::uint64_t gpr = w.cols / t.search_cols;
  std::vector<float> out(static_cast<std::size_t>(w.rows * gpr));
  const int total = spec.total_steps();
  if (pool == nullptr || pool->size() <= 1 || w.rows < 2) {
    StepMask improved;
    FP4FORGE_TRY(t.search_rows(w, spec, total, 0, w.rows, out.data(), &improved, name));
    if (const int run = steps_run(spec, improved); run < total)
      FP4FORGE_TRY(t.search_rows(w, spec, run, 0, w.rows, out.data(), nullptr, name));
    return out;
  }
  // Row ranges of about 64K values (a few ms of search each), at least one per worker.
  const std::uint64_t per = rows_per_task(w.rows, w.cols, pool->size(), std::uint64_t{1} << 16);
  const std::size_t tasks = static_cast<std::size_t>((w.rows + per - 1) / per);
  std::mutex mu;
  StepMask improved;
  std::optional<Error> err;
  auto run = [&](int steps, bool collect) {
    parallel_for(*pool, tasks, [&](std::size_t k) {
      const std::uint64_t r = k * per, r1 = std::min(w.rows, r + per);
      StepMask local;
      Status st = t.search_rows(w, spec, steps, r, r1, out.data() + r * gpr, collect ? &local : nullptr, name);
      std::lock_guard lk(mu);
      if (!st && !err) err = std::move(st).error();
      improved |= local;
    });
  };
  run(total, true);
  if (err) return *err;
  if (const int steps = steps_run(spec, improved); steps < total) {
    run(steps, false);
    if (err) return *err;
  }
  return out;
}

}  // namespace fp4forge
