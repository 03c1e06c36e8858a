#!/usr/bin/env bash
# The size checker's own test (layering.sizes_selftest): synthetic files with a known answer, given to
# tests/size_check.sh one at a time. Each case says whether the checker must report it and what.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/size_check.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# body N INDENT: N statement lines, each indented by INDENT spaces.
body() { local i; for ((i = 0; i < $1; i++)); do printf '%*sx += %d;  // { not a brace\n' "$2" '' "$i"; done; }

# expect NAME FILE WANT [PATTERN]: WANT is "report" (exit 1, PATTERN in the output) or "clean" (exit 0, no output).
expect() {
  local name=$1 file=$2 want=$3 pat=${4:-} out rc=0
  out=$(bash "$CHECK" "$TMP" "$file" 2>&1) || rc=$?
  if [ "$want" = report ]; then
    if [ "$rc" -ne 1 ] || ! grep -q -- "$pat" <<<"$out"; then
      echo "FAIL $name: expected a report matching '$pat' (exit 1); got exit $rc: $out"
      fail=1
    fi
  elif [ "$rc" -ne 0 ] || [ -n "$out" ]; then
    echo "FAIL $name: expected no report; got exit $rc: $out"
    fail=1
  fi
}

# A method defined inside a class body, indented: 151 lines (head, 149 statements, closing brace).
{ echo 'struct S {'; echo '  int x = 0;'; echo '  void long_method() {'; body 149 4; echo '  }'; echo '};'; } >"$TMP/in_class.cc"
expect in-class-method "$TMP/in_class.cc" report 'in_class.cc:3: a function of 151 lines'

# The same at 150 lines is within the rule.
{ echo 'struct S {'; echo '  void ok_method() {'; body 148 4; echo '  }'; echo '};'; } >"$TMP/in_class_ok.cc"
expect in-class-method-at-limit "$TMP/in_class_ok.cc" clean

# A method of a class nested in a namespace and a class, in a header, after an access specifier and a const
# qualifier, with a string holding braces and a block comment holding a brace.
{ echo '#pragma once'; echo 'namespace a::b {'; echo 'class Outer {'; echo ' public:'; echo '  struct Inner {'
  echo '    /* a { in a comment */'; echo '    const char* s = "}{";'
  echo '    int f(int y) const noexcept {'; body 149 6; echo '      return y;'; echo '    }'
  echo '  };'; echo '};'; echo '}  // namespace a::b'; } >"$TMP/nested.h"
expect header-nested-method "$TMP/nested.h" report 'nested.h:8: a function of 152 lines'

# A constructor with a member-initializer list that uses braces.
{ echo 'struct C {'; echo '  C(int a) : a_(a), b_{a} {'; body 150 4; echo '  }'; echo '  int a_, b_;'; echo '};'; } >"$TMP/ctor.cc"
expect ctor-init-list "$TMP/ctor.cc" report 'ctor.cc:2: a function of 152 lines'

# A free function whose head spans lines, a Highway-style macro qualifier, a raw string with a brace.
{ echo 'namespace {'; echo 'void kernel(int a,'; echo '            int b) HWY_ATTR {'; echo '  const char* r = R"x( } )x";'
  body 148 2; echo '}'; echo '}  // namespace'; } >"$TMP/free.cc"
expect multi-line-head "$TMP/free.cc" report 'free.cc:2: a function of 152 lines'

# Lambdas are not measured on their own: a long one at namespace scope is skipped, as is a long data table.
{ echo 'namespace {'; echo 'const auto f = [](int x) {'; body 160 2; echo '  return x;'; echo '};'
  echo 'const int kTable[] = {'; for ((i = 0; i < 160; i++)); do echo "  $i,"; done; echo '};'; echo '}'; } >"$TMP/lambda.cc"
expect lambda-and-table-skipped "$TMP/lambda.cc" clean

# A lambda inside a function counts toward the function.
{ echo 'int g() {'; echo '  auto h = [&](int y) {'; body 148 4; echo '    return y;'; echo '  };'; echo '  return h(1);'; echo '}'; } >"$TMP/inner_lambda.cc"
expect lambda-counts-in-function "$TMP/inner_lambda.cc" report 'inner_lambda.cc:1: a function of 154 lines'

# Files: over 1,000 lines without a reason; with one; over 1,200 even with one.
{ echo '// a file'; for ((i = 0; i < 1001; i++)); do echo "int v$i = $i;"; done; } >"$TMP/long.cc"
expect long-file "$TMP/long.cc" report "long.cc has 1002 lines (over 1000) and no 'Why one file'"
{ echo '// Why one file: a reason.'; for ((i = 0; i < 1001; i++)); do echo "int v$i = $i;"; done; } >"$TMP/long_reason.cc"
expect long-file-with-reason "$TMP/long_reason.cc" clean
{ echo '// Why one file: a reason.'; for ((i = 0; i < 1200; i++)); do echo "int v$i = $i;"; done; } >"$TMP/too_long.cc"
expect too-long-file "$TMP/too_long.cc" report 'too_long.cc has 1201 lines (over 1200'

if [ "$fail" -eq 0 ]; then echo "size_check selftest: all cases pass"; fi
exit $fail
