#pragma once
/**
 * NVFP4A16 with a searched observer (codec/observer.h): llm-compressor's `nvfp4_expanded_mse` and
 * `memoryless_mse` as model_free computes them (observers/mse_quant.py `_grid_search_mse` /
 * `_grid_search_eager` / `_calculate_error` over compressed-tensors' `calculate_qparams` and
 * `fake_quantize`; docs/schemes.md "Observers" states the arithmetic). Per group of 16, in the source
 * dtype D (every product, quotient and power rounded to D as torch does):
 *   a = max|w|, m0 = flD(a * expand); for step i < steps: p = fl32(1 - i/grid), m = flD(m0 * p),
 *   s = flD(m / 6) (0 -> finfo(D).eps), fq(w) = flD(E2M1(clamp(flD(w / s))) * s),
 *   err = flD(sum fl32 of flD(|flD(fq(w) - w)|^norm_D)); keep m when err < best (strict).
 * Patience ends the search of a whole tensor when no group of it improved for `patience` steps.
 * The searched max of each group then replaces max|w| everywhere min-max uses it: the global scale
 * comes from the max over the fused set of the searched maxima, each group's E4M3 scale from its own.
 *
 * Paths: "scalar" is the reference (std::pow per element); "table" looks the D-rounded powers of a
 * 16-bit D up in a table built with the same std::pow (F32 computes them), the default. Same bytes.
 */
#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/observer.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge::nvfp4 {

using fp4forge::kMaxSearchSteps;  // codec/observer.h: the search's scheme-independent pieces
using fp4forge::StepMask;
using fp4forge::steps_run;

/** The search paths: "scalar" (the reference), "table" (the reference with its powers from a table), and the
 * Highway targets of this CPU (BF16 and F16 sources; the default, an empty path, is the best of them). */
std::vector<std::string> search_paths();

/**
 * Searches every group of rows [r0, r1) of `w`, running `steps` steps (spec.total_steps() for a whole
 * search; fewer once the tensor's early stop is known, see steps_run). Writes each group's searched max
 * (exact in D, as float; groups row-major, cols/16 per row) to group_max_out[(r1-r0)*cols/16] and ORs
 * into `improved` the steps at which some group improved. The mask is only filled where it can matter, i.e.
 * where spec.patience <= steps (steps_run can then stop the search early) or on the reference paths ("scalar",
 * "table"); otherwise the Highway paths leave `improved` as it is and skip, per group, every step a lower bound of its error shows cannot be the
 * group's best (the same maxima, far fewer powers). Errors as amax_rows (BAD_INPUT: non-finite
 * weight, dtype, row range, cols % 16 != 0); USAGE for an unknown path.
 */
Status search_rows(const WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0, std::uint64_t r1,
                   float* group_max_out, StepMask* improved, std::string_view name, std::string_view path = {});


/**
 * The searched maxima of a whole tensor (rows*cols/16 values): search_rows over all rows, then again up
 * to the early stop when patience ended upstream's search before the last step.
 */
Result<std::vector<float>> searched_maxima(const WeightView& w, const SearchSpec& spec, std::string_view name,
                                           std::string_view path = {});

/**
 * Encodes rows [r0, r1) of `w` with global scale `gs`, each group's E4M3 scale from `group_max` (its
 * searched max; (r1-r0)*cols/16 values for these rows) instead of its max|w|; outputs as encode_rows.
 * With every group_max equal to the group's max|w| this is encode_rows' output byte for byte. `path` as
 * encode_rows_with: "" the best Highway target, "scalar" the reference, or a target's name; every path writes
 * the same bytes.
 */
Status encode_rows_maxima(const WeightView& w, float gs, const float* group_max, std::uint64_t r0, std::uint64_t r1,
                          std::byte* packed_out, std::byte* scale_out, std::string_view name,
                          std::string_view path = {});

/**
 * encode_fused with an observer: MINMAX is encode_fused; a searched observer searches each member,
 * takes the global scale from the max of every member's searched maxima, then encodes each member
 * with its maxima. EncodedSet::amax is then that max.
 */
Result<EncodedSet> encode_fused_observed(std::span<const WeightView> members, std::span<const std::string> names,
                                         Observer observer, std::string_view path = {});

// ---- golden vectors (selftest) -------------------------------------------------------------------

/** One observer's golden set (the codec/golden.h schema; bytes upstream writes with that observer). */
struct ObserverGoldenSet {
  Observer observer = Observer::NVFP4_EXPANDED_MSE;
  GoldenSet set;
};

/** The built-in vectors (src/codec/observers_golden.json: the smallest cases of
 * tests/data/golden/observers/, both observers). */
Result<std::vector<ObserverGoldenSet>> builtin_observer_golden();

/** Runs every case of each set on every search path (encode_fused_observed) into report.scheme_outcomes,
 * named "NVFP4A16+<observer>/<case>", counting scheme_failures. */
void run_observer_golden(const std::vector<ObserverGoldenSet>& sets, GoldenReport& report);

}  // namespace fp4forge::nvfp4
