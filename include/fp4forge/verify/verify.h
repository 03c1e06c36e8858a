#pragma once
/**
 * `fp4forge verify`: prove a compressed-tensors checkpoint of one of the five schemes fp4forge writes
 * (NVFP4A16, MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16; docs/schemes.md "How verify proves each scheme")
 * before it is served (failure-catalog.md F1, F4, F9, F11-F16, F18-F20; kind ids documented in
 * docs/cli/verify.md). The config group names the scheme (quant_scheme_of); what the scheme writes per
 * Linear is linear_tensors (codec/scheme.h), what it may quantize model/scheme_policy.h.
 *
 * Structural checks need only the quantized checkpoint (verify_structure, also used by doctor):
 *   quantization_config (present, parses, a preset field for field), per-module tensor set / dtypes /
 *   shapes as the scheme writes them, the scheme's K / N rules, leftovers, orphans, ignore coverage both
 *   ways (CT/vLLM matching), policy (routers, protected roles; GatedDeltaNet projections at 8 bits), fused
 *   sets (all-or-nothing; NVFP4A16: bit-identical weight_global_scale), values (NaN scale bytes, FP8 NaN
 *   codes, invalid scales, global scales, non-finite kept tensors) and geometry against config.json.
 * With a source checkpoint (verify_checkpoint with `against`): every quantized tensor is dequantized
 *   and compared with its source (per-expert slices of fused 3-D experts are mapped back with the
 *   family orientation); its relative RMS error is compared with what the reference encoding of the
 *   same source gives (the "expected" error for its statistics); NVFP4A16's sampled rows, and every byte
 *   of the other schemes, are re-encoded by the reference encoders and compared; kept tensors must be
 *   bit-identical; every source tensor must have its counterpart and vice versa.
 * Streaming: tensors are processed one (fused set) at a time and their pages released afterwards, so
 * memory stays bounded by the largest fused set plus small chunk buffers.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/util/progress_sink.h"
#include "fp4forge/model/experts.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/core/error.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/core/finding_sink.h"

namespace fp4forge {

struct VerifyOptions {
  bool scan_values = true;         ///< read scale bytes, global scales and kept float tensors
  double outlier_factor = 2.0;     ///< error-outlier when rel RMS > factor x the reference encoding's
  double outlier_floor = 0.02;     ///< ... and > this absolute value (tiny/degenerate tensors)
  std::size_t worst_n = 10;        ///< tensors listed in stats.worst
  std::uint64_t reencode_rows = 32;  ///< NVFP4A16: rows per tensor re-encoded by the scalar codec (0: off);
                                     ///< the other schemes re-encode every row
  std::size_t max_listed = kMaxListedTensors;  ///< tensor names listed per finding (the message gives the count)
  ExpertLayoutOptions experts;     ///< settles an ambiguous fused-expert orientation of the source
  ProgressSink* progress = nullptr;  ///< --against: reports source bytes compared (the CLI draws a bar)
  bool strict = false;               ///< --strict: a warning fails too (VerifyReport::strict)
  unsigned jobs = 0;                 ///< --against: worker threads for the search and the re-encode (0 = default_workers)
  /** A checkpoint in a quantization format fp4forge neither reads nor writes (foreign_quantization): an error for
   * verify, which cannot prove it; doctor, a health check of any checkpoint, makes it a warning. */
  bool foreign_is_warning = false;
  /** doctor's config-vs-tensor shape rules (model/shape_rules.h: `config-shape-mismatch`, `expert-layout`) besides
   * verify's own geometry check, less what that check already reports: a vocab_size the embedding and lm_head do
   * not have is an error here too. doctor, which runs the rules itself, turns it off. */
  bool config_shapes = true;
  /** verify --tokenizer: where `vllm serve --tokenizer` will load the tokenizer from (a folder or a cached repo id;
   * "" = the checkpoint folder, vLLM's default). verify_checkpoint reports doctor's serving-file findings for it
   * (model/serving_files.h: `missing-tokenizer` error, `missing-chat-template` warning). */
  std::string tokenizer;
};

/** doctor's findings, less the shape-rule findings (config-shape-mismatch) of Linear modules that verify's geometry
 * check (geometry-mismatch, which doctor runs on a quantized checkpoint) reports too: one break, said once, by the
 * check that names the payload and checks the packed dimension (issue 55: two errors for one intermediate_size). */
std::vector<Finding> drop_shape_duplicates(std::vector<Finding> findings);

/** Error of one quantized tensor against its source (with --against). */
struct TensorError {
  std::string module;          ///< quantized module, e.g. "model.layers.0.self_attn.q_proj"
  std::string source;          ///< source tensor (and slice), e.g. "...experts.gate_up_proj[3, 0:64]"
  std::uint64_t rows = 0, cols = 0;
  double rel_rms = 0;          ///< ||deq(Q) - W|| / ||W|| (0 when both are all-zero)
  double ref_rel_rms = 0;      ///< the same for the reference encoding of W with the config's observer (expected error)
  double minmax_rel_rms = 0;   ///< the same for min-max's encoding of W (= ref_rel_rms for a min-max config)
  float global_scale = 0;      ///< weight_global_scale in the checkpoint (NaN outside NVFP4A16)
  float expected_global_scale = 0;  ///< gs from the source amax over the module's fused set (R1; NaN outside NVFP4A16)
  std::size_t group = 0;       ///< the config group vLLM gives the module (index, file order)
  /** The source's values exactly (a lossless passthrough or cast, or an exact module): error 0 by construction, so
   * left out of the means (issue 55 tryout E-8: they diluted the headline's error). */
  bool exact = false;
};

struct VerifyStats {
  std::string scheme;  ///< scheme_labels of the config ("NVFP4A16", "FP8_BLOCK", ..., "none" without quantization_config)
  std::string observer;  ///< the weights' observer the config names ("memoryless_minmax", "nvfp4_expanded_mse", ...),
                         ///< one per scheme above, in its order
  /** One line per config group, file order: "group_0 NVFP4A16 (--scheme nvfp4a16), observer nvfp4_expanded_mse
   * (--observer mse)": the config's names beside the spellings quantize takes. */
  std::vector<std::string> groups;
  std::uint64_t tensors = 0;
  std::uint64_t quantized_modules = 0;
  std::uint64_t kept_tensors = 0;
  std::uint64_t kept_linear = 0;       ///< unquantized 2-D weights (Linear-like)
  std::uint64_t quantized_params = 0;  ///< N*K summed over quantized modules
  std::uint64_t total_params = 0;      ///< quantized_params + elements of every non-quantization tensor
  std::uint64_t fused_sets = 0;        ///< fused sets found (R1 and vLLM packed sets)
  std::uint64_t text_linear_params = 0;     ///< Linear-like text-stack parameters (quantized or kept)
  std::uint64_t text_quantized_params = 0;  ///< of those, quantized
  double text_quantized_share() const noexcept {
    return text_linear_params ? static_cast<double>(text_quantized_params) / static_cast<double>(text_linear_params)
                              : 0.0;
  }
  std::uint64_t scale_bytes_scanned = 0;
  std::uint64_t payload_bytes_scanned = 0;  ///< FP8 weight bytes scanned for NaN codes
  std::uint64_t kept_values_scanned = 0;
  double quantized_share() const noexcept {
    return total_params ? static_cast<double>(quantized_params) / static_cast<double>(total_params) : 0.0;
  }
  // --against
  bool against = false;
  std::uint64_t compared_quantized = 0;
  std::uint64_t compared_kept = 0;
  double mean_rel_rms = 0;  ///< parameter-weighted over compared quantized tensors not reproduced exactly
  double max_rel_rms = 0;   ///< infinite when a tensor's error is not finite (nonfinite_tensors > 0)
  std::uint64_t nonfinite_tensors = 0;  ///< compared tensors whose error is not finite: left out of the means
  double mean_ref_rel_rms = 0;  ///< the same for the reference encoding
  double mean_minmax_rel_rms = 0;  ///< the same for min-max's encoding (the quality report's baseline)
  std::uint64_t reencoded_rows = 0;
  std::uint64_t reencode_mismatched_rows = 0;
  unsigned jobs = 0;  ///< worker threads the comparison ran on (-j, else codec/observer.h default_workers)
  /** FP8 modules whose payload is the FP8 source's own bytes and whose dequantized values equal the source's
   * expansion element for element: a lossless passthrough (quantize's PlanOptions::fp8_passthrough). */
  std::uint64_t passthrough_modules = 0;
  /** NVFP4 modules cast from a packed FP4 source (codec/mxfp4_cast.h): their codes are the source's own bytes and
   * their dequantized values equal the source's expansion element for element. */
  std::uint64_t cast_modules = 0;
  /** Modules compared with a 16-bit source whose dequantized values equal it exactly (rounded to its dtype: values
   * the scheme represents, as an FP8 or packed FP4 release's bf16 expansion holds): no global scale, scale dtype or
   * re-encoding is judged, any encoding of exactly the source is right (issue 55 tryout: "global-scale-wrong" and
   * "scale-dtype-mismatch" against the expansion of a release whose own verify was clean). */
  std::uint64_t exact_modules = 0;
  std::vector<TensorError> per_tensor;  ///< every compared quantized tensor, sorted by module
  std::vector<TensorError> worst;       ///< worst_n by rel_rms / ref_rel_rms, worst first
  /** With two or more config groups, each group's own error against min-max's (issue 55: the headline averaged an
   * NVFP4 group's gain with an FP8 group's nothing). File order; parameter-weighted like mean_rel_rms. */
  struct GroupError {
    std::string group;  ///< the config group's name
    std::uint64_t tensors = 0;  ///< compared, not reproduced exactly (the means are over them)
    double mean_rel_rms = 0, mean_minmax_rel_rms = 0;
    std::uint64_t exact_tensors = 0;  ///< reproduced exactly (a lossless pass-through or cast): left out of the means
  };
  std::vector<GroupError> group_errors;
};

struct VerifyReport {
  std::string qdir;     ///< the quantized checkpoint, as opened
  std::string against;  ///< the source, as opened ("" without --against)
  /** An FP8 --against source: fp8_source_json of it (compared as its bf16 expansion); null otherwise. */
  nlohmann::ordered_json against_format;
  std::vector<Finding> findings;  ///< errors first, then warnings, then info; stable order within
  VerifyStats stats;
  bool strict = false;  ///< VerifyOptions::strict
  bool values_scanned = true;  ///< VerifyOptions::scan_values (false: --no-values, said beside the result)
  bool ok() const noexcept { return !fails(findings, strict); }
};

/**
 * Structural checks only (no source): everything that needs just the quantized checkpoint. Never fails;
 * unreadable or contradictory inputs are findings. Used by `doctor`.
 */
std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info);
std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts,
                                      VerifyStats* stats);

/**
 * Full verification: verify_structure, then with `against` (the unquantized source) the comparison.
 * BAD_INPUT when config.json cannot be read into ModelInfo; everything else is a finding.
 */
Result<VerifyReport> verify_checkpoint(const Checkpoint& q, const Checkpoint* against,
                                       const VerifyOptions& opts = {});

/** `--json` document (docs/cli/verify.md). */
nlohmann::ordered_json to_json(const VerifyReport& r);
/** Terminal text. */
std::string to_text(const VerifyReport& r);
/** 0 clean (no error finding; with strict no warning either), 1 otherwise. */
int exit_code(const VerifyReport& r);

}  // namespace fp4forge
