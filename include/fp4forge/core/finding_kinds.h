#pragma once
/**
 * The one registry of finding kinds: every kind doctor or verify can report is one row here (id, default
 * severity, whether doctor --fix has a fix, failure-catalog entries, one line of meaning, and the command
 * tables that document it: docs/cli/doctor.md, docs/cli/verify.md). Findings are built from a row
 * (core/finding_sink.h): a check names its kind with finding_kind("id"), checked when compiled, and gets the
 * default severity from the row unless it says otherwise. A new kind is one row here and one row in the docs
 * table of each command that reports it (a unit test holds the two together).
 */
#include <span>
#include <string_view>

#include "fp4forge/core/finding.h"

namespace fp4forge {

/** Which command's documentation lists a kind (a bit set). */
inline constexpr unsigned kInDoctor = 1;
inline constexpr unsigned kInVerify = 2;

struct FindingKind {
  std::string_view id;       ///< stable kebab-case id
  Severity severity;         ///< default severity (a check may report it otherwise: the docs say when)
  bool fixable;              ///< doctor --fix has an automatic fix
  std::string_view catalog;  ///< failure-catalog entries, e.g. "F27"
  std::string_view summary;  ///< one line: what it means
  unsigned commands;         ///< kInDoctor | kInVerify: the docs tables that list it
};

// clang-format off
inline constexpr FindingKind kFindingKinds[] = {
    // ---- doctor (docs/cli/doctor.md, "Finding kinds"), in documentation order ----
    {"unknown-architecture", Severity::ERROR, false, "F31",
     "an MTP architecture named as the main model (error); a class the family table does not list, an absent "
     "or multiple `architectures`, or a family outside fp4forge's table (warnings)", kInDoctor},
    {"architecture-needs-recent-vllm", Severity::WARNING, false, "F31",
     "Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM: registered in vLLM only from about 0.28 (an error with "
     "--vllm-version below it)", kInDoctor},
    {"wrapper-flat-mismatch", Severity::ERROR, false, "F30",
     "`architectures`, config nesting and tensor prefixes disagree (wrapper vs flat); says what vLLM and "
     "transformers will do", kInDoctor},
    {"gemma4-missing-global-kv-fields", Severity::ERROR, true, "F27",
     "Gemma-4 without global_head_dim / num_global_key_value_heads and no per_layer_config; the values are "
     "derived from the tensor shapes", kInDoctor},
    {"gemma4-per-layer-config-only", Severity::INFO, true, "F28",
     "full-attention geometry only in per_layer_config (transformers >= 5.15 form): needs vLLM >= 0.28; an error "
     "with --vllm-version below it, whose fix writes the flat keys the tensors prove", kInDoctor},
    {"per-layer-config-redundant", Severity::WARNING, true, "F29",
     "per_layer_config repeats the flat global fields exactly", kInDoctor},
    {"per-layer-config-conflict", Severity::ERROR, false, "F28",
     "per_layer_config and the flat global fields disagree: transformers and vLLM build different models", kInDoctor},
    {"per-layer-config-invalid", Severity::ERROR, false, "F28",
     "per_layer_config keys that are not full-attention layer indices in [0, num_hidden_layers)", kInDoctor},
    {"gemma4-activation", Severity::ERROR, false, "",
     "Gemma-4 hidden_activation other than gelu_pytorch_tanh (vLLM raises)", kInDoctor},
    {"config-value-invalid", Severity::ERROR, false, "F32",
     "a config value the strict transformers 5.17 config rejects (hidden_size_per_layer_input: null)", kInDoctor},
    {"config-value-unusable", Severity::WARNING, false, "",
     "a config value vLLM or transformers cannot build from: max_position_embeddings not a positive integer, a "
     "non-positive rope_theta, an unknown rope_type, a rope type without its required parameters", kInDoctor},
    {"config-shape-mismatch", Severity::ERROR, false, "F27, F30",
     "a shape invariant of the family is broken (attention rows, kv heads, experts, linear attention, "
     "layer_types, lm_head vs tie_word_embeddings, PLE, vision projector, MTP)", kInDoctor | kInVerify},
    {"config-shape-unchecked", Severity::WARNING, false, "",
     "no decoder-layer stack outside the towers: the per-layer shape rules were not evaluated", kInDoctor},
    {"expert-layout", Severity::ERROR, false, "F5",
     "fused 3-D experts transposed against the family's orientation, or fused and per-expert forms mixed", kInDoctor | kInVerify},
    {"mtp-declared-missing", Severity::WARNING, true, "F8",
     "mtp_num_hidden_layers >= 1 (num_nextn_predict_layers) but the mtp.* tensors (the extra decoder layers) are "
     "missing; --fix --mtp-from SRC splices them from the original release", kInDoctor},
    {"mtp-present-undeclared", Severity::WARNING, false, "F8",
     "mtp.* tensors that mtp_num_hidden_layers does not declare", kInDoctor},
    {"audio-declared-weightless", Severity::INFO, false, "",
     "audio_config declared but no audio tower tensors", kInDoctor},
    {"vision-declared-weightless", Severity::ERROR, false, "F30",
     "vision_config declared but no vision tower tensors (info for text-only classes)", kInDoctor},
    {"missing-processor", Severity::ERROR, false, "F33",
     "multimodal checkpoint with neither processor_config.json:image_processor nor preprocessor_config.json", kInDoctor},
    {"missing-preprocessor-config", Severity::WARNING, true, "F33",
     "processor_config.json has an image_processor section but preprocessor_config.json is absent", kInDoctor},
    {"processor-mismatch", Severity::ERROR, false, "F33, F34",
     "image processor vs vision_config (patch / merge / pooling / max_soft_tokens), absurd size limits, or "
     "the two processor files disagree (warning)", kInDoctor},
    {"fp8-without-config", Severity::ERROR, false, "",
     "FP8 tensors with neither quantization_config nor hf_quant_config.json to read them by", kInDoctor},
    {"fp8-claim-without-fp8-weights", Severity::ERROR, false, "",
     "hf_quant_config.json claims FP8 but no tensor is FP8", kInDoctor},
    {"missing-tokenizer", Severity::ERROR, false, "",
     "no tokenizer file in the folder (or in the --tokenizer source): vLLM's start-up fails to load one", kInDoctor | kInVerify},
    {"tokenizer-unchecked", Severity::WARNING, false, "",
     "--tokenizer names a source that is neither a local folder nor a repo in the Hugging Face cache: not checked", kInDoctor | kInVerify},
    {"missing-chat-template", Severity::WARNING, false, "",
     "a tokenizer but no chat template: /v1/chat/completions refuses requests without --chat-template", kInDoctor | kInVerify},
    {"tokenizer-truncation", Severity::WARNING, true, "F35",
     "tokenizer.json with non-null truncation or padding", kInDoctor},
    {"tokenizer-vocab-size", Severity::ERROR, false, "",
     "the tokenizer produces token ids at or above the model's vocab_size (warning for a multimodal model, whose "
     "placeholder tokens may lie there)", kInDoctor},
    {"tokenizer-max-length", Severity::ERROR, false, "F35, F36",
     "tokenizer_config.json model_max_length / max_length below max_position_embeddings", kInDoctor},
    {"invalid-json-file", Severity::ERROR, false, "",
     "a processor or tokenizer JSON file that does not parse", kInDoctor},
    {"ignore-regex", Severity::INFO, false, "F23",
     "for each `re:` entry of quantization_config.ignore, the on-disk modules it matches under CT re.match "
     "semantics (warning when full-match semantics would match fewer)", kInDoctor},
    {"index-total-size", Severity::WARNING, true, "",
     "the index's metadata.total_size is not the sum of tensor bytes (transformers and vLLM ignore it); the fix "
     "writes the sum", kInDoctor | kInVerify},
    {"shard-not-in-index", Severity::INFO, false, "",
     "a *.safetensors file the index does not name (Mistral's consolidated.safetensors, a leftover): vLLM and "
     "transformers never load it, quantize does not copy it", kInDoctor | kInVerify},
    {"tensor-dtype", Severity::ERROR, false, "",
     "a norm, embedding, head or (unquantized) Linear parameter in an integer dtype (error); one in the other "
     "16-bit float than config.json's dtype (warning)", kInDoctor},
    {"header-only-weights", Severity::ERROR, false, "",
     "shards written by `synth --header-only`: their data reads as zeros; for plan, inspect and doctor's layout "
     "checks, never for quantize or serving", kInDoctor},
    {"no-weights", Severity::INFO, false, "",
     "the directory has no safetensors: config-vs-tensor checks were skipped", kInDoctor},
    // ---- verify (docs/cli/verify.md, "Finding kinds"), in documentation order ----
    {"quant-config-missing", Severity::ERROR, false, "",
     "config.json has no quantization_config (nor compression_config)", kInVerify},
    {"quant-config-invalid", Severity::ERROR, false, "",
     "a quantization_config key of the wrong type, no config_groups, a bad ignore regex, or targets that select "
     "nothing or miss a quantized module", kInVerify},
    {"quant-config-unsupported", Severity::ERROR, false, "",
     "quant_method other than compressed-tensors, a group that is not one of the five presets, or groups of "
     "different schemes", kInVerify},
    {"quant-format-foreign", Severity::ERROR, false, "",
     "quantized in a format fp4forge neither reads nor writes (gptq, awq, mxfp4, ModelOpt NVFP4, ...): the "
     "quantized-tensor checks did not run (doctor: warning)", kInVerify},
    {"quant-config-multi-group", Severity::WARNING, false, "F26",
     "more than one config group (a recipe's mixed output has them)", kInVerify},
    {"quant-config-status", Severity::WARNING, false, "", "quantization_status present and not `compressed`",
     kInVerify},
    {"quantized-module-incomplete", Severity::ERROR, false, "F20",
     "a quantized module lacks a member of its scheme, has one of the wrong dtype or shape, or carries a "
     "parameter its scheme does not write", kInVerify},
    {"weight-shape-mismatch", Severity::ERROR, false, "F20",
     "W4A16: weight_shape is not the {N, K} its weight_packed holds", kInVerify},
    {"k-not-multiple-16", Severity::ERROR, false, "", "NVFP4A16: a quantized module's K is not a multiple of 16",
     kInVerify},
    {"k-not-multiple", Severity::ERROR, false, "",
     "MXFP4A16, W4A16, FP8_BLOCK: a quantized module's K is not a multiple of the scheme's group", kInVerify},
    {"n-not-multiple", Severity::ERROR, false, "",
     "FP8_BLOCK: a quantized module's N is not a multiple of 128 (a warning where only tensor parallelism would "
     "split it)", kInVerify},
    {"leftover-weight", Severity::ERROR, false, "", "a plain weight beside weight_packed", kInVerify},
    {"input-global-scale-in-a16", Severity::ERROR, false, "",
     "input_global_scale in a weight-only (A16) checkpoint", kInVerify},
    {"orphan-scale", Severity::ERROR, false, "F20",
     "scale tensors of a module without the scheme's payload (a KV-cache scale without kv_cache_scheme: warning)",
     kInVerify},
    {"ignore-missing", Severity::ERROR, false, "F3, F4, F7, F22",
     "an unquantized 2-D weight (or fused expert block) that no ignore entry matches", kInVerify},
    {"fp8-source", Severity::INFO, false, "",
     "a consistent FP8 release (native, ModelOpt or per-tensor compressed-tensors): a source to quantize",
     kInVerify},
    {"fp8-source-invalid", Severity::ERROR, false, "",
     "an FP8 release quantize refuses (a weight without its scale, a scale of no weight, a bad scale, E5M2, ...)",
     kInVerify},
    {"quantized-but-ignored", Severity::ERROR, false, "", "a quantized module that an ignore entry matches",
     kInVerify},
    {"ignore-unmatched", Severity::WARNING, false, "F22, F23", "an ignore entry that matches no module on disk",
     kInVerify},
    {"router-quantized", Severity::ERROR, false, "F1", "a router / gate is quantized, in any scheme", kInVerify},
    {"protected-quantized", Severity::ERROR, false, "F6, F7",
     "a norm, embedding, lm_head, tower, projector, linear-attention, conv1d, MTP or scalar tensor is quantized "
     "against the scheme's policy", kInVerify},
    {"fused-set-partial", Severity::ERROR, false, "F9",
     "a fused set is partly quantized, or ignore matches only some of its members", kInVerify},
    {"fused-scale-mismatch", Severity::ERROR, false, "F11, F12, F13, F14",
     "NVFP4A16: the members of a quantized fused set have different weight_global_scale bits", kInVerify},
    {"experts-mixed", Severity::ERROR, false, "F10",
     "an expert block mixes quantized and unquantized expert weights", kInVerify},
    {"scale-nan-byte", Severity::ERROR, false, "F16", "a NaN byte in a weight_scale (E4M3 or E8M0)", kInVerify},
    {"scale-negative", Severity::ERROR, false, "", "NVFP4A16: a negative E4M3 scale", kInVerify},
    {"scale-out-of-range", Severity::WARNING, false, "",
     "MXFP4A16: an E8M0 scale byte of 253 or 254 (the group's larger values dequantize to inf)", kInVerify},
    {"scale-invalid", Severity::ERROR, false, "",
     "FP8_DYNAMIC, FP8_BLOCK, W4A16: a weight_scale element that is NaN, inf, 0 or negative", kInVerify},
    {"weight-nan-code", Severity::ERROR, false, "", "FP8: a float8_e4m3fn NaN code in a quantized weight",
     kInVerify},
    {"global-scale-invalid", Severity::ERROR, false, "F15",
     "NVFP4A16: a weight_global_scale that is NaN, inf, 0 or negative", kInVerify},
    {"nonfinite-kept-tensor", Severity::ERROR, false, "F17",
     "NaN/Inf in a kept floating tensor (with --against: also in a quantized tensor's source)", kInVerify},
    {"geometry-mismatch", Severity::ERROR, false, "F5",
     "layer or expert indices, counts or module shapes disagree with config.json", kInVerify},
    {"error-outlier", Severity::ERROR, false, "F18, F19",
     "(--against) a tensor's error exceeds --outlier-factor times the reference encoding's", kInVerify},
    {"global-scale-wrong", Severity::WARNING, false, "F19",
     "(--against, NVFP4A16) weight_global_scale deviates over 1 % from 2688/amax of its set (an error beyond 2x)",
     kInVerify},
    {"observer-unknown", Severity::WARNING, false, "F18",
     "(--against) an observer fp4forge cannot reproduce: the global-scale check and re-encode proof are skipped",
     kInVerify},
    {"reencode-mismatch", Severity::WARNING, false, "F18",
     "(--against) the stored bytes differ from the scheme's reference encoding of the source", kInVerify},
    {"codes-damaged", Severity::ERROR, false, "F18",
     "(--against, NVFP4A16) a few rows of a module otherwise byte-identical to the reference encoding differ by more "
     "than a rounding step: damaged bytes",
     kInVerify},
    {"against-swapped", Severity::ERROR, false, "",
     "(--against) the checkpoint is not quantized and the --against one is: the folders the wrong way round",
     kInVerify},
    {"against-other-model", Severity::ERROR, false, "", "(--against) the source is another model", kInVerify},
    {"kept-tensor-modified", Severity::ERROR, false, "", "(--against) a kept tensor differs from the source",
     kInVerify},
    {"missing-tensor", Severity::ERROR, false, "F8", "(--against) a source tensor has no counterpart", kInVerify},
    {"extra-tensor", Severity::ERROR, false, "F20",
     "(--against) a tensor that does not come from the source, or a quantized module without a source weight",
     kInVerify},
    {"experts-order-assumed", Severity::WARNING, false, "",
     "(--against) fused gate_up experts of a family outside the registry compared in the order quantize assumed",
     kInVerify},
    {"source-layout-undecided", Severity::WARNING, false, "",
     "(--against) the source's fused experts read both ways: a module could not be compared", kInVerify},
    {"vllm-unmapped", Severity::ERROR, false, "F9",
     "a quantized expert whose leaf name or family vLLM's expert mapping does not load quantized", kInVerify},
    {"scale-dtype-mismatch", Severity::ERROR, false, "",
     "a weight_scale in another dtype than its weight's (a warning against the model's dtype without --against), "
     "or a group's scale_dtype that is not the stored scales'", kInVerify},
    {"nothing-quantized", Severity::ERROR, false, "",
     "a quantized checkpoint in which no Linear weight is quantized", kInVerify},
    {"geometry-unchecked", Severity::WARNING, false, "",
     "modules whose shapes config.json does not state (a family outside the registry, indexer sublayers, ...)",
     kInVerify},
    {"zero-experts-stored", Severity::WARNING, false, "",
     "tensors of LongCat-Flash-style zero-computation experts (identity experts vLLM does not read)", kInVerify},
    {"low-quantized-share", Severity::WARNING, false, "",
     "less than 50 % of the text stack's Linear-like parameters are quantized", kInVerify},
};
// clang-format on

/** Below this share of the text stack's Linear-like parameters quantized, verify reports `low-quantized-share` and
 * quantize warns the same when it writes such an output. */
inline constexpr double kLowQuantizedShare = 0.5;

/** The row of `id`, looked up when compiled: a kind that is not in kFindingKinds does not compile. */
consteval const FindingKind& finding_kind(std::string_view id) {
  for (const auto& k : kFindingKinds)
    if (k.id == id) return k;
  throw "finding kind not in kFindingKinds (core/finding_kinds.h)";  // not a constant expression: an error
}

/** Whether `f` is of kind `k`: `is_kind(f, finding_kind("missing-tokenizer"))`, the id checked when compiled. */
inline bool is_kind(const Finding& f, const FindingKind& k) noexcept { return f.kind == k.id; }

/** The row of an id known only at run time (a checkpoint note's kind), or nullptr. */
const FindingKind* find_finding_kind(std::string_view id) noexcept;
/** Every row, in table order. */
std::span<const FindingKind> finding_kinds() noexcept;

}  // namespace fp4forge
