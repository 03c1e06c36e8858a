#pragma once
/**
 * FP8 source checkpoints: which dialect a quantized release is written in, which tensors hold FP8
 * weights and their scales, and what is dropped (docs/fp8-sources.md).
 *
 * Dialects (detected from config.json's `quantization_config`, `hf_quant_config.json`, then tensors):
 * - NATIVE: `quant_method: "fp8"` (DeepSeek-V3/R1, Qwen3 `-FP8`, transformers' FineGrainedFP8):
 *   `X` F8_E4M3 + `X_scale_inv` F32, blocks of `weight_block_size` (usually [128, 128]). With
 *   `scale_fmt: "ue8m0"` (DeepSeek-V4) the scales are E8M0 (F8_E8M0, or U8 exponent bytes, or powers of two in
 *   F32), DeepSeek's own name `X.scale` beside `X.weight` is read too, and experts may be packed E2M1
 *   (`expert_dtype: "fp4"`): `X` I8/U8 [.., N, K/2] + an E8M0 scale [.., N, K/32] (one per 32 of a row).
 * - COMPRESSED_TENSORS: `quant_method: "compressed-tensors"`, format `float-quantized`, 8-bit float
 *   weights: `X` F8_E4M3 + `X_scale` per tensor [1], per channel [N, 1] or per block
 *   [ceil(N/bn), ceil(K/bk)] (`block_structure`).
 * - MODELOPT: `quant_method: "modelopt"` / `hf_quant_config.json` with `quant_algo: "FP8"`:
 *   `X` F8_E4M3 + `X_scale` F32 scalar (per-channel when [N] / [N, 1]).
 * The layout of every scale is read from its shape against the weight's (and checked against what the
 * config declares); a payload with leading dimensions (fused 3-D experts) has one grid per matrix.
 * Activation and KV-cache scales (`input_scale`, `k_scale`, `v_scale`, ...) are dropped: the output keeps
 * activations and the KV cache in 16 bits.
 *
 * Refused (BAD_INPUT, one line naming the tensor or key): sources already in a 4-bit or integer format
 * (NVFP4, MXFP4, INT4/INT8, GPTQ, AWQ, bitsandbytes, ...), FP8 E5M2 or FNUZ payloads, a payload without
 * its scale, a scale of no FP8 weight, a scale whose shape fits no layout, a layout that contradicts
 * the config. Pure: no file system (read_fp8_source reads the two files).
 */
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge {

class Checkpoint;

enum class Fp8Dialect : std::uint8_t { NATIVE, COMPRESSED_TENSORS, MODELOPT };
std::string_view fp8_dialect_name(Fp8Dialect d) noexcept;  ///< "fp8", "compressed-tensors", "modelopt"

/** One stored low-bit weight (FP8 E4M3, or packed E2M1). */
struct Fp8Weight {
  std::string tensor;  ///< the payload, e.g. "model.layers.0.mlp.down_proj.weight"
  std::string scale;   ///< its scale tensor, e.g. "model.layers.0.mlp.down_proj.weight_scale_inv"
  std::vector<std::uint64_t> shape;         ///< the expansion's shape (a packed E2M1 payload's last dimension x 2)
  std::vector<std::uint64_t> stored_shape;  ///< the payload's shape on disk
  DType stored_dtype = DType::F8_E4M3;      ///< the payload's dtype on disk (F8_E4M3; I8, U8 or F4 for E2M1)
  fp8::ScaleGrid grid;                      ///< how `scale` covers each [rows, cols] matrix of the expansion
};

struct Fp8Source {
  Fp8Dialect dialect = Fp8Dialect::NATIVE;
  std::string label;                 ///< "fp8 (weight_scale_inv, 128x128 blocks)"
  std::vector<Fp8Weight> weights;    ///< sorted by tensor name
  std::vector<std::string> dropped;  ///< activation / KV-cache scales not carried over, sorted
  std::vector<std::string> side_files;  ///< files of the source's quantization not copied ("hf_quant_config.json")
  std::vector<std::string> warnings;    ///< what detection could not be sure of

  /** The weight stored as `tensor`, or nullptr. */
  const Fp8Weight* find(std::string_view tensor) const noexcept;
  /** True for a scale tensor of some weight, or a dropped tensor: not a tensor of the expansion. */
  bool consumed(std::string_view tensor) const noexcept;
  /** Scale layouts in use, "block 128x128 (F32)", "channel (BF16)": for messages. */
  std::string layouts() const;
};

/** A tensor as detection sees it. */
struct Fp8TensorInfo {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<std::uint64_t> shape;
};

/**
 * The FP8 source described by `config` (config.json), `hf_quant_config` (hf_quant_config.json, or
 * nullptr) and the tensor list; nullopt for an unquantized source (no quantization config, no FP8
 * tensor). BAD_INPUT for the refusals above.
 */
Result<std::optional<Fp8Source>> detect_fp8_source(const nlohmann::ordered_json& config,
                                                   const nlohmann::ordered_json* hf_quant_config,
                                                   std::span<const Fp8TensorInfo> tensors);

/** The checkpoint's hf_quant_config.json (ModelOpt), parsed under the JSON bounds; nullopt when absent or a
 * link out of the checkpoint. */
/**
 * The declared quantization when it is a format fp4forge neither reads as a source nor writes (GPTQ, AWQ, gpt-oss's
 * MXFP4 release, ModelOpt NVFP4, ...): what it is, for a message ("quant_method 'mxfp4': MXFP4 (gpt-oss ...)").
 * nullopt for no quantization, compressed-tensors (fp4forge's own output format), and FP8 releases (quant_method fp8,
 * ModelOpt FP8), whose checks are their own. `hfq`: hf_quant_config.json, or nullptr.
 */
std::optional<std::string> foreign_quantization(const nlohmann::ordered_json& config, const nlohmann::ordered_json* hfq);

Result<std::optional<nlohmann::ordered_json>> read_hf_quant_config(const Checkpoint& ckpt);

/** detect_fp8_source on an opened checkpoint (reads its hf_quant_config.json when present). */
Result<std::optional<Fp8Source>> read_fp8_source(const Checkpoint& ckpt);

/** JSON form (docs/fp8-sources.md): {"dialect", "label", "fp8_weights", "layouts": [{"layout", "block",
 * "scale_dtype", "weights"}], "dropped", "side_files", "warnings"}. */
nlohmann::ordered_json fp8_source_json(const Fp8Source& s);

/** The config of the bf16 expansion: `quantization_config` / `compression_config` removed (also under
 * `text_config`), and `expert_dtype` (DeepSeek-V4's word for how its experts are stored). */
nlohmann::ordered_json expanded_config(const nlohmann::ordered_json& config);

}  // namespace fp4forge

#include "fp4forge/model/experts.h"

namespace fp4forge {

/** Elements [begin, begin + count) of FP8 weight `w` of `ck`, expanded to bf16 (codec/fp8_dequant.h).
 * BAD_INPUT naming the tensor and element when one is NaN or not finite. */
/**
 * The one value scan of an FP8 release (quantize, verify and doctor all use it): every weight of `src`
 * dequantized in chunks; BAD_INPUT naming the first element that is NaN or infinite (a NaN code, or a NaN /
 * infinite / huge scale). Reads every FP8 byte once; memory is one chunk.
 */
Status scan_fp8_values(const Checkpoint& ck, const Fp8Source& src);

/**
 * The checks of an FP8 / packed FP4 release beyond detection that read no weight payload (quantize runs them before
 * writing anything, verify and doctor report a failure as `fp8-source-invalid`; R4-B7, R4-B11): every scale finite
 * and > 0 (a zero or negative scale is corrupt: compressed-tensors writes eps for a zero group and never a negative
 * one, and fp4forge's verify rejects it in an output), and a payload with leading dimensions beside routed experts is a
 * fused expert tensor (quantize refuses any other storage form there). BAD_INPUT naming the tensor. Reads the scales.
 */
Status check_fp8_source(const Checkpoint& ck, const Fp8Source& src, const ModelInfo& info);

Status dequant_elements(const Checkpoint& ck, const Fp8Weight& w, std::uint64_t begin, std::uint64_t count,
                        std::uint16_t* out);
/** Rows [r0, r1) of `slice` (a matrix inside FP8 weight `w`, in elements) expanded to bf16, row-major. */
Status dequant_slice_rows(const Checkpoint& ck, const Fp8Weight& w, const MatrixSlice& slice, std::uint64_t r0,
                          std::uint64_t r1, std::uint16_t* out);

}  // namespace fp4forge
