#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets with clang + ASan/UBSan and runs each for a bounded time.
#   FP4FORGE_FUZZ_SECONDS  seconds per target (default 30; `make test` runs a 20 s smoke run per target)
#   FP4FORGE_FUZZ_TARGETS  space-separated subset (default: all)
#   FP4FORGE_FUZZ_JOBS     build parallelism (default: nproc)
#   FP4FORGE_FUZZ_BUILD    build directory (default: build-fuzz)
# Every library is compiled with -fsanitize=fuzzer-no-link so libFuzzer gets coverage feedback from the
# parsers themselves, not only from the harness. The corpus grows in $B/corpus/<target> and is reused by
# the next run. Crashes (crash-*, leak-*, timeout-*, oom-*) are copied to tests/fuzz/regressions/<target>/
# so they replay in every `make test` (CTest label "fuzz"). Exit status 1 when any target failed.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${FP4FORGE_FUZZ_SECONDS:-30}
JOBS=${FP4FORGE_FUZZ_JOBS:-$(nproc)}
B=${FP4FORGE_FUZZ_BUILD:-build-fuzz}
CC=${CC:-clang} CXX=${CXX:-clang++}
CC=$CC CXX=$CXX cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4FORGE_BUILD_FUZZ=ON \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" \
  -DFP4FORGE_SANITIZE=address,undefined -DFP4FORGE_BUILD_TESTS=OFF -DFP4FORGE_BUILD_BENCH=OFF \
  -DFP4FORGE_BUILD_CLI=OFF >/dev/null
targets=${FP4FORGE_FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.cc | sed 's/\.cc$//')}
# shellcheck disable=SC2086
cmake --build "$B" -j "$JOBS" --target $targets
# Seeds beyond tests/fuzz/seeds/<target>/ (small files only: libFuzzer truncates inputs to -max_len).
seeds_for() {
  case "$1" in
    fuzz_safetensors_index) ls tests/data/*/model.safetensors.index.json ;;
    fuzz_model_config|fuzz_model_quant_config|fuzz_doctor_config) ls tests/data/*/config.json tests/data/fp8/*/config.json ;;
    fuzz_gateway_config) ls examples/*.yaml 2>/dev/null || true ;;
    fuzz_gateway_show) ls examples/*.yaml tests/fuzz/seeds/fuzz_gateway_config/* 2>/dev/null || true ;;
    fuzz_util_yaml_strict) ls examples/*.yaml examples/recipes/* tests/fuzz/seeds/fuzz_gateway_config/* \
                             tests/fuzz/seeds/fuzz_quantize_recipe/* 2>/dev/null || true ;;
  esac
}
status=0
for t in $targets; do
  work=$B/corpus/$t; crashes=$B/crashes/$t
  mkdir -p "$work" "$crashes"
  for s in $(seeds_for "$t"); do cp -f "$s" "$work/$(echo "$s" | tr '/' '_')"; done
  if [[ -d tests/fuzz/seeds/$t ]]; then cp -f tests/fuzz/seeds/$t/* "$work/" 2>/dev/null || true; fi
  if [[ -d tests/fuzz/regressions/$t ]]; then cp -f tests/fuzz/regressions/$t/* "$work/" 2>/dev/null || true; fi
  echo "== $t for ${SECS}s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$B/tests/fuzz/$t" -max_total_time="$SECS" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
      -max_len=65536 -artifact_prefix="$crashes/" -print_final_stats=1 "$work" 2>"$B/$t.log"; then
    status=1
    echo "!! $t found a failure (log: $B/$t.log); inputs in $crashes (copied to tests/fuzz/regressions/$t)"
    mkdir -p "tests/fuzz/regressions/$t" && cp -f "$crashes"/* "tests/fuzz/regressions/$t/" 2>/dev/null || true
    grep -m3 -E "ERROR|runtime error|SUMMARY" "$B/$t.log" | sed "s/^/   $t /" || true
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov: .* ft: " "$B/$t.log" | tail -3 \
    | sed "s/^/   $t /" || true
done
exit $status
