#pragma once
/**
 * The vLLM version a seat is planned for, and the memory rules that differ between versions
 * (docs/plan-overheads.md, "Rules per version", lists each with the vLLM code and pull request).
 *
 * Versions are modelled from vLLM's source: release tags where they could be read, merge dates where
 * only those were known (marked "inferred" in the docs). The code read last is vLLM main at 2026-08-17
 * (017e9f4448), the commit 0.28.0 was cut from; 0.29 - 0.33 differ from it by what their pull requests
 * (dated, release membership from release notes) changed, each marked inferred in docs/plan-overheads.md.
 * 0.34 adds Model Runner V2's sizing from the memory measured after warm-up with a margin
 * (measure_kv_cache_blocks of the stored extensible-KV-cache code; its release in 0.34 inferred).
 */
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/core/error.h"

namespace fp4forge::kvplan {

/** How vLLM prints "GPU KV cache size: N tokens". */
enum class TokensReport {
  BLOCKS,       ///< <= 0.9.0: num_blocks * block_size
  PER_GROUP,    ///< 0.9.1 - 0.20: num_blocks // len(groups) * min_block_size
  CONCURRENCY,  ///< >= 0.21: int(max_concurrency * max_model_len)
};

/** The formula as text ("max_concurrency x max_model_len", ...), for reports. */
std::string_view tokens_report_name(TokensReport t);

struct VllmRules {
  std::string version;                  ///< as given, normalised ("0.28", "0.9.1")
  int major = 0, minor = 0, patch = 0;
  bool startup_check = true;            ///< >= 0.9.1: free memory at start >= util * total, else refused
  bool requested_ceil = true;           ///< >= 0.14: requested = ceil(util * total) (before: the float)
  bool budget_from_snapshot = true;     ///< >= 0.9.1: only memory taken after the start-up snapshot counts
  bool cuda_graphs_in_budget = true;    ///< >= 0.21: the V1 model runner's CUDA-graph estimate is taken out of
                                        ///< the KV budget (Model Runner V2: see v2_runner_reserves_graphs)
  bool v2_runner_reserves_graphs = true;  ///< >= 0.29 (inferred, #53306): Model Runner V2 profiles its graphs
                                          ///< into the budget too; before, its estimate is 0 (the graphs are
                                          ///< captured after the KV cache, in the headroom)
  double default_util = 0.92;           ///< 0.90 before 0.21
  TokensReport tokens = TokensReport::CONCURRENCY;
  bool concurrency_from_tokens = false; ///< <= 0.9.0: concurrency = tokens / max_model_len (not block-rounded)
  /** Batches a sliding-window layer's reserve counts with async scheduling on: >= 0.26 (#47728; the 0.26.0
   * rename of max_num_batched_tokens to max_in_flight_tokens, tt-xla #5908) vLLM reserves W - 1 +
   * max_concurrent_batches x max_num_batched_tokens, and max_concurrent_batches is 2 under async scheduling
   * (1 without, pipeline parallelism not modelled); before 0.26, W - 1 + max_num_batched_tokens. Use
   * sliding_in_flight_tokens(), which takes the seat's async scheduling. */
  int sliding_in_flight_factor = 2;
  bool hybrid_prefix_caching = true;    ///< >= 0.28 (#50991; 0.27 undecided, inferred): hybrid models default to
                                        ///< prefix caching (state layers in "align" mode); off before
  bool big_gpu_batched_16k = true;      ///< >= 0.28: GPUs >= 160 GiB default max_num_batched_tokens 16384
  int cuda_graph_cap = 512;             ///< the largest default capture size
  bool sm100_graph_cap_1024 = true;     ///< >= 0.28 (#49390): 1024 on data-center Blackwell (SM100: B200, B300, GB200)
  /** >= 0.34 (inferred), Model Runner V2 only: the KV cache is sized from the memory measured after warm-up,
   * min(requested - non-KV use, headroom - margin) with headroom the device's free memory plus the KV
   * prefix and margin = max(kv_margin_floor, kv_margin_fraction x headroom) (measure_kv_cache_blocks). */
  bool kv_from_free_memory = false;
  std::uint64_t kv_margin_floor = 256ull << 20;  ///< KV_CACHE_MARGIN_FLOOR_BYTES
  double kv_margin_fraction = 0.02;              ///< KV_CACHE_MARGIN_FRACTION
};

/** The newest version fp4forge models (the default of the seat key vllm_version). */
inline constexpr std::string_view kNewestVllm = "0.34";
/** The oldest version fp4forge models (the V1 engine's first memory rules). */
inline constexpr std::string_view kOldestVllm = "0.8";
inline constexpr int kOldestVllmMinor = 8, kNewestVllmMinor = 34;  ///< the same, as 0.MINOR

/** Rules of `version` ("0.24", "0.9.1", "v0.11.2", "newest"). USAGE for a malformed version, one older
 * than kOldestVllm, or one newer than kNewestVllm (the rules of a version not read are not guessed). */
Result<VllmRules> vllm_rules(std::string_view version);
/** The rules of kNewestVllm (the default of every seat). */
const VllmRules& newest_vllm_rules() noexcept;

/**
 * Whether vLLM runs the model on Model Runner V2 (vllm/config/vllm.py use_v2_model_runner /
 * _is_default_v2_model_runner_model at 0.28, 017e9f4448): from 0.25 (#44443) every dense model that is not
 * hybrid, plus the MoE architectures of DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES; Qwen3 dense from 0.22, Llama and
 * Mistral dense from 0.23; never before 0.22. `architecture` is architectures[0], `model_type` the text
 * model's. Features that fall back to V1 (ngram speculation, --kv-sharing-fast-prefill, ...) are not modelled.
 */
bool v2_model_runner(const VllmRules& r, std::string_view architecture, std::string_view model_type, bool moe,
                     bool hybrid) noexcept;
/** Whether the CUDA-graph estimate is taken out of the KV budget for a model on that runner. */
bool graphs_in_budget(const VllmRules& r, bool v2_runner) noexcept;
/** True for a GPU of the SM100 family by its product name (B200, B300, GB200, GB300): vLLM's
 * is_device_capability_family(100). The RTX PRO 6000 / RTX 50 Blackwell cards are SM120 and are not. */
bool sm100_family(std::string_view gpu_name) noexcept;

/** The tokens a sliding-window layer keeps beyond its window, as vLLM reserves them per request:
 * max_num_batched_tokens, times 2 from 0.26 when async scheduling is on (sliding_in_flight_factor). */
std::int64_t sliding_in_flight_tokens(const VllmRules& r, std::int64_t max_num_batched_tokens,
                                      bool async_scheduling) noexcept;

/** True when the rules are those of version >= major.minor.patch. */
bool at_least(const VllmRules& r, int major, int minor, int patch = 0) noexcept;

}  // namespace fp4forge::kvplan
