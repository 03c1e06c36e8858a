#pragma once
/**
 * The leaf of a tensor name (its last component) as a kind of parameter (issue 54): one table of every leaf
 * fp4forge gives a meaning to. The readers that used to keep their own lists (classify's module parameters
 * and quantization parameters, verify's module parameters and KV-cache scales, the FP8 reader's dropped
 * calibration scales) read its columns; where they differ on purpose, the difference is a column, not a
 * second list. A new leaf is one row in tensor_param.cc; a test checks that every leaf has exactly one row.
 */
#include <cstdint>
#include <span>
#include <string_view>

namespace fp4forge {

enum class ParamKind : std::uint8_t {
  WEIGHT,              // weight: the plain (or FP8 E4M3) weight
  BIAS,                // bias
  PAYLOAD,             // weight_packed: a 4-bit scheme's packed codes
  SCALE,               // weight_scale: group / channel / block scales
  GLOBAL_SCALE,        // weight_global_scale (compressed-tensors), weight_scale_2 (ModelOpt NVFP4)
  INPUT_GLOBAL_SCALE,  // input_global_scale
  ZERO_POINT,          // weight_zero_point
  SHAPE,               // weight_shape: the unpacked [N, K]
  G_IDX,               // weight_g_idx: GPTQ's group index
  SCALE_INV,           // weight_scale_inv: native FP8's block scales (DeepSeek)
  INPUT_SCALE,         // input_scale, input_scale_ub: activation calibration
  INPUT_ZERO_POINT,    // input_zero_point
  OUTPUT_SCALE,        // output_scale
  OUTPUT_ZERO_POINT,   // output_zero_point
  KV_SCALE,            // k_scale, v_scale, q_scale, prob_scale, kv_scale: the attention's KV-cache calibration
  OTHER,               // any other leaf: a fused experts' projection (gate_up_proj), A_log, sinks, ...
};
inline constexpr int kParamKindCount = static_cast<int>(ParamKind::OTHER) + 1;

/** One row per leaf name. */
struct LeafTraits {
  std::string_view leaf;
  ParamKind kind;
  /** A parameter of the module the previous component names: classify() reads that module to decide the role
   * (`q_proj.weight_scale` classifies as q_proj). */
  bool module_param;
  /** TensorClass::quant_param: a parameter a quantization adds (compressed-tensors' and FP8's), which quantize
   * refuses in a source. ModelOpt's weight_scale_2 and output_scale are module parameters but not flagged
   * (the behaviour the classify tables and the quantize checksums pin). */
  bool quant_param;
  /** Collected by verify as a member of a quantized module (what a scheme writes, the plain weight, and the
   * extras a scheme does not write, which verify reports). */
  bool verify_member;
  /** Dropped when fp4forge reads an FP8 source: activation and KV-cache calibration (model/fp8_source.h). */
  bool fp8_dropped;
  /** A calibration scale of vLLM's Attention layer: classify() makes it SCALAR under an attention block, verify
   * warns when quantization_config declares no kv_cache_scheme (the legacy `kv_scale` is neither). */
  bool attention_scale;
};

/** Every row. */
std::span<const LeafTraits> leaf_table() noexcept;
/** The row of `leaf`, or nullptr for a leaf outside the table (kind OTHER). */
const LeafTraits* leaf_traits(std::string_view leaf) noexcept;
/** The kind of `leaf` (OTHER outside the table). */
ParamKind param_kind(std::string_view leaf) noexcept;
/** Stable snake_case id of a kind ("weight", "global_scale", "kv_scale", ...). */
std::string_view param_kind_name(ParamKind k) noexcept;

/** True for the parameter names a quantization adds beside its payload (scales, global scales, zero points,
 * `weight_shape`, `g_idx`, FP8's `weight_scale_inv`): metadata, not model parameters. */
bool is_quant_metadata(std::string_view leaf) noexcept;

}  // namespace fp4forge
