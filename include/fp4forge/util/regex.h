#pragma once
/**
 * The one regular-expression engine of fp4forge: RE2, linear in the length of the input whatever the
 * pattern (no backtracking, no recursion), so a hostile pattern (`(a+)+$`) or a 100 KB name cannot hang or
 * crash a command. Every `re:` pattern (config `ignore`, `--ignore`, `--force-quantize`) and every text scan
 * (secret masking) goes through it.
 *
 * Syntax: RE2's, which is Python's `re` less backreferences and lookaround; `\Z` (Python's end of string)
 * is accepted and read as RE2's `\z`. A pattern RE2 cannot compile is an error naming what it refused.
 */
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"

namespace re2 {
class RE2;
}

namespace fp4forge {

class Regex {
 public:
  /** Compiles `pattern` (Python `re` syntax as above). The error message says why RE2 refused it. */
  static Result<Regex> compile(std::string_view pattern);

  /** Python `re.match`: a match starting at position 0 (not necessarily reaching the end). */
  bool match_prefix(std::string_view s) const;
  /** Python `re.fullmatch`. */
  bool full_match(std::string_view s) const;

  /** One match of a pattern with capture groups: [begin, end) offsets of each group (group 0 = whole match;
   * begin = end = npos for a group that did not take part). */
  struct Match {
    std::vector<std::size_t> begin, end;
  };
  /** Every non-overlapping match in `s`, left to right (an empty match advances by one byte). */
  std::vector<Match> find_all(std::string_view s) const;

  const std::string& pattern() const noexcept { return pattern_; }

 private:
  std::shared_ptr<const re2::RE2> re_;
  std::string pattern_;
};

}  // namespace fp4forge
