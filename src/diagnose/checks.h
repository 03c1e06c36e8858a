#pragma once
// Internal to the diagnose module: the checks themselves (the Context they see is public,
// fp4forge/diagnose/diagnose.h). Each check appends findings; none touches the file system except to read the
// directory's small JSON files.
#include <filesystem>
#include <optional>
#include <vector>

#include "fp4forge/core/finding_sink.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/util/json_get.h"

namespace fp4forge::doctor {

/** Reads a JSON file of the checkpoint directory (nullopt when absent; BAD_INPUT when malformed). */
Result<std::optional<Json>> read_json_file(const std::filesystem::path& p);

void check_gemma4_globals(const Context& ctx, FindingSink& out);
void check_architecture(const Context& ctx, FindingSink& out);
void check_modalities(const Context& ctx, FindingSink& out);
void check_processor(const Context& ctx, FindingSink& out);
void check_tokenizer(const Context& ctx, FindingSink& out);
void check_quantized(const Context& ctx, FindingSink& out);
/** FP8 weights with no quantization config to read them by, and an hf_quant_config.json that claims FP8 over
 * 16-bit weights (issue 27 #13). */
void check_fp8_claims(const Context& ctx, FindingSink& out);

/** tensor-dtype: a float parameter in an integer dtype (error), or in the other 16-bit float than config.json's
 * dtype (warning) (check_dtypes.cc). */
void check_tensor_dtypes(const Context& ctx, FindingSink& out);

/** config-value-unusable: max_position_embeddings, rope_theta and the rope blocks (check_config_values.cc). */
void check_config_values(const Context& ctx, FindingSink& out);

/** Runs every check above, in a fixed order. */
void run_checks(const Context& ctx, FindingSink& out);

/** JSON equality with objects compared as unordered maps (key order carries no meaning). */
bool same_json(const Json& a, const Json& b);

}  // namespace fp4forge::doctor
