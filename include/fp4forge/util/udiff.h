#pragma once
/**
 * Unified diff (the `diff -u` / `git diff` text format) of two in-memory texts.
 *
 * Lines are compared byte-for-byte including their terminator, so a CRLF/LF change or a missing final
 * newline shows up (the latter as `\ No newline at end of file`, like GNU diff). The edit script is
 * Myers' shortest one after trimming the common prefix and suffix; when the two middles differ by more
 * than `max_edit_distance` lines the middle is reported as one replaced block (still a correct diff,
 * just not minimal) so the cost stays bounded on huge unrelated inputs.
 *
 * **Example**:
 *   unified_diff("a\nb\n", "a\nc\n", "config.yaml", "config.yaml (new)")
 *   -> "--- config.yaml\n+++ config.yaml (new)\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
 */
#include <cstddef>
#include <string>
#include <string_view>

namespace fp4forge::util {

struct UdiffOptions {
  int context = 3;                        ///< unchanged lines shown around each change
  std::size_t max_edit_distance = 4000;   ///< above this the middle becomes one replaced block
};

/** The unified diff from `before` to `after`, with `--- from_label` / `+++ to_label` headers.
 * Returns an empty string when the texts are identical. */
std::string unified_diff(std::string_view before, std::string_view after, std::string_view from_label,
                         std::string_view to_label, const UdiffOptions& opts = {});

/** Counts of the `+` and `-` lines a diff of the two texts would contain. */
struct DiffStat {
  std::size_t added = 0;
  std::size_t removed = 0;
};
DiffStat diff_stat(std::string_view before, std::string_view after, const UdiffOptions& opts = {});

}  // namespace fp4forge::util
