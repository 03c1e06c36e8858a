#pragma once
/**
 * How much a seat's plan hangs on flags the operator may not state (docs/cli/plan.md, "Sensitivity"): the
 * sampler warm-up by max_num_seqs x vocabulary, the activations by max_num_batched_tokens, the CUDA graphs
 * by enforce_eager, the encoder cache by mm, and from vLLM 0.26 the sliding-window reserve by async
 * scheduling. For each, the value plan assumed (and whether it is vLLM's default), the seat key that sets it,
 * the term's bytes and the maximum concurrency at other values; and the range of concurrency all of them
 * span together, at the seat's budget. A term moves by its estimate's difference (a calibrated seat keeps its
 * measured overhead as the base).
 */
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4forge::kvplan {

struct SeatModel;
struct SeatPlacement;
struct GpuSpec;

struct SensitivityValue {
  std::string value;         ///< the flag's value ("256", "on")
  bool planned = false;      ///< the value the plan uses
  std::uint64_t bytes = 0;   ///< the term at this value (per GPU)
  double max_concurrency = 0.0;  ///< at max_model_len, with everything else as planned
};

struct SensitivityTerm {
  std::string term;      ///< "sampler warm-up and activations (profile peak)", ...
  std::string key;       ///< the seat key that sets it ("max_num_seqs")
  std::string assumed;   ///< the value planned
  bool assumed_default = true;  ///< vLLM's default (not given)
  std::vector<SensitivityValue> values;
};

struct Sensitivity {
  bool computed = false;  ///< a placed seat (a budget to compare at)
  std::vector<SensitivityTerm> terms;
  double min_concurrency = 0.0, max_concurrency = 0.0;  ///< over every combination of the values above
  std::string note;       ///< why a term is left out (overhead= given, ...)
};

/** The sensitivity of a placed seat on its rank-0 GPU. */
Sensitivity seat_sensitivity(const SeatModel& m, const SeatPlacement& p, const GpuSpec& rank0);

/** {"terms": [{term, key, assumed, assumed_default, values: [{value, planned, bytes, max_concurrency}]}],
 * "min_concurrency", "max_concurrency", "note"}, or null when not computed (docs/cli/plan.md). */
nlohmann::ordered_json to_json(const Sensitivity& s);
/** The report's "sensitivity" lines ("" when not computed). */
std::string to_text(const Sensitivity& s, double planned_concurrency);

}  // namespace fp4forge::kvplan
