#pragma once
/**
 * A seat: one vLLM server for one checkpoint, with the engine options that change its memory.
 * `--seat NAME=DIR[:key=value,...]` is parsed by parse_seat_arg(); load_seat() reads the checkpoint
 * (config.json plus safetensors headers, or a config-only folder with weights=SIZE) and builds
 * everything that does not depend on which GPU the seat lands on.
 */
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/quantize/recipe.h"
#include "fp4forge/kvplan/calibration.h"
#include "fp4forge/kvplan/kv_cache.h"
#include "fp4forge/kvplan/serving.h"
#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/kvplan/weights.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/util/hf_cache.h"

namespace fp4forge::kvplan {

/** One per-seat key, the values it takes and its default (what `--seat` help and the key errors show). */
struct SeatKey {
  std::string_view key;
  std::string_view values;  ///< "" for a key whose values the key names (a count, a name)
  std::string_view dflt;    ///< what applies when the key is left out (docs/cli/plan.md, "Seat keys")
};

/** The per-seat keys, in documentation order: parse_seat_arg reads exactly these, the CLI help lists them. */
inline constexpr SeatKey kSeatKeys[] = {
    {"max_model_len", "TOKENS", "max_position_embeddings"},
    {"kv_cache_dtype", "auto|bf16|fp8|fp8_e5m2|int8_per_token_head|...", "auto"},
    {"gpu_memory_utilization", "FRACTION", "chosen by plan"},
    {"max_num_batched_tokens", "TOKENS", "vLLM's rule for the GPU"},
    {"tp", "N", "1"},
    {"prefix_caching", "on|off", "on"},
    {"spec_tokens", "N", "0"},
    {"mm", "on|off", "on"},
    {"assume", "SCHEME", "none: the weights as stored"},
    {"recipe", "FILE", "none: the weights as stored"},
    {"weights", "SIZE", "the safetensors headers"},
    {"overhead", "SIZE", "--overhead, else the estimate"},
    {"concurrency", "REQUESTS", "1"},
    {"gpu", "ID[+ID]", "placed by plan"},
    {"port", "PORT", "8000 + the seat's index"},
    {"block_size", "TOKENS", "vLLM's choice"},
    {"mamba_ssm_dtype", "DTYPE", "config.json's mamba_ssm_dtype, else the model dtype"},
    {"mamba_cache_dtype", "DTYPE", "the model dtype"},
    {"hybrid_manager", "on|off", "on"},
    {"served_name", "NAME", "the seat's NAME"},
    {"vllm_version", "X.Y", "the newest modelled, or the log's"},
    {"max_num_seqs", "N", "vLLM's rule for the GPU"},
    {"enforce_eager", "on|off", "off"},
    {"dtype", "auto|bfloat16|float16|float32", "auto"},
    {"allow_long_max_model_len", "on|off", "off"},
    {"api_key_env", "VAR", "none: the seat takes no API key"},
    // calibration and replacement (docs/cli/plan.md "Calibration from the seat's log", "A seat that replaces another")
    {"async_scheduling", "on|off", "on (vLLM's default), or what the log shows"},
    {"log", "FILE", "none"},
    {"replaces", "SEAT", "none"},
    {"frees", "SIZE", "none"},
    {"vllm_args", "'--FLAG VALUE ...' (last key)", "none"}};

/** "max_model_len=TOKENS, kv_cache_dtype=auto|bf16|..., ...": every key of kSeatKeys with its values. */
std::string seat_keys_help();

struct SeatArg {
  std::string name;  ///< [A-Za-z0-9][A-Za-z0-9._-]*: service, file and served model name
  /** As given: a folder or a Hugging Face repo id ORG/NAME[@REVISION]; in SeatModel::arg, the folder read
   * (the cache snapshot for a repo id). */
  std::filesystem::path dir;
  std::optional<std::int64_t> max_model_len;            ///< default: max_position_embeddings
  /** The engine options that shape the KV cache: kv_cache_dtype, tp, prefix_caching, spec_tokens,
   * block_size, mamba_ssm_dtype / mamba_cache_dtype, hybrid_manager (seat keys -> KvOptions fields). */
  KvOptions kv;
  std::optional<double> gpu_memory_utilization;         ///< default: chosen by the planner
  std::optional<std::int64_t> max_num_batched_tokens;   ///< default: vLLM's rule for the GPU
  bool mm = true;                                       ///< multimodal profiling / inputs
  std::optional<QuantScheme> assume;                         ///< assume=SCHEME: size Linears as quantized
  /** recipe=FILE: size as `quantize --recipe FILE` writes (quantize/recipe.h): its rules and ignore entries, its
   * default scheme unless assume= names one (nvfp4a16 when neither does). The file is read when the seat is
   * parsed. */
  std::string recipe;
  std::vector<quant::SchemeRule> assume_rules;
  std::vector<std::string> assume_ignore;
  std::optional<std::uint64_t> weights;                 ///< weights=SIZE (config-only folders)
  std::optional<std::uint64_t> overhead;                ///< overhead=SIZE (beats --overhead)
  double concurrency = 1.0;                             ///< target requests at max_model_len
  std::vector<std::string> gpus;                        ///< gpu=ID[+ID...]: pinned placement
  std::optional<int> port;                              ///< host port (default: host_port())
  std::string served_name;                              ///< default: name
  bool prefix_caching_given = false;                    ///< prefix_caching= was given (else vLLM's default)
  VllmRules vllm = newest_vllm_rules();                 ///< the rules that apply (vllm_version=, read once)
  std::optional<std::int64_t> max_num_seqs;             ///< default: vLLM's rule for the GPU
  bool enforce_eager = false;                           ///< no CUDA graphs (--enforce-eager)
  bool allow_long_max_model_len = false;                ///< VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the stack
  /** api_key_env=VAR: the seat requires the key VAR holds. The stack passes `--api-key ${VAR:?...}` (compose reads
   * VAR when it starts it; the key is never written), the LiteLLM entry `api_key: os.environ/VAR`, the header's
   * probe `--api-key-env VAR`. */
  std::string api_key_env;
  // --- how the stack serves it (serving.h) ---
  /** vllm_args=: extra vLLM flags, split into words (vllm_args.h); the last key of a seat. */
  std::vector<std::string> vllm_args;
  bool vllm_args_given = false;
  bool vllm_version_given = false;                      ///< vllm_version= was given (else the log's, or the newest)
  /** async_scheduling=on|off (--async-scheduling / --no-async-scheduling): from 0.26 a sliding-window layer
   * reserves two batches in flight with it on (vllm_version.h sliding_in_flight_tokens); default on, vLLM's. */
  std::optional<bool> async_scheduling;
  std::string log;                                      ///< log=FILE: the seat's vLLM start-up log (calibration.h)
  std::string replaces;                                 ///< replaces=SEAT: the running seat this one replaces
  std::optional<std::uint64_t> frees;                   ///< frees=SIZE: memory of other tenants this seat frees
  std::vector<std::string> given;                       ///< the key=value pieces as given (keys normalised)
};

/** The host port of a seat that gives no port=: kBasePort + its index in --seat order. */
inline constexpr int kBasePort = 8000;
/** The host port seat `index` (its place in --seat order) binds in its compose stack: port=, else kBasePort + index. */
inline int host_port(const SeatArg& a, std::size_t index) {
  return a.port ? *a.port : kBasePort + static_cast<int>(index);
}

/** Parses `NAME=DIR[:key=value,...]` (keys: kSeatKeys; sizes as parse_size). USAGE errors. */
Result<SeatArg> parse_seat_arg(std::string_view text);

/** Everything about a seat that does not depend on its GPU. */
struct SeatModel {
  SeatArg arg;
  std::optional<hf_cache::HubSnapshot> hub;  ///< when DIR was a repo id resolved in the Hugging Face cache
  ModelInfo info;
  KvLayout layout;
  WeightEstimate weights;        ///< from headers (empty when weights=SIZE)
  bool weights_given = false;    ///< weights=SIZE
  /** The quantization the checkpoint is stored in (stored_quantization: "compressed-tensors FP8_BLOCK+NVFP4A16");
   * "" for an unquantized one. A checkpoint quantize does not read as a source is planned as stored: assume= and
   * recipe= are dropped from `arg` with a note (they size what quantize writes from a BF16 or FP8 source). */
  std::string quantization;
  std::uint64_t weight_bytes = 0;           ///< all ranks
  std::uint64_t weight_bytes_per_rank = 0;  ///< ceil(weight_bytes / tp)
  std::optional<std::uint64_t> overhead;    ///< explicit (seat key or --overhead); else the estimate
  VllmRules rules;                          ///< of arg.vllm_version
  std::int64_t max_model_len = 0;
  std::int64_t max_position_embeddings = 0;
  std::vector<std::string> notes;
  /** The model's own length limit as vLLM derives it (max_position_embeddings times the RoPE scaling factor). */
  std::int64_t derived_max_model_len = 0;
  /** Why vLLM refuses this seat whatever the memory (a max_model_len above the derived limit without
   * allow_long_max_model_len); "" when it does not. */
  std::string refusal;
  /** Image, parser flags, extra flags and what keeps vLLM from starting the seat (serving.h). */
  SeatServing serving;
  std::optional<LoggedSeat> logged;  ///< log=FILE read (its settings, and the sliding-window reserve it shows)
  bool weights_from_log = false;     ///< weights per rank are the log's "Model loading took"
};

/** The seat with the options its log states for every key the seat did not give (its args, and its vLLM
 * version when modelled). USAGE when the log names a vLLM version plan does not model and none is given. */
Result<SeatArg> merge_logged_options(const SeatArg& arg, const StartupLog& log);
/** Attaches the log to a loaded seat: the sliding-window reserve its concurrency shows, and its weights per GPU
 * ("Model loading took") when the seat runs at the logged tp and no weights= is given. BAD_INPUT when the log's
 * weights are more than twice the seat's own (or under half): the log is another model's. */
Status apply_logged_seat(SeatModel& m, LoggedSeat logged);

/**
 * Resolves DIR (a folder, or a repo id in the Hugging Face cache: hf_cache::resolve), opens the seat's
 * checkpoint and builds its KV layout and weight size. `global_overhead` is
 * --overhead. BAD_INPUT for unreadable or unsupported configs (exit 3), IO for file errors, USAGE for
 * options that contradict the model (spec_tokens without MTP, weights= with assume=).
 */
Result<SeatModel> load_seat(const SeatArg& arg, std::optional<std::uint64_t> global_overhead);

}  // namespace fp4forge::kvplan
