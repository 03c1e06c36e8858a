#pragma once
/**
 * `fp4forge inspect`: what a checkpoint is. Family, layout, architecture class, layer counts by type,
 * parameter count and bytes by role, dtype histogram, quantization state, MTP, tied embeddings,
 * processor / tokenizer files, and warnings. The JSON schema (to_json) is documented in
 * docs/cli/inspect.md and kept stable ("schema": "fp4forge.inspect/1").
 */
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/tensor_role.h"

namespace fp4forge {

class Checkpoint;

/** Tensor count, parameter count and bytes of one bucket (a role or a dtype). */
struct TensorTally {
  std::uint64_t tensors = 0;
  std::uint64_t params = 0;  ///< elements; a U8 `weight_packed` counts 2 (two FP4 values per byte)
  std::uint64_t bytes = 0;
};

/** One compressed-tensors config group. */
struct QuantGroup {
  std::string name;    ///< config_groups key, e.g. "group_0"
  std::string scheme;  ///< derived: "NVFP4A16", "NVFP4", "MXFP4A16", "FP8", "W4A16", ... or "custom"
  std::string format;  ///< group format, else the global format
  std::vector<std::string> targets;
  std::string observer;  ///< the weights' observer as written ("memoryless_minmax", "nvfp4_expanded_mse", ...; "" when absent)
  /** Quantized modules on disk vLLM applies this group to (vllm_group_of by the module's name, then as a Linear
   * class; a fused layer's shards each as their own module). */
  std::uint64_t modules = 0;
};

struct QuantState {
  std::string state = "none";  ///< "none", "compressed-tensors" or "unknown:<quant_method>"
  std::string quant_method;    ///< verbatim, "" when no quantization_config
  std::string format;          ///< global format ("nvfp4-pack-quantized", ...), "" when absent
  std::vector<QuantGroup> groups;
  std::uint64_t ignore_entries = 0;     ///< length of quantization_config.ignore
  std::uint64_t quantized_modules = 0;  ///< modules with a `weight_packed` tensor
  /** Quantized modules on disk that no config group selects (vLLM has no scheme to load them with): the first 3,
   * which the warning names, and the count. */
  std::vector<std::string> uncovered;
  std::uint64_t uncovered_count = 0;
  /** An FP8 source (model/fp8_source.h): fp8_source_json of it, null otherwise. */
  nlohmann::ordered_json fp8_source;
  /** A format fp4forge neither reads nor writes (model/fp8_source.h foreign_quantization): what it is, e.g.
   * "quant_method 'mxfp4': MXFP4 (gpt-oss release format: ...)"; "" otherwise. */
  std::string foreign;
};

struct InspectReport {
  std::string dir;
  ModelInfo info;
  ArchClass arch;
  std::vector<std::pair<std::string, std::uint64_t>> layers_by_type;  ///< from layer_types, first-seen order
  std::uint64_t layers_in_tensors = 0;  ///< distinct text-stack layer indices among the tensors
  std::uint64_t num_tensors = 0, total_params = 0, total_bytes = 0;
  std::uint64_t num_shards = 0;
  std::string index_file;                                   ///< "" when there is no index
  std::vector<std::pair<Role, TensorTally>> roles;          ///< non-empty roles, enum order
  std::vector<std::pair<std::string, TensorTally>> dtypes;  ///< by dtype name, sorted
  QuantState quant;
  bool mtp_present = false;
  std::uint64_t mtp_tensors = 0;
  bool lm_head_present = false;
  std::string lm_head_name;  ///< the output head's tensor as stored (`lm_head.weight`, DeepSeek-V4's `head.weight`)
  std::vector<std::string> processor_files;  ///< processor_config.json, preprocessor_config.json, ...
  std::vector<std::string>
      tokenizer_files;  ///< tokenizer.json, tokenizer_config.json, chat_template.jinja, ...
  bool has_generation_config = false;
  std::vector<std::string> warnings;
  /** doctor's serving-file findings (model/serving_files.h): `missing-tokenizer` (error), `missing-chat-template`
   * (warning). inspect is informational: they do not change its exit code. */
  std::vector<Finding> findings;

  /** The tally of one role (zeros when absent). */
  TensorTally role(Role r) const;
};

/** Inspects an opened checkpoint (config may be absent: family "unknown" and a warning). */
Result<InspectReport> inspect_checkpoint(const Checkpoint& ckpt);

/** Stable JSON form ("schema": "fp4forge.inspect/1"); see docs/cli/inspect.md. */
nlohmann::ordered_json to_json(const InspectReport& r);

/** Human-readable multi-line text (aligned role table). */
std::string to_text(const InspectReport& r);


/** The architecture registry as `inspect --families` prints it: one row per family (id, name, model
 * types, vLLM architectures, MTP form, mixer, expert layout notes). */
std::string families_text();
nlohmann::ordered_json families_json();

}  // namespace fp4forge
