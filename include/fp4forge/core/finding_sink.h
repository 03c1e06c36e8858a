#pragma once
/**
 * How findings are built and collected, one way for every check (doctor's, verify's, the shape rules'):
 *
 *   sink.add(finding_kind("router-quantized"), {.group = family, .message = "...", .tensors = {name}});
 *
 * The kind's row (core/finding_kinds.h) gives the id and the default severity; the fields say the rest, by name.
 * One merge and cap policy, one wording:
 * - findings of one kind, severity and non-empty `group` are merged into the first: its message gains
 *   " (and N more like it in GROUP)", the tensors of all are listed; an empty group is never merged;
 * - every finding's tensors are sorted and de-duplicated, and capped at `max_listed` with
 *   " [T tensors, first M listed]" appended to the message;
 * - take() returns them errors first, then warnings, then info, in the order added within a severity.
 */
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fp4forge/core/finding.h"
#include "fp4forge/core/finding_kinds.h"

namespace fp4forge {

/** What one check says about one finding, besides its kind. Fill it with designated initializers. */
struct FindingFields {
  std::optional<Severity> severity;  ///< absent: the kind's default
  std::string group;                 ///< merge key (a tensor family, a rule); "" = never merged
  std::string message;               ///< one line: what, where, expected vs actual
  std::vector<std::string> tensors;
  std::string key, expected, actual, hint;
  std::optional<std::string> fix;    ///< doctor --fix's description (a fixable kind only)
};

/** Tensors listed per finding unless a command says otherwise (verify --max-listed). */
inline constexpr std::size_t kMaxListedTensors = 20;

class FindingSink {
 public:
  explicit FindingSink(std::size_t max_listed = kMaxListedTensors) : max_listed_(max_listed) {}
  void add(const FindingKind& kind, FindingFields fields);
  /** A finding already built (another module's report): never merged, capped like the rest. */
  void add(Finding finding);
  bool empty() const noexcept { return items_.empty(); }
  /** The findings, merged and capped, errors first; the sink is empty after. */
  std::vector<Finding> take();

 private:
  struct Item {
    Finding finding;
    std::string group;
    std::size_t count = 1;
  };
  std::size_t max_listed_;
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace fp4forge
