#pragma once
// Internal interface between nvfp4_search.cc (the public search API, the reference and table paths) and
// the Highway search kernels of nvfp4_search_simd.cc (BF16 sources: the dtype of almost every release).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/core/dtype.h"

namespace fp4forge::nvfp4::detail {

/** What a search kernel needs besides the data: the per-step constants the reference computes. */
struct SearchArgs {
  int steps = 0;                      ///< steps to run
  float expand = 1.0f;                ///< fl32(expand)
  const float* ps = nullptr;          ///< ps[i] = fl32(1 - i / grid), `steps` entries
  float eps = 0.0f;                   ///< finfo(D).eps
  float max_d = 0.0f;                 ///< finfo(D).max
  const float* pow_table = nullptr;   ///< flD(|d|^norm_D) for every 15-bit magnitude of D (0x8000 entries)
  /** E2M1 decision thresholds of D (search_thresholds()), or nullptr to divide every element. */
  const std::int32_t* thresholds = nullptr;
  /** Whether the caller reads the step mask (`improved`): only then must every step of every group run in
   * full. Without it the kernel may prune steps that cannot be a group's best (the same maxima). */
  bool need_improved = true;
  /** Whether the pruned search may bound ranges of steps by their ends (SearchBlockRanges): consecutive steps at
   * most 10 % apart (ps[i] <= 1.1 ps[i + 1], all positive) and the power table non-decreasing in |d|. */
  bool ranges = false;
  /** Whether every difference flD(q s) - |x| the threshold path forms is a value of D (BF16 only): then the power
   * table's index is the difference's own bits (no rounding). Sterbenz's lemma gives it where |x| / dq lies in
   * [1/2, 2]; E2M1's decision bounds give that for every index but the last (6 s), and for 6 s it needs
   * expand * p >= 1/2 at every step, less the roundings: steps_diff_exact. */
  bool exact_diff = false;
  /** search_threshold_deltas(D), or nullptr: the kernel then gathers the seven thresholds per step. */
  const std::int32_t* threshold_deltas = nullptr;
  /** Whether flD(m * fl32(1/6)) is flD(fl32(m / 6)) for every value m of D (divide_by_six_exact): the kernel then
   * multiplies (a division costs about ten multiplications). */
  bool sixth_by_product = false;
};

/** torch.finfo(D).max: best_error's initial value (torch.full_like(min_val, finfo.max)). */
float max_d(DType dt) noexcept;
/**
 * R4-B21: a group whose expanded range flD(max|w| * expand) is not finite. Upstream's search then keeps the infinite
 * candidate (every error is NaN, none improves), so its searched maximum is infinite and the global scale 0: the
 * observer cannot quantize the weight. BAD_INPUT naming the tensor, the element and the value, with the limit and the
 * fix (--observer minmax). `row`, `col`: the largest element of the group.
 */
std::string searched_range_overflow(DType dt, double expand, float value, std::uint64_t row, std::uint64_t col);
/** search_rows without the refusal of an overflowed expanded range (its maxima then hold the reference's infinity):
 * what every path computes, compared path against path by the search tests. */
Status search_rows_raw(const WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0, std::uint64_t r1,
                       float* group_max_out, StepMask* improved, std::string_view name, std::string_view path);
/** `.pow(norm)` on a D tensor: the CPU kernel takes the exponent as a D scalar (exp_scalar.to<scalar_t>()),
 * computes in float and rounds to D. */
float norm_d(double norm, DType dt) noexcept;
/** flD(|d|^nd) for every 15-bit magnitude of a 16-bit D (0x8000 entries, computed once with std::pow), or
 * nullptr for F32 or an exponent other than the observers' 2.4 in D. Every searched observer reads it. */
const float* pow_table_values(DType dt, float nd);
/** Whether ps[0..steps) lets the pruned search bound ranges of steps by their ends (SearchArgs::ranges, less the
 * table's part): every ps[i] > 0 and ps[i] <= 1.1 ps[i + 1]. */
bool steps_bound_ranges(const float* ps, int steps) noexcept;
/** Whether flD(m * fl32(1/6)) equals flD(fl32(m / 6)) for every finite value m of D, checked once over all of them
 * (it holds for BF16 and F16: m / 6 is m / 3 halved, whose binary expansion repeats 01 below an exact quotient,
 * so it is never within an fl32 ulp of a D tie or a D value unless exact). */
bool divide_by_six_exact(DType dt);
/** Whether the searched scales of `expand` and ps[0..steps) keep every threshold-path difference a value of D
 * (SearchArgs::exact_diff): expand * ps[i] >= 0.52 for every step (1/2 with a margin for the five roundings between
 * the group's max and the last candidate flD(6 s), each under 2^-8). */
bool steps_diff_exact(float expand, const float* ps, int steps) noexcept;

/**
 * The seven E2M1 decision thresholds of the search for BF16 (M = 7) or F16 (M = 10) sources, per scale
 * mantissa: entry 2^M * k + m (k = 0..6, m < 2^M) is the float bits of the largest magnitude x of D whose
 * E2M1 magnitude index (0 for 0, 1 for 0.5, ... 7 for 6) under the scale s = 1 + m/2^M is at most k, found by
 * binary search with the reference's own arithmetic (clamp(flD(fl32(x / s)), 6), cast_to_fp4's bounds).
 * For a scale s * 2^e in D's normal range every threshold is the entry's value times 2^e.
 */
const std::int32_t* search_thresholds(DType dt);
/** The E2M1 midpoints: mid_k lies between the magnitudes of index k and k + 1 (cast_to_fp4's decision bounds for
 * a scale of 1; threshold_base and the kernel's thresholds start from them). */
inline constexpr float kE2M1Midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
/** The threshold of index k (0..6) under the scale with float bits s_bits, less its correction: fl32(s * mid_k)
 * (exact), mid_k the E2M1 midpoint above index k (0.25, 0.75, ..., 5), truncated to D's precision (M = 7 or 10
 * mantissa bits). */
std::int32_t threshold_base(std::int32_t s_bits, int k, int mant) noexcept;
/** Per scale mantissa m (2^M entries), the seven corrections packed two bits each: threshold k = threshold_base +
 * (((entry >> 2k) & 3) - 2) D-ulps, for every normal scale (every term scales by the exponent). nullptr where some
 * threshold lies outside that window (none does for BF16 and F16: a unit test checks every entry). */
const std::int32_t* search_threshold_deltas(DType dt);

/** Searches `groups` groups of 16 BF16 values at `src` (contiguous): writes each group's searched max
 * (flD(flD(a * expand) * ps[best step])) to group_max[groups]; with args->need_improved, sets improved[i] = 1
 * for every step i at which some group improved (else leaves it alone). */
using SearchKernel = void (*)(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args,
                              float* group_max, std::uint8_t* improved);

/** One step of the pruned search's recorded steps on `groups` groups (a multiple of 16) of BF16 magnitudes
 * x[g * 16 + j] under scales s[g] (normal, in the threshold table's range): element j's record (its power's float
 * bits plus b + [dq < |x|], b its E2M1 magnitude index) at rec[g * 16 + j], the sum of the group's powers in
 * element order at sums[g]. For the test of the records the range bounds read. */
using RecordsKernel = void (*)(const float* x, const float* s, std::size_t groups, const SearchArgs* args,
                               std::int32_t* rec, float* sums);

struct SearchPath {
  std::string name;       ///< hwy::TargetName of the target
  SearchKernel fn;        ///< BF16 sources
  SearchKernel f16;       ///< F16 sources, or nullptr on a target without an exact F16 conversion (table path)
  RecordsKernel records;  ///< the BF16 recorded step, for its test
};

/** The Highway targets of the BF16 search compiled in and supported by this CPU, best first. */
const std::vector<SearchPath>& search_simd_paths();
/** HWY_DYNAMIC_DISPATCH of the F16 search, and whether the dispatched target runs it (else: table path). */
void search_f16_dispatched(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args, float* group_max,
                           std::uint8_t* improved);
bool search_f16_native();

/** HWY_DYNAMIC_DISPATCH of the BF16 search. */
void search_bf16_dispatched(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args,
                            float* group_max, std::uint8_t* improved);

/** The dispatched kernel's quotient x[i] / s[i] (as the search computes it; n a multiple of 16): the
 * exhaustive test of its division. */
void search_quotients_dispatched(const float* x, const float* s, std::size_t n, float* out);

}  // namespace fp4forge::nvfp4::detail
