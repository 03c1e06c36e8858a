#pragma once
/**
 * Weight bytes as vLLM loads a checkpoint, from its safetensors headers (no tensor data is read).
 *
 * - Every tensor counts with its stored size, except floating-point tensors wider than 16 bits that
 *   are not quantization parameters: vLLM loads those in the model dtype (bf16), so they count 2 bytes
 *   per element.
 * - Gemma-4 full-attention layers with `attention_k_eq_v` have no `v_proj`; vLLM copies `k_proj` into
 *   the V slot of its fused qkv_proj, so those k_proj tensors count twice (architectures.md §4.1).
 * - `mtp.*` tensors count only when speculative decoding is enabled (vLLM loads the MTP drafter then).
 * - `assume` sizes the weights with quantize's own planner (quant::make_plan, the decisions of
 *   `quantize --dry-run`: policy, shape rules, fused sets, whole-layer expert rules, both expert
 *   orientations): each unit it quantizes as that scheme writes it (linear_bytes in codec/scheme.h; for
 *   NVFP4A16 N*K/2 + N*K/16 + 4 bytes per Linear), everything it keeps as stored. When the planner refuses
 *   the checkpoint (quantize would too), the policy alone sizes it and `planner_note` says why.
 */
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/core/error.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/quantize/recipe.h"

namespace fp4forge::kvplan {

struct WeightOptions {
  bool include_mtp = false;      ///< speculative decoding with the checkpoint's MTP module
  std::optional<QuantScheme> assume;  ///< size quantizable Linears as this scheme writes them
  /** With `assume`: a recipe's rules and ignore entries (quantize/recipe.h); each unit is sized as the scheme its
   * rule gives it writes it. */
  std::vector<quant::SchemeRule> rules;
  std::vector<std::string> ignore;
};

struct WeightEstimate {
  std::uint64_t bytes = 0;               ///< total bytes vLLM holds (all ranks together)
  std::uint64_t stored_bytes = 0;        ///< sum of the stored tensor sizes (headers)
  std::uint64_t duplicated_v_bytes = 0;  ///< Gemma-4 k_eq_v: k_proj copied into the V slot
  std::uint64_t mtp_bytes = 0;           ///< MTP tensors; part of `bytes` only with include_mtp
  std::uint64_t upcast_saved_bytes = 0;  ///< bytes saved by loading fp32 tensors in bf16
  std::uint64_t quantized_saved_bytes = 0;  ///< bytes saved by `assume`
  std::size_t quantized_linears = 0;       ///< Linears sized as the assumed scheme
  std::size_t tensors = 0;
  /** With `assume`: "" when quantize's planner sized it, else why not (its refusal) and that the policy
   * alone did. */
  std::string planner_note;
};

/** The quantization the checkpoint is stored in, for reports: "compressed-tensors FP8_BLOCK+NVFP4A16" (scheme_labels,
 * the spelling verify and diff print), an FP8 release's label, a foreign format ("quant_method 'gptq': ..."); ""
 * when it declares none. */
std::string stored_quantization(const Checkpoint& ckpt);

/** Sizes the checkpoint's weights (see the file comment). Pure over the headers. */
WeightEstimate estimate_weights(const Checkpoint& ckpt, const ModelInfo& info, const WeightOptions& opts);

}  // namespace fp4forge::kvplan
