#!/usr/bin/env bash
# The house's size rules (issue 31, docs/DEVELOPING.md "Size"): no function in src/, cli/ or tools/ over 150
# lines, and no source file over 1,000 lines without a reason written at its top ("Why one file" in its
# first 12 lines). Functions are found as the house writes them: a definition starts at column 0 and ends
# at the brace that closes it (string and character literals and // comments are blanked before counting).
# Prints each offender; exit 1 when there is one.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
MAX_FN=${MAX_FN:-150}
MAX_FILE=${MAX_FILE:-1000}
bad=0
while IFS= read -r -d '' f; do
  rel=${f#"$ROOT"/}
  n=$(wc -l <"$f")
  if [ "$n" -gt "$MAX_FILE" ] && ! head -n 12 "$f" | grep -q "Why one file"; then
    echo "size: $rel has $n lines (over $MAX_FILE) and no 'Why one file' reason at its top"
    bad=1
  fi
  out=$(awk -v max="$MAX_FN" -v file="$rel" '
    function strip(s) {
      gsub(/R"\([^)]*\)"/, "\"\"", s)
      gsub(/'\''(\\.|[^'\''\\])'\''/, "'\'' '\''", s)
      gsub(/"(\\.|[^"\\])*"/, "\"\"", s)
      sub(/\/\/.*/, "", s)
      return s
    }
    function opens(s) { return gsub(/\{/, "{", s) }
    function closes(s) { return gsub(/\}/, "}", s) }
    {
      line = strip($0)
      if (!infn) {
        if (pending) {
          if (line ~ /;[[:space:]]*$/) { pending = 0; next }
          if (line ~ /\{[[:space:]]*$/) { infn = 1; depth = 0; pending = 0 }
          else next
        } else if (line ~ /^[A-Za-z]/ && line !~ /^(namespace|struct|class|enum|union|template|using|typedef|return|static_assert|extern|#)/ && line ~ /\(/) {
          start = NR; head = $0
          if (line ~ /\)[[:space:]]*(const[[:space:]]*)?(noexcept[[:space:]]*)?(->[^{]*)?\{[[:space:]]*$/) { infn = 1; depth = 0 }
          else if (line ~ /[(,][[:space:]]*$/) { pending = 1; next }
          else next
        } else next
      }
      depth += opens(line) - closes(line)
      if (infn && depth == 0 && NR >= start) {
        if (NR - start + 1 > max) printf "size: %s:%d: a function of %d lines (over %d): %s\n", file, start, NR - start + 1, max, substr(head, 1, 100)
        infn = 0
      }
    }' "$f")
  if [ -n "$out" ]; then
    echo "$out"
    bad=1
  fi
done < <(find "$ROOT/src" "$ROOT/cli" "$ROOT/tools" -name '*.cc' -print0 2>/dev/null)
exit $bad
