#pragma once
// The quantize runner's entry points for quantize.cc, apart from run.h's public run_plan(). Internal to the
// quantize module.
#include <filesystem>

#include "fp4forge/core/error.h"
#include "fp4forge/quantize/run.h"

namespace fp4forge::quant {

/** --max-memory at least kMinMaxMemory (USAGE otherwise): checked before anything else, a dry run too. */
Status check_run_options(const RunOptions& opts);

namespace detail {
/** run_plan() without its checks of the options and DST: for a caller that made them once already. */
Result<RunSummary> run_checked(const Checkpoint& src, const QuantPlan& plan, const std::filesystem::path& dst,
                               const RunOptions& opts);
}  // namespace detail

}  // namespace fp4forge::quant
