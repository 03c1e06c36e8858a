#pragma once
/**
 * The whole `fp4forge plan` as one library call (the way quant::quantize is for quantize): parse the
 * seat and GPU arguments, read nvidia-smi when asked, load every seat's checkpoint, place them
 * (make_plan), then write the SVG and the compose stacks when asked. The CLI only renders the result.
 */
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/kvplan/compose.h"
#include "fp4forge/kvplan/placement.h"

namespace fp4forge::kvplan {

struct PlanParams {
  std::vector<std::string> seats;         ///< --seat NAME=DIR[:key=value,...] (parse_seat_arg)
  std::vector<std::string> gpus;          ///< --gpu ID=TOTAL[:used=SIZE][:name=NAME] (parse_gpu_arg)
  bool gpus_from_nvidia_smi = false;      ///< append the GPUs nvidia-smi lists
  std::optional<std::uint64_t> overhead;  ///< --overhead (seat key overhead= beats it)
  std::optional<std::uint64_t> headroom;  ///< --headroom: free memory kept per GPU (GPU key headroom= beats it)
  /** --from-log FILE: one more seat, recovered from a vLLM start-up log: its checkpoint (the `model` arg), name
   * (served name) and options (non-default args), calibrated by the log (seat key log=). */
  std::string from_log;
  std::filesystem::path svg;              ///< write the SVG here ("" = none)
  std::filesystem::path compose_dir;      ///< write compose stacks here ("" = none)
  ComposeOptions compose;
};

struct PlanResult {
  Plan plan;
  std::filesystem::path svg;                        ///< written ("" = none)
  std::vector<std::filesystem::path> compose_files;  ///< written, in order
  std::vector<std::string> compose_skipped;         ///< seats without a stack (they do not fit)
  std::vector<std::string> compose_stopped;         ///< seats without a stack (they stop for another, replaces=)
  /** Seats that fit but vLLM could not start (serving.h): --emit-compose wrote nothing (exit 1). */
  std::vector<ComposeRefusal> compose_refused;
  std::vector<std::string> warnings;                ///< one per skipped seat
};

/** Errors: USAGE (bad arguments, pins), BAD_INPUT (configs), IO (files, nvidia-smi). */
Result<PlanResult> plan_seats(const PlanParams& params);

/** to_json(plan) plus "outputs": {"svg", "compose_files", "compose_skipped", "compose_stopped", "compose_refused"}
 * (docs/cli/plan.md). */
nlohmann::ordered_json to_json(const PlanResult& r);
/** The error lines of a refused --emit-compose: one per blocker ("seat 'x' cannot start: REASON; fix: FIX"), then
 * one saying nothing was written; empty when nothing was refused. */
std::vector<std::string> compose_refusal_lines(const PlanResult& r);
/** to_text(plan), then one "wrote FILE" line per file written. */
std::string to_text(const PlanResult& r);
/** 0 every seat fits (or no GPU was given), 1 a seat does not fit or --emit-compose refused a seat that cannot
 * start. */
int exit_code(const PlanResult& r);

}  // namespace fp4forge::kvplan
