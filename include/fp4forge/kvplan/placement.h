#pragma once
/**
 * Placement of seats on GPUs, and every budget-dependent figure vLLM would log for each seat.
 *
 * Memory model (docs/plan-overheads.md): a seat's budget on each of its GPUs is requested =
 * gpu_memory_utilization * torch total (TOTAL minus the driver reserve); at start-up the GPU's free
 * memory (torch total - other tenants - other seats' budgets and CUDA contexts - its own context) must
 * cover it, or vLLM refuses to start; KV gets requested - weights/TP - overhead (the minimum over
 * ranks), where the overhead is the estimate of budget.h (activation peak, sampler, encoder, non-torch,
 * CUDA graphs) or overhead=SIZE. A seat fits when that KV memory holds `concurrency` requests of
 * max_model_len (at least one).
 *
 * Order and choice: pinned seats (gpu=) first, then the others by KV demand, heaviest first; each
 * takes the roomiest GPU(s) that fit (TP seats take tp distinct GPUs). If that greedy order leaves a
 * seat out, a bounded search tries every assignment. Seats without an explicit utilization then share
 * each GPU's spare memory in proportion to their KV demand (capped at the version's default
 * utilization, 0.92 or 0.90, unless the seat needs more), rounded down to 0.01 when that still fits.
 */
#include <cstdint>
#include <string>
#include <vector>

#include "fp4forge/kvplan/budget.h"
#include "fp4forge/kvplan/calibration.h"
#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/kvplan/kv_cache.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/sensitivity.h"

namespace fp4forge::kvplan {

struct SeatPlacement {
  bool placed = false;              ///< assigned to GPU(s) (false: no room, or no GPUs given)
  bool fits = false;
  /** Not fitting is not a matter of memory: vLLM refuses the seat's config, or a host port clashes ("cannot
   * start", `blocker` says why). */
  bool cannot_start = false;
  std::vector<std::size_t> gpus;    ///< indices into Plan::gpus, rank order
  double util = 0.0;                ///< gpu_memory_utilization to run with
  bool util_explicit = false;
  std::int64_t max_num_batched_tokens = 0;
  bool batched_default = true;      ///< from vLLM's GPU rule (not given)
  std::int64_t max_num_seqs = 0;
  bool seqs_default = true;         ///< from vLLM's GPU rule (not given)
  std::uint64_t overhead_bytes = 0;  ///< taken out of the budget besides weights (terms.in_budget(), or given)
  bool overhead_default = true;     ///< false: overhead= / --overhead replaced the estimate
  OverheadTerms terms;              ///< the estimate, term by term (reported even when overridden)
  std::uint64_t outside_bytes = 0;  ///< held outside util * total (CUDA context, NCCL, graphs before 0.21)
  KvDemand demand;                  ///< per-request reservation at max_model_len
  std::uint64_t kv_needed_bytes = 0;   ///< KV memory for `concurrency` requests
  std::uint64_t need_bytes = 0;        ///< weights/rank + overhead + kv_needed (per GPU)
  std::uint64_t budget_bytes = 0;      ///< requested: util * torch total on the tightest rank
  std::uint64_t available_kv_bytes = 0;  ///< budget - weights/rank - overhead (min over ranks)
  std::int64_t num_blocks = 0;
  double max_concurrency = 0.0;
  std::int64_t kv_cache_tokens = 0;  ///< "GPU KV cache size: N tokens" as the seat's vLLM version prints it
  std::int64_t largest_max_model_len = 0;  ///< with this budget (<= max_position_embeddings)
  double min_util = 0.0;            ///< smallest utilization that meets the target (> 1: impossible)
  std::uint64_t short_by_bytes = 0;  ///< when it does not fit for lack of memory
  std::string blocker;              ///< when it does not fit for another reason ("tp=2 needs 2 GPUs, 1 given")
  /** vLLM refuses to start (request_memory, vllm/v1/worker/utils.py at 0.28): the requested util x total is more
   * than the free memory it measures after creating its own CUDA context (and NCCL). */
  bool startup_refused = false;
  std::uint64_t startup_free_bytes = 0;  ///< that free memory on the tightest GPU (when refused)
  double startup_max_util = 0.0;    ///< the largest utilization that passes the check there (when refused)
  std::string reason;               ///< why here / why it does not fit
  bool async_scheduling = true;     ///< as planned (the sliding-window reserve counts 2 batches from 0.26 when on)
  std::optional<CalibratedOverhead> calibration;  ///< log=FILE: the measured overhead and how it was carried
  /** vLLM >= 0.34 on Model Runner V2 (inferred): the KV memory the margin after warm-up takes away from what the
   * budget would give (0 when the budget binds); see VllmRules::kv_from_free_memory. */
  std::uint64_t kv_margin_bytes = 0;
  std::string replaced_by;          ///< replaces=: this seat stops when that seat starts (not placed)
  std::uint64_t freed_bytes = 0;    ///< replaces= / frees=: memory freed on its GPU(s) before it starts
  Sensitivity sensitivity;          ///< the flag-dependent terms and the concurrency they span (placed seats)
};

/** One seat's share of one GPU. */
struct GpuShare {
  std::size_t seat = 0;  ///< index into Plan::seats
  std::uint64_t budget = 0, weights = 0, kv = 0, overhead = 0;
  std::uint64_t outside = 0;  ///< CUDA context etc. beside the budget
  std::uint64_t kv_margin = 0;  ///< budget the KV margin keeps from the blocks (0.34, SeatPlacement::kv_margin_bytes)
};

struct GpuPlan {
  GpuSpec gpu;
  std::vector<GpuShare> shares;
  std::uint64_t free_bytes = 0;  ///< torch total - used - budgets - outside
};

struct Plan {
  std::vector<SeatModel> seats;
  std::vector<SeatPlacement> placements;  ///< parallel to seats
  std::vector<GpuPlan> gpus;
  bool all_fit = false;
  /** No seat that vLLM cannot start as it stands (SeatPlacement::cannot_start; a folder only sized is no such
   * seat): plan's exit code fails without it, whatever the memory (issue 55 tryout: exit 0, ok:true). */
  bool all_start = true;
  bool searched = false;  ///< the greedy order failed and the search found the placement
  std::vector<std::string> notes;
};

/** The profile run vLLM makes for the seat with these scheduler limits on a GPU named `gpu_name`. */
ProfileShape seat_profile_shape(const SeatModel& s, std::int64_t batched, std::int64_t seqs, std::string_view gpu_name);

/** Places the seats. USAGE error for pins naming unknown GPUs or not matching tp. */
Result<Plan> make_plan(std::vector<SeatModel> seats, std::vector<GpuSpec> gpus);

}  // namespace fp4forge::kvplan
