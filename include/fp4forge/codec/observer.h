#pragma once
/**
 * Weight observers: how the range of each scale group is chosen before encoding (llm-compressor's
 * `observer` of a weights QuantizationArgs; docs/schemes.md "Observers").
 *
 * - MINMAX (`memoryless_minmax`): the group's max|w| — compressed-tensors' default, every scheme.
 * - NVFP4_EXPANDED_MSE (`nvfp4_expanded_mse`, CLI `mse`): llm-compressor's recommended NVFP4A16
 *   observer (observers/mse.py NVFP4ExpandedMSEObserver: expand 1.8, maxshrink 1 - 0.8/1.8, grid 200,
 *   patience 1000, norm 2.4): per group, a search over shrink factors of the expanded range for the
 *   smallest sum |fq(w) - w|^2.4 (observers/mse_quant.py `_grid_search_eager`).
 * - MEMORYLESS_MSE (`memoryless_mse`, CLI `memoryless-mse`): the same search with the base defaults
 *   (expand 1.0, maxshrink 0.20, grid 100, patience 5, norm 2.4); patience then stops the search of a
 *   whole tensor early when no group of it improved for 5 steps.
 * NVFP4A16 takes both searches (nvfp4_search.h); MXFP4A16 and W4A16 take `memoryless_mse`
 * (scheme_search.h); the FP8 schemes min-max only. `observer_supported` reads the scheme table.
 */
#include <bitset>
#include <optional>
#include <string_view>

#include "fp4forge/core/error.h"

namespace fp4forge {

enum class QuantScheme;  // codec/scheme.h

enum class Observer : unsigned char { MINMAX, NVFP4_EXPANDED_MSE, MEMORYLESS_MSE };

inline constexpr Observer kObservers[] = {Observer::MINMAX, Observer::NVFP4_EXPANDED_MSE, Observer::MEMORYLESS_MSE};

/** The option name: "minmax", "mse", "memoryless-mse". */
std::string_view observer_option(Observer o) noexcept;
/** The name llm-compressor registers and writes in `quantization_config`: "memoryless_minmax",
 * "nvfp4_expanded_mse", "memoryless_mse". */
std::string_view observer_config_name(Observer o) noexcept;
/** An observer from its option or config name (case-insensitive, '-' and '_' alike; "static_minmax" and
 * "minmax" are MINMAX as model_free maps them). USAGE error listing the option names. */
Result<Observer> parse_observer(std::string_view text);
/** The observer a config's `observer` string names, or nullopt for one fp4forge does not implement
 * (what verify reports as unknown). Null/absent is MINMAX (compressed-tensors' default). */
std::optional<Observer> observer_from_config(std::string_view name) noexcept;

/** The observer a scheme is written with when none is asked for: NVFP4A16 takes llm-compressor's
 * recommended `nvfp4_expanded_mse` (docs/schemes.md#observers says why), the others min-max (compressed-tensors'
 * default; the FP8 schemes take no other). */
Observer default_observer(QuantScheme s) noexcept;

/** True when `s` can be written with observer `o` (the scheme table's `observers`: MINMAX every scheme,
 * NVFP4_EXPANDED_MSE NVFP4A16, MEMORYLESS_MSE NVFP4A16, MXFP4A16 and W4A16). */
bool observer_supported(QuantScheme s, Observer o) noexcept;
/** USAGE error naming the scheme and the observers it takes, or ok. */
Status check_observer(QuantScheme s, Observer o);

/** The search parameters of a searched observer (observers/mse.py defaults; observer_kwargs {}). */
struct SearchSpec {
  double expand = 1.0;     ///< the range searched starts at expand x the group's max|w|
  double maxshrink = 0.2;  ///< steps = int(maxshrink * grid)
  double grid = 100.0;     ///< step i multiplies by p = 1 - i / grid
  int patience = 5;        ///< stop after this many steps with no improvement anywhere in the tensor
  double norm = 2.4;       ///< error = sum |fq(w) - w|^norm per group
  /** int(maxshrink * grid), as Python computes it. */
  int total_steps() const noexcept;
  /** True when patience can end the search early (patience < total_steps): the tensor's groups are then
   * coupled through "no group improved". */
  bool can_stop_early() const noexcept { return patience < total_steps(); }
};

/** The most search steps supported (total_steps of every observer is below it). */
inline constexpr int kMaxSearchSteps = 256;
/** Which steps improved some group of a tensor (the "torch.any(improved)" of each step). */
using StepMask = std::bitset<kMaxSearchSteps>;

/** The steps upstream evaluates for a tensor whose steps with an improvement are `improved`: the break of
 * `_grid_search_eager` after `patience` steps without one, else spec.total_steps(). */
int steps_run(const SearchSpec& spec, const StepMask& improved) noexcept;

/** The search of a searched observer; nullopt for MINMAX. */
std::optional<SearchSpec> search_spec(Observer o) noexcept;

/** The worker count of a run without `-j` (quantize and verify --against): one per core, or twice that (at most
 * ThreadPool::kMaxThreads) when the run searches (`searched`: some module's weights go through a searched
 * observer). A search is bound by the CPU, and its workers block in page faults and writes for part of it; the
 * extra workers use those cores (docs/performance.md, "Searched observer: twice the workers"). A min-max run is
 * bound by the disk and gains nothing from more. */
unsigned default_workers(bool searched) noexcept;

}  // namespace fp4forge
