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
#include "fp4forge/core/finding.h"

namespace fp4forge::doctor {

using Json = nlohmann::ordered_json;

struct TensorMeta {
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

/** What the checks look at. Built by fill_context() from a checkpoint, or by init_context() from a
 * config and a tensor list (the checkpoint as a fix would leave it). */
struct Context {
  std::filesystem::path dir;
  const Checkpoint* ckpt = nullptr;     ///< null when the directory has no weights
  Json config;                          ///< config.json
  ModelInfo info;
  std::map<std::string, TensorMeta, std::less<>> tensors;  ///< every tensor, by name
  std::string text_prefix;              ///< text-stack prefix actually used by the tensors
  /** `<text_prefix><container>.` of the decoder layers the tensors show ("model.layers.", "transformer.h.");
   * empty when no decoder stack was found (then per-layer checks are skipped with a warning). */
  std::string layer_prefix;
  bool quantized = false;               ///< quantization_config present or packed weights on disk
  /** Where the tokenizer and chat template are read from: `dir` unless doctor --tokenizer names another. */
  std::filesystem::path tokenizer_dir;
  /** doctor --tokenizer as given ("" = the model folder); with an empty tokenizer_dir, a source not readable
   * here (`tokenizer-unchecked`). */
  std::string tokenizer_from;

  const Json& text() const { return text_config(config); }
  bool has(std::string_view name) const { return tensors.find(name) != tensors.end(); }
  const TensorMeta* tensor(std::string_view name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
  /** True when some tensor name starts with `prefix`. */
  bool any_with_prefix(std::string_view prefix) const;
  /** The logical [out, in] of a Linear module (`X.weight`, or `X.weight_packed` rows; in = -1 when
   * packed); nullopt when the module has neither. */
  std::optional<std::pair<std::int64_t, std::int64_t>> linear_shape(const std::string& module) const;
  /** `text.<key>` as an integer if present and integral. */
  std::optional<std::int64_t> text_int(std::string_view key) const;
  /** Path of a text-config key in config.json (["text_config", key] for wrappers). */
  std::vector<std::string> text_path(std::string_view key) const;
};

/** Completes a Context whose dir, config and tensors are set: ModelInfo (BAD_INPUT naming config.json
 * when malformed), the text prefix the tensors use, and whether the checkpoint is quantized. */
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
void check_config_shapes(const Context& ctx, std::vector<Finding>& out);
void check_architecture(const Context& ctx, std::vector<Finding>& out);
void check_modalities(const Context& ctx, std::vector<Finding>& out);
void check_mtp(const Context& ctx, std::vector<Finding>& out);
void check_processor(const Context& ctx, std::vector<Finding>& out);
void check_tokenizer(const Context& ctx, std::vector<Finding>& out);
void check_quantized(const Context& ctx, std::vector<Finding>& out);
/** FP8 weights with no quantization config to read them by, and an hf_quant_config.json that claims FP8 over
 * 16-bit weights (issue 27 #13). */
void check_fp8_claims(const Context& ctx, std::vector<Finding>& out);

/** Runs every check above, in a fixed order. */
std::vector<Finding> run_checks(const Context& ctx);

// Typed reads of one key of a JSON object from a file: never throw, whatever the value's type.
/** True only when `j` is an object whose `key` is the boolean true. */
bool bool_of(const Json& j, std::string_view key);
/** The integer value of `key`, if `j` is an object and the value is an integer. */
std::optional<std::int64_t> int_of(const Json& j, std::string_view key);
/** Whether `j` is an object holding `key` with a non-null value. */
bool has_non_null(const Json& j, std::string_view key);

/** JSON equality with objects compared as unordered maps (key order carries no meaning). */
bool same_json(const Json& a, const Json& b);

/** Caps a list of names for a finding (first `n`), returning the count left out. */
std::size_t cap_names(std::vector<std::string>& names, std::size_t n = 20);

}  // namespace fp4forge::doctor
