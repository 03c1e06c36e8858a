#pragma once
// The user's module patterns in the planner (private to quantize/): `--ignore` and `--force-quantize` (a recipe's
// `ignore` joins --ignore), which of them decided something, and the verdict on those that did not.
#include <functional>
#include <string>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/quantize/name_pattern.h"
#include "fp4forge/quantize/plan.h"

namespace fp4forge::quant {

/** One option's patterns, each with whether it decided something. */
struct PatternSet {
  std::vector<NamePattern> pats;
  std::vector<bool> used;
  const char* flag;  ///< "--ignore" or "--force-quantize", for messages
  /** Index of the first matching pattern over any of `names` (it is used), or -1. */
  int match(const std::vector<std::string>& names);
  /** Whether any pattern matches one of `names`; each that does is used (it decided something). */
  bool take(const std::vector<std::string>& names);
};

/**
 * The patterns that decided nothing (R4-B15). One whose modules an earlier pattern took (`selects_candidate`: a name
 * given twice, beside a recipe's ignore, or under an earlier re:) changed nothing and is no mistake. Otherwise: the
 * `re:` patterns are one warning (naming the first few, R4-B19); an exact name of no tensor is USAGE; `--ignore` of
 * a tensor no Linear holds (a norm, a bias, lm_head tied to the embeddings) is a warning, as it stays unquantized
 * anyway; `--force-quantize` of one is USAGE.
 */
Status check_unused_patterns(const PatternSet& ps, const std::vector<TensorDecision>& decisions, bool tied_lm_head,
                             const std::function<bool(const NamePattern&)>& selects_candidate,
                             std::vector<std::string>& warnings);

}  // namespace fp4forge::quant
