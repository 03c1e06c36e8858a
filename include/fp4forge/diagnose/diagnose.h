#pragma once
/**
 * doctor's diagnosis of a checkpoint directory: every check of `fp4forge doctor` (config vs tensor shapes,
 * architecture strings and layout, Gemma-4 global fields, declared modalities, MTP, processor and tokenizer files,
 * FP8 claims, and verify's structural checks for a quantized checkpoint), read-only. Its findings are doctor's
 * kinds (docs/cli/doctor.md).
 *
 * Why its own module, below `quantize`: quantize runs these checks on its source before any work (the
 * preflight, quantize/preflight.h) and refuses on an error, so `quant::quantize` cannot be called without them;
 * doctor itself sits above quantize (its `--fix --mtp-from` uses quantize's MTP splice). The fixes stay in
 * `doctor`; the derivations both doctor --fix and quantize's output use live here (serving_fixes.h).
 *
 * It reads config.json, the safetensors headers and the small JSON files beside them, never tensor data (the
 * tied-embedding rule aside, which compares two tensors' bytes).
 */
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/model/shape_rules.h"
#include "fp4forge/safetensors/checkpoint.h"

namespace fp4forge::doctor {

using Json = nlohmann::ordered_json;

/** What the checks look at: the shape rules' context (model/shape_rules.h) and doctor's own inputs. Built by
 * fill_context() from a checkpoint, or by init_context() from a config and a tensor list. */
struct Context : ShapeContext {
  bool quantized = false;               ///< quantization_config present or packed weights on disk
  /** Where the tokenizer and chat template are read from: `dir` unless doctor --tokenizer names another. */
  std::filesystem::path tokenizer_dir;
  /** doctor --tokenizer as given ("" = the model folder); with an empty tokenizer_dir, a source not readable
   * here (`tokenizer-unchecked`). */
  std::string tokenizer_from;
  /** Processor and tokenizer files read from elsewhere than `dir` / `tokenizer_dir` (quantize's preflight: the
   * files --tokenizer-from / --processor-from will put into the output). Empty for doctor. */
  FileOverlay overlay;
  /** The folder is read as quantize's source, not served as it is (DiagnoseOptions::as_source). */
  bool as_source = false;
  /** verify's structural checks are left out (DiagnoseOptions::skip_structure). */
  bool skip_structure = false;
  /** doctor --vllm-version 0.MINOR: the release the checkpoint will be served on; -1 = not said. */
  int vllm_minor = -1;
  /** doctor --transformers-version MAJOR.MINOR as MAJOR * 1000 + MINOR; -1 = not said. */
  int transformers_version = -1;
};

/** Completes a Context whose dir, config and tensors are set: init_shape_context, and whether the checkpoint is
 * quantized. */
Status init_context(Context& ctx);
/** A Context for an opened checkpoint (`ckpt` must outlive it; ctx.ckpt is null when it has no tensors). */
Status fill_context(Context& ctx, const Checkpoint& ckpt);

struct DiagnoseOptions {
  /** doctor --tokenizer: where vLLM will load the tokenizer from (model/serving_files.h tokenizer_source). */
  std::string tokenizer;
  /** Files the checks read from elsewhere (Context::overlay). */
  FileOverlay overlay;
  /** quantize's preflight: the folder is a source to re-encode, not a checkpoint to serve as it is. A quantized
   * source's structural checks as a served checkpoint (verify_structure: whole FP8 blocks, protected modules left
   * quantized, ...) are left out: quantize expands such a source and writes its own scheme, and it checks an FP8 /
   * packed FP4 source's payload itself (model/fp8_source.h) before writing. Every other check runs. */
  bool as_source = false;
  /** doctor --vllm-version: the vLLM 0.MINOR the checkpoint will be served on (-1: not said). A config form or
   * architecture that release cannot build is then an error instead of a note about newer releases
   * (`architecture-needs-recent-vllm`, `gemma4-per-layer-config-only`, whose fix then writes the flat keys). */
  int vllm_minor = -1;
  /** doctor --transformers-version: the transformers MAJOR * 1000 + MINOR vLLM will load the config with (-1: not
   * said). A config form that release cannot read is then an error (`gemma4-per-layer-config-only` below 5.15,
   * whose fix writes the flat keys). */
  int transformers_version = -1;
  /** verify's own structural checks (verify_structure) are left out: `verify`, which ran them, adds the findings of
   * the checks only doctor runs (config, architecture, processor, tokenizer), so the two agree about a folder. */
  bool skip_structure = false;
};

/** The checkpoint opened, the context the checks saw, and their findings (errors, warnings, info; check order
 * within a severity). */
struct Diagnosis {
  std::unique_ptr<Checkpoint> ckpt;
  Context ctx;
  std::vector<Finding> findings;
};

/** Opens `dir` (config.json required, weights not) and runs every check. Errors: BAD_INPUT for a missing or
 * malformed config.json / shard / index, USAGE for a bad `tokenizer`, IO. */
Result<std::unique_ptr<Diagnosis>> diagnose(const std::filesystem::path& dir, const DiagnoseOptions& opts = {});

// --- Gemma-4 global KV fields / per_layer_config (architectures.md §3.2, §3.3): doctor's fixes re-prove them --

/** The values derived from the checkpoint's tensors for the flat Gemma-4 global fields. */
struct GlobalKvDerivation {
  std::int64_t global_head_dim = 0;
  std::int64_t num_global_kv_heads = 0;  ///< 0 when attention_k_eq_v is false (not needed)
  std::vector<std::string> evidence;     ///< tensors used
  std::string problem;                   ///< non-empty: the derivation failed its cross-checks
};
/** Derives global_head_dim / num_global_key_value_heads from full-attention k_proj / q_proj / q_norm
 * shapes and cross-checks sliding layers against head_dim / num_key_value_heads. `config` is the
 * (possibly re-read) config.json. */
GlobalKvDerivation derive_global_kv(const Context& ctx, const Json& config);

/** Whether per_layer_config is provably redundant with the flat fields in `config`; `why_not` says why
 * not. */
bool prove_per_layer_config_redundant(const Json& config, const std::vector<std::string>& layer_types,
                                      std::string* why_not);

}  // namespace fp4forge::doctor
