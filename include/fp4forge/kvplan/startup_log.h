#pragma once
/**
 * A vLLM start-up log, read: the figures a seat prints about its own memory, each with the line it came
 * from (docs/plan-overheads.md, "Calibration from the seat's log", lists the lines of each version).
 *
 * Tolerant of form: any line prefix (`(EngineCore_DP0 pid=123) INFO 08-01 12:00:00 [gpu_worker.py:276]`,
 * worker ranks, timestamps), ANSI colours, CRLF, units GiB / GB / MiB / MB / KiB / B (vLLM prints GiB values
 * labelled "GB" before 0.10: both count 2^30), thousands separators, and the formats of vLLM 0.8 to 0.34.
 * Strict about what it claims: a figure is set only when a line says it; nothing is derived here. Where TP
 * ranks print different figures, the tightest is kept (the most weights, the least KV memory) and a note
 * says so.
 */
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"

namespace fp4forge::kvplan {

/** One figure and the 1-based line it was read from. */
template <typename T>
struct LoggedValue {
  T value{};
  std::size_t line = 0;
};

struct StartupLog {
  std::string path;                                        ///< as given ("" when parsed from text)
  std::optional<LoggedValue<std::string>> version;         ///< "0.19.1rc1.dev301+g60995c05b", as printed
  /** `non-default args: {...}` (Python's repr, converted); null when absent. Keys as vLLM names them. */
  nlohmann::json args;
  std::size_t args_line = 0;
  std::optional<LoggedValue<std::uint64_t>> weights_bytes;         ///< "Model loading took X GiB" (per rank)
  std::optional<LoggedValue<std::uint64_t>> available_kv_bytes;    ///< "Available KV cache memory: X GiB"
  /** "--kv-cache-memory=N ... to fit into requested memory" (0.11+): what util x total leaves after weights,
   * peak, non-torch and the captured graphs; not the KV memory when graphs sit beside the budget (< 0.21). */
  std::optional<LoggedValue<std::uint64_t>> kv_fit_bytes;
  std::optional<LoggedValue<std::int64_t>> num_gpu_blocks;         ///< "num_gpu_blocks is: N" (the pool, exact)
  std::optional<LoggedValue<std::int64_t>> kv_cache_tokens;        ///< "GPU KV cache size: N tokens"
  std::optional<LoggedValue<double>> max_concurrency;              ///< "Maximum concurrency for L tokens ...: Cx"
  std::optional<LoggedValue<std::int64_t>> concurrency_tokens;     ///< its L
  std::optional<LoggedValue<std::uint64_t>> graph_estimate_bytes;  ///< "Estimated CUDA graph memory" (what the
                                                                   ///< budget lost, >= 0.21)
  std::optional<LoggedValue<std::uint64_t>> graph_captured_bytes;  ///< "Graph capturing finished ... took X GiB",
                                                                   ///< "CUDA graph pool memory: X (actual)", "... for
                                                                   ///< CUDAGraph memory"
  std::optional<LoggedValue<std::uint64_t>> torch_total_bytes;     ///< total_gpu_memory / "(free/total GiB)"
  std::optional<LoggedValue<std::uint64_t>> free_at_start_bytes;   ///< "Free memory on device (free/total GiB)"
  std::optional<LoggedValue<double>> util;                         ///< the utilization the profiling lines print
  std::optional<LoggedValue<std::uint64_t>> requested_bytes;       ///< util x total as printed
  std::optional<LoggedValue<std::uint64_t>> non_torch_bytes;       ///< non_torch_memory / "... for non-torch memory"
  std::optional<LoggedValue<std::uint64_t>> activation_peak_bytes; ///< activation peak / "... for peak activation"
  std::optional<LoggedValue<std::uint64_t>> consumed_bytes;        ///< "... for consumed memory (weights + non-torch)"
  std::optional<LoggedValue<std::int64_t>> batched;                ///< "Chunked prefill is enabled with
                                                                   ///< max_num_batched_tokens=N" / "Defaulting ... to N"
  std::optional<LoggedValue<std::int64_t>> max_num_seqs;           ///< "Defaulting max_num_seqs to N"
  std::optional<LoggedValue<bool>> async_scheduling;               ///< "Asynchronous scheduling is enabled|disabled"
  bool refused = false;  ///< "Free memory on device ... is less than desired GPU memory utilization"
  std::size_t refused_line = 0;
  std::vector<std::string> notes;  ///< what the reader noticed (ranks that differ, lines it could not read)

  /** True when nothing of the above was found (not a vLLM start-up log, or an empty one). */
  bool empty() const noexcept;
};

/** Reads a log's text. Never fails: a text without any known line gives an empty StartupLog. */
StartupLog parse_startup_log(std::string_view text);

/** Reads the log file at `path` (IO error when it cannot be read; BAD_INPUT when it holds no vLLM start-up
 * line at all, with a hint naming the lines looked for); errors start with `label` and the path ("log=FILE",
 * "--from-log FILE"). A log that looks cut short (its last line without a newline, or the weights loaded and no
 * KV-cache line) gets a note saying so. */
Result<StartupLog> read_startup_log(const std::string& path, std::string_view label = "log=");

/** The seat options a log's non-default args state, as seat keys ("max_model_len=262144", ...), in kSeatKeys
 * order; `model` and `served_model_name` are returned apart (they name the checkpoint and the seat). */
struct LoggedOptions {
  std::vector<std::string> keys;  ///< key=value, ready for parse_seat_arg
  std::string model;              ///< the `model` (or `model_tag`) argument; "" when absent
  std::string served_name;        ///< first `served_model_name`; "" when absent
  std::vector<std::string> ignored;  ///< args that change no figure plan computes, or plan cannot carry (named)
};
LoggedOptions logged_options(const StartupLog& log);

/** Python's repr of a dict (`{'a': 1, 'b': [True, None], 'c': 'x'}`) as JSON; values plan cannot read
 * (`PosixPath('...')`, `<object ...>`) become their text. nullopt when `text` is not a dict. */
std::optional<nlohmann::json> parse_python_repr(std::string_view text);

}  // namespace fp4forge::kvplan
