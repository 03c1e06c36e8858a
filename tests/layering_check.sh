#!/usr/bin/env bash
# The module layering holds (issue 31): a module's sources and public headers include only the headers of
# modules it links, directly or through them, as src/CMakeLists.txt declares them (FP4FORGE_DEPS_<module>);
# the CLI, tools and tests sit above every module. Prints each offending include; exit 1 when there is one.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
declare -A deps
while read -r mod rest; do
  deps[$mod]=$(grep -oE 'fp4forge_[a-z]+' <<<"$rest" | sed 's/fp4forge_//' | tr '\n' ' ' || true)
done < <(sed -nE 's/^set\(FP4FORGE_DEPS_([a-z]+)[[:space:]]+(.*)\)/\1 \2/p' "$ROOT/src/CMakeLists.txt")
closure() {  # every module reachable from $1 through deps, $1 included
  local seen=" $1 " todo="${deps[$1]:-}" m
  while [ -n "${todo// }" ]; do
    read -r m todo <<<"$todo"
    [[ "$seen" == *" $m "* ]] && continue
    seen+="$m "
    todo+=" ${deps[$m]:-}"
  done
  echo "$seen"
}
bad=0
for mod in "${!deps[@]}"; do
  allowed=$(closure "$mod")
  while IFS=: read -r file line inc; do
    used=$(sed -E 's/.*"fp4forge\/([a-z_]+)\/.*/\1/' <<<"$inc")
    if [[ "$allowed" != *" $used "* ]]; then
      echo "layering: ${file#"$ROOT"/}:$line: module '$mod' includes fp4forge/$used/ (it links only:$allowed)"
      bad=1
    fi
  done < <(grep -rnE '#include "fp4forge/[a-z_]+/' "$ROOT/src/$mod" "$ROOT/include/fp4forge/$mod" 2>/dev/null || true)
done
[ "$bad" -eq 0 ] && echo "layering: ${#deps[@]} modules, every include within its declared dependencies"
exit "$bad"
