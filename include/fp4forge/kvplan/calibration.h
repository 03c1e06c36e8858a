#pragma once
/**
 * Calibration from the seat's own start-up log (seat key log=FILE; docs/plan-overheads.md, "Calibration from
 * the seat's log").
 *
 * The log prints every term plan estimates. plan reads what it can (startup_log.h) and measures the overhead
 * the budget lost outside weights and KV:
 *     measured = ceil(util x torch total) - "Model loading took" - "Available KV cache memory"
 * (the exact "--kv-cache-memory=N ... to fit into requested memory" bytes where printed). At the logged
 * settings the seat is planned with that figure and its logged weights, so it gets the logged KV memory back.
 * At other settings the measured overhead is carried, and each term whose inputs changed (a different
 * max_num_seqs, max_num_batched_tokens, enforce_eager, mm, tp, vLLM version or card family) moves by its
 * estimate's difference between the logged and the planned settings; those terms are named as re-estimated.
 * The utilization, max_model_len and KV dtype change no overhead term, so they carry exactly.
 */
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4forge/kvplan/budget.h"
#include "fp4forge/kvplan/kv_cache.h"
#include "fp4forge/kvplan/startup_log.h"
#include "fp4forge/kvplan/vllm_version.h"

namespace fp4forge::kvplan {

/** What a seat's log says about the settings it ran with (args first, then the profiling lines). */
struct LoggedSeat {
  StartupLog log;
  std::optional<VllmRules> rules;           ///< of the version the log prints (nullopt: not printed or not modelled)
  std::optional<double> util;               ///< gpu_memory_utilization (args, else the profiling lines)
  std::optional<std::int64_t> batched;      ///< max_num_batched_tokens (args; else vLLM's default for the card)
  std::optional<std::int64_t> max_num_seqs;
  std::optional<int> tp;
  std::optional<bool> enforce_eager, mm, async_scheduling;
  std::optional<int> spec_tokens;
  std::optional<std::int64_t> max_model_len;
  /** Batches in flight the log's concurrency shows a sliding-window layer reserving (1 or 2), measured from
   * its KV memory and concurrency when the seat has sliding-window layers and the two rules differ. */
  std::optional<int> sliding_in_flight_batches;
  std::string sliding_note;  ///< what the sliding-window check found, for the report
};

/** One term, plan's estimate at the logged settings beside the log's figure (nullopt: not printed). */
struct CalibrationRow {
  std::string term;  ///< "weights", "KV memory", "profile peak (activations, sampler)", ...
  std::optional<double> estimate, logged;  ///< bytes, tokens or x as `unit` says
  std::string unit;  ///< "bytes", "tokens", "x"
  std::string line;  ///< "line 123" where the logged figure was read, or what is missing
};

/** The overhead a calibrated seat is planned with, and how it was obtained. */
struct CalibratedOverhead {
  bool measured = false;             ///< the log had what the measurement needs (else the estimate is used)
  std::uint64_t measured_bytes = 0;  ///< at the logged settings (in the budget)
  std::uint64_t bytes = 0;           ///< carried to the planned settings
  std::uint64_t torch_total = 0;     ///< the total the logged request was computed from
  std::string total_source;          ///< "the log (line N)", "GPU 0 (the logged card)", ...
  double util = 0.0;                 ///< the logged utilization used
  std::string util_source;
  std::vector<std::string> carried;      ///< terms carried as measured
  std::vector<std::string> reestimated;  ///< terms moved by the estimate's difference, with why
  std::vector<std::string> gaps;         ///< what the log did not print and what that costs
  std::vector<CalibrationRow> rows;      ///< estimate beside the log, term by term
};

/** The settings a log states (its args, its version, the profiling lines). */
LoggedSeat read_logged_seat(const StartupLog& log);

/** Measures, from the log's KV memory and concurrency, how many batches the seat's sliding-window layers
 * reserved (LoggedSeat::sliding_in_flight_batches): vLLM >= 0.26 reserves W - 1 + 2 x max_num_batched_tokens
 * with async scheduling on and W - 1 + max_num_batched_tokens with it off, and the concurrency it printed
 * tells which. Leaves it unset (with a note) when the layout has no sliding-window layer, the log lacks a
 * figure, the two rules give the same reservation, or neither matches within the printed rounding. */
void measure_sliding_reserve(LoggedSeat& seat, const KvLayout& layout, const VllmRules& rules);

/** What the calibration needs of the seat and the GPU it is planned on. */
struct CalibrationInput {
  const LoggedSeat* logged = nullptr;
  const ModelInfo* info = nullptr;
  const KvLayout* layout = nullptr;  ///< for the KV rows (tokens and concurrency at the logged settings)
  ProfileShape planned;            ///< the profile shape at the planned settings
  const VllmRules* planned_rules = nullptr;
  OverheadTerms planned_terms;     ///< estimate_overhead at the planned settings
  std::uint64_t gpu_torch_total = 0;  ///< the planned GPU's torch total (0: none given)
  std::string gpu_id;
  std::int64_t default_batched = 0, default_seqs = 0;  ///< vLLM's defaults for the logged card
  std::uint64_t weights_estimate = 0;  ///< plan's weights per rank (headers or weights=)
  bool weights_from_log = false;       ///< the seat is planned with the logged weights
  bool has_tower = false;              ///< a vision / audio tower (multimodal profiling when mm is on)
};

/** The measured and carried overhead (see the file comment). Pure. */
CalibratedOverhead calibrate_overhead(const CalibrationInput& in);

/** The seat's "calibration" in --json (docs/cli/plan.md); `c` null when the seat was not placed on a GPU. */
nlohmann::ordered_json to_json(const LoggedSeat& seat, const CalibratedOverhead* c);
/** The report's log lines: the measured overhead, the estimate beside the log term by term, carried and
 * re-estimated terms, gaps. */
std::string to_text(const LoggedSeat& seat, const CalibratedOverhead* c);

}  // namespace fp4forge::kvplan
