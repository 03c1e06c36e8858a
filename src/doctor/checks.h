#pragma once
// Internal to the doctor module: the inputs every check sees, and the checks themselves. Each check
// appends findings; none touches the file system except to read the directory's small JSON files.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/shape_rules.h"
#include "fp4forge/core/finding.h"
#include "fp4forge/util/json_get.h"

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
};

/** Completes a Context whose dir, config and tensors are set: init_shape_context, and whether the checkpoint is
 * quantized. */
Status init_context(Context& ctx);
/** A Context for an opened checkpoint (`ckpt` must outlive it; ctx.ckpt is null when it has no tensors). */
Status fill_context(Context& ctx, const Checkpoint& ckpt);

/** Reads a JSON file of the checkpoint directory (nullopt when absent; BAD_INPUT when malformed). */
Result<std::optional<Json>> read_json_file(const std::filesystem::path& p);

// --- Gemma-4 global KV fields / per_layer_config (architectures.md §3.2, §3.3) -----------------------

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

void check_gemma4_globals(const Context& ctx, std::vector<Finding>& out);
void check_architecture(const Context& ctx, std::vector<Finding>& out);
void check_modalities(const Context& ctx, std::vector<Finding>& out);
void check_processor(const Context& ctx, std::vector<Finding>& out);
void check_tokenizer(const Context& ctx, std::vector<Finding>& out);
void check_quantized(const Context& ctx, std::vector<Finding>& out);
/** FP8 weights with no quantization config to read them by, and an hf_quant_config.json that claims FP8 over
 * 16-bit weights (issue 27 #13). */
void check_fp8_claims(const Context& ctx, std::vector<Finding>& out);

/** Runs every check above, in a fixed order. */
std::vector<Finding> run_checks(const Context& ctx);

/** JSON equality with objects compared as unordered maps (key order carries no meaning). */
bool same_json(const Json& a, const Json& b);


}  // namespace fp4forge::doctor
