#!/usr/bin/env bash
# The house's size rules (issues 31 and 54, docs/DEVELOPING.md "Size"): no function in src/, cli/, tools/ or
# include/ over 150 lines, no source file there over 1,000 lines without a reason written at its top ("Why one
# file" in its first 12 lines), and none over 1,200 lines with or without one.
#
# What is measured: every function body, wherever it is written: a free function or a method defined out of
# line, a method defined inside a class or struct body (at any indentation, nested classes too), and the
# functions of headers (include/ and src/**/*.h) as well as of .cc files. A function runs from the first line of
# its head (its template line, return type, name) to the brace that closes its body.
# How: each file is scanned once, character by character: string, character and raw-string literals and //
# and /* */ comments are blanked, preprocessor lines (with their continuations) skipped. Braces are tracked
# with what opened them: at namespace or class scope, a `{` after a declarator (`...)` followed only by
# qualifiers: const, noexcept(...), override, final, &, an upper-case macro such as HWY_ATTR, a trailing return
# type, or a constructor's `) : member(init)...` list) opens a function; after `namespace`/`extern "C"` a
# namespace; after `class`/`struct`/`union`/`enum` a class body (scanned for methods in turn); anything else
# (`= {`, a member's `{init}`) is data.
# What is NOT measured on its own: lambdas. A lambda inside a function counts toward that function's lines; a
# lambda at namespace or class scope (`auto f = [](...) {...};`) is skipped, as are macros (a multi-line #define
# is a preprocessor line). Local classes' methods count toward their enclosing function.
# Prints each offender; exit 1 when there is one. SIZE_CHECK_LIST=1 also lists every function measured
# (file:line: lines: head), to see what the scanner found. Usage: size_check.sh [ROOT] [FILE...]: with files,
# only those are checked (the checker's own test gives it synthetic files).
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
shift || true
MAX_FN=${MAX_FN:-150}
MAX_FILE=${MAX_FILE:-1000}
MAX_FILE_HARD=${MAX_FILE_HARD:-1200}
LIST=${SIZE_CHECK_LIST:-0}
bad=0

check_file() {
  local f=$1 rel=${1#"$ROOT"/} n out
  n=$(wc -l <"$f")
  if [ "$n" -gt "$MAX_FILE_HARD" ]; then
    echo "size: $rel has $n lines (over $MAX_FILE_HARD, the limit even with a reason): split it"
    bad=1
  elif [ "$n" -gt "$MAX_FILE" ] && ! head -n 12 "$f" | grep -q "Why one file"; then
    echo "size: $rel has $n lines (over $MAX_FILE) and no 'Why one file' reason at its top"
    bad=1
  fi
  out=$(awk -v max="$MAX_FN" -v file="$rel" -v list="$LIST" '
    BEGIN { st = "code"; depth = 0; nfn = 0; pend = ""; pstart = 0; pp = 0 }
    # What opens a brace at namespace or class scope, read from the text since the last ; { or }.
    function kind_of(p,   q) {
      q = p
      gsub(/[ \t]+/, " ", q)
      sub(/^ /, "", q); sub(/ $/, "", q)
      if (q ~ /=[ ]*\[[^\]]*\]/) return "lambda"
      if (q ~ /(^|[^A-Za-z0-9_])namespace( [A-Za-z_][A-Za-z0-9_:]*)?$/) return "ns"
      if (q ~ /(^|[^A-Za-z0-9_])extern ""$/) return "ns"
      if (q ~ /\)( ?(const|noexcept|override|final|mutable|volatile|&&|&|[A-Z_][A-Z0-9_]*|noexcept ?\([^()]*\)))*( ?->[^{;]*)?( ?requires[^{;]*)?$/) return "fn"
      if (q ~ /\) ?: ?[A-Za-z_].*[)}]$/ && q !~ /(^|[^A-Za-z0-9_])(class|struct|union|enum) /) return "fn"
      if (q ~ /(^|[^A-Za-z0-9_])(class|struct|union|enum)( [^=()]*)?$/) return "class"
      return "data"
    }
    function open_brace(   k) {
      if (nfn > 0) { k = "block" }
      else if (depth > 0 && (kind[depth] == "data" || kind[depth] == "lambda")) { k = "data" }
      else { k = kind_of(pend) }
      depth++
      kind[depth] = k
      if (k == "fn") {
        nfn++
        fstart = (pstart > 0 ? pstart : NR)
        fhead = pend
        gsub(/[ \t]+/, " ", fhead); sub(/^ /, "", fhead)
      }
      if (k == "data" || k == "lambda") { pend = pend "{"; return }
      pend = ""; pstart = 0
    }
    function close_brace(   k, n) {
      if (depth == 0) return
      k = kind[depth]
      depth--
      if (k == "fn") {
        nfn--
        n = NR - fstart + 1
        if (list) printf "list: %s:%d: %d lines: %s\n", file, fstart, n, substr(fhead, 1, 100)
        if (n > max) printf "size: %s:%d: a function of %d lines (over %d): %s\n", file, fstart, n, max, substr(fhead, 1, 100)
      }
      if (k == "data" || k == "lambda") { pend = pend "}"; return }
      pend = ""; pstart = 0
    }
    function take(c) {
      if (nfn > 0) {
        if (c == "{") open_brace(); else if (c == "}") close_brace()
        return
      }
      if (c == "{") { open_brace(); return }
      if (c == "}") { close_brace(); return }
      if (c == ";" && (depth == 0 || (kind[depth] != "data" && kind[depth] != "lambda"))) { pend = ""; pstart = 0; return }
      if (pstart == 0 && c !~ /[ \t]/) pstart = NR
      pend = pend c
      if (c == ":" && pend ~ /^[ \t]*(public|private|protected)[ \t]*:$/) { pend = ""; pstart = 0 }
    }
    {
      line = $0
      if (st == "code" && (pp || line ~ /^[ \t]*#/)) {
        pp = (line ~ /\\$/)
        next
      }
      L = length(line)
      i = 1
      while (i <= L) {
        c = substr(line, i, 1)
        if (st == "block") {
          if (c == "*" && substr(line, i + 1, 1) == "/") { st = "code"; i += 2; continue }
          i++; continue
        }
        if (st == "raw") {
          if (c == ")" && substr(line, i + 1, length(rawd) + 1) == rawd "\"") { st = "code"; i += length(rawd) + 2; continue }
          i++; continue
        }
        if (st == "str" || st == "chr") {
          if (c == "\\") { i += 2; continue }
          if ((st == "str" && c == "\"") || (st == "chr" && c == "'\''")) { st = "code"; take(" ") }
          i++; continue
        }
        # code
        if (c == "/" && substr(line, i + 1, 1) == "/") break
        if (c == "/" && substr(line, i + 1, 1) == "*") { st = "block"; i += 2; continue }
        if (c == "R" && substr(line, i + 1, 1) == "\"" && substr(line, i - 1, 1) !~ /[A-Za-z0-9_]/) {
          rest = substr(line, i + 2)
          p = index(rest, "(")
          if (p > 0) { rawd = substr(rest, 1, p - 1); st = "raw"; take("\""); take("\""); i += 2 + p; continue }
        }
        if (c == "\"") { st = "str"; take("\""); take("\""); i++; continue }
        if (c == "'\''") {
          # a digit separator (1'\''000) is not a character literal
          if (substr(line, i - 1, 1) ~ /[0-9A-Fa-f]/ && substr(line, i + 1, 1) ~ /[0-9A-Fa-f]/ && substr(line, i + 2, 1) != "'\''") { i++; continue }
          st = "chr"; i++; continue
        }
        take(c)
        i++
      }
      if (st == "str" || st == "chr") st = "code"
      if (nfn == 0) take(" ")
    }' "$f")
  if [ -n "$out" ]; then
    echo "$out"
    if grep -q '^size:' <<<"$out"; then bad=1; fi
  fi
}

if [ $# -gt 0 ]; then
  for f in "$@"; do check_file "$f"; done
else
  while IFS= read -r -d '' f; do
    check_file "$f"
  done < <(find "$ROOT/src" "$ROOT/cli" "$ROOT/tools" "$ROOT/include" \( -name '*.cc' -o -name '*.h' \) -print0 2>/dev/null | sort -z)
fi
exit $bad
