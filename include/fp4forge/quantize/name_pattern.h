#pragma once
/**
 * A user's module pattern (`--ignore`, `--force-quantize`, a recipe's `match`): an exact module name, or
 * `re:REGEX` matched like compressed-tensors matches its targets and `ignore` (Python `re.match`: anchored at
 * the start only), with the linear-time engine (util/regex.h).
 */
#include <optional>
#include <string>
#include <string_view>

#include "fp4forge/core/error.h"
#include "fp4forge/util/regex.h"

namespace fp4forge::quant {

class NamePattern {
 public:
  /** USAGE for an empty pattern or a regex that does not compile. */
  static Result<NamePattern> parse(std::string_view text);
  bool matches(std::string_view name) const;
  bool is_regex() const noexcept { return regex_; }
  const std::string& text() const noexcept { return text_; }

 private:
  std::string text_;
  bool regex_ = false;
  std::optional<Regex> re_;  // linear-time (util/regex.h)
};

}  // namespace fp4forge::quant
