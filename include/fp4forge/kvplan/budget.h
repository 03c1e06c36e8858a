#pragma once
/**
 * The memory of a seat that is not weights and not KV cache, term by term, as vLLM's start-up takes it
 * (docs/plan-overheads.md explains each term with the vLLM code it follows and what is estimated).
 *
 * vLLM (>= 0.9.1) snapshots the GPU after creating its CUDA context, asks that util * total be free,
 * and gives the KV cache
 *     requested - weights - torch peak of the profile run - non-torch growth - CUDA-graph estimate
 * where the profile run is one dummy forward pass of max_num_batched_tokens tokens plus the sampler on
 * min(max_num_batched_tokens, max_num_seqs) rows (and the encoder for multimodal seats). fp4forge cannot
 * run the model, so the activation, sampler, encoder, non-torch and CUDA-graph terms are formulas of the
 * model's widths; weights and KV are exact. Each term is reported so a log can be checked against it.
 */
#include <cstdint>

#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/util/checked.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge::kvplan {

/** The CUDA context (and cuBLAS handles) each vLLM process creates before its snapshot. */
inline constexpr std::uint64_t kCudaContextBytes = 512ull << 20;
/** NCCL communicators of a TP > 1 worker, created before the snapshot since 0.11 (beside the budget). */
inline constexpr std::uint64_t kNcclBytes = 256ull << 20;

/** What the profile run is run with. */
struct ProfileShape {
  std::int64_t batched_tokens = 8192;  ///< max_num_batched_tokens
  std::int64_t max_num_seqs = 256;
  int tp = 1;
  int spec_tokens = 0;
  bool multimodal = false;             ///< encoder profiled (mm=on and a vision/audio tower)
  bool enforce_eager = false;          ///< no CUDA graphs
  bool v2_runner = false;              ///< Model Runner V2 (v2_model_runner): its graph estimate is 0 before 0.29
  bool sm100 = false;                  ///< an SM100-family GPU (sm100_family): capture sizes up to 1024 from 0.28
};

struct OverheadTerms {
  std::uint64_t activation = 0;   ///< transient peak of one decoder layer in the dummy forward pass
  std::uint64_t sampler = 0;      ///< logits and sampling of the profile run's rows, with the hidden states
                                  ///< and the fused-MoE workspace they run beside
  std::uint64_t profile_peak = 0; ///< max(activation, sampler): vLLM's torch_peak_increase
  std::uint64_t encoder = 0;      ///< multimodal: the encoder cache of the profile run
  std::uint64_t non_torch = 0;    ///< non-torch growth after the snapshot (cuBLAS, all-reduce buffers)
  std::uint64_t cuda_graphs = 0;  ///< capture memory (0 with enforce_eager)
  int cuda_graph_sizes = 0;       ///< default capture sizes
  bool cuda_graphs_in_budget = true;  ///< graphs_in_budget(rules, runner): else captured after the KV cache,
                                      ///< in the headroom beside the budget
  bool v2_runner = false;             ///< ProfileShape::v2_runner (reported as model_runner "v2" / "v1")
  std::uint64_t cuda_context = 0; ///< kCudaContextBytes (outside the budget, must be free at start)
  std::uint64_t nccl = 0;         ///< kNcclBytes when tp > 1 (outside the budget)

  /** What vLLM takes out of util * total besides the weights (the "overhead"). */
  std::uint64_t in_budget() const noexcept {
    return util::sat_add(util::sat_add(util::sat_add(profile_peak, encoder), non_torch),
                         cuda_graphs_in_budget ? cuda_graphs : 0);
  }
  /** What the seat holds on the GPU outside util * total. */
  std::uint64_t outside_budget() const noexcept {
    return cuda_context + nccl + (cuda_graphs_in_budget ? 0 : cuda_graphs);
  }
};

/** The default CUDA-graph capture sizes of `r` for the profile shape (vLLM's _set_cudagraph_sizes). */
int cuda_graph_size_count(const VllmRules& r, const ProfileShape& p);

/** Estimates every term for a model (its text widths; per rank under tp). Pure. */
OverheadTerms estimate_overhead(const ModelInfo& info, const ProfileShape& p, const VllmRules& r);

/** vLLM's default max_num_seqs for `vllm serve`: 1024 on GPUs >= 70 GiB that are not A100s, else 256. */
std::int64_t default_max_num_seqs(std::uint64_t gpu_total_bytes, std::string_view gpu_name);

}  // namespace fp4forge::kvplan
