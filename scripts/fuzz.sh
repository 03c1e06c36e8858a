#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets with clang + ASan/UBSan and runs each for a bounded time.
#   FP4FORGE_FUZZ_SECONDS  seconds per target (default 30; CI smoke uses the default)
#   FP4FORGE_FUZZ_TARGETS  space-separated subset (default: all)
# Crashes are copied to tests/fuzz/regressions/<target>/ so they replay in every `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${FP4FORGE_FUZZ_SECONDS:-30}
B=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP4FORGE_BUILD_FUZZ=ON \
  -DFP4FORGE_SANITIZE=address,undefined -DFP4FORGE_BUILD_TESTS=OFF -DFP4FORGE_BUILD_BENCH=OFF \
  -DFP4FORGE_BUILD_CLI=OFF >/dev/null
targets=${FP4FORGE_FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.cc | sed 's/\.cc$//')}
cmake --build $B -j "$(nproc)" --target $targets
seeds_for() {
  case "$1" in
    fuzz_safetensors_header) ls tests/data/*/*.safetensors | head -8 ;;
    fuzz_safetensors_index) ls tests/data/*/model.safetensors.index.json ;;
    fuzz_model_config|fuzz_verify_quant_config|fuzz_doctor_config) ls tests/data/*/config.json ;;
    fuzz_probe_gateway) ls examples/*.yaml 2>/dev/null || true ;;
  esac
}
status=0
for t in $targets; do
  work=$B/corpus/$t; crashes=$B/crashes/$t
  mkdir -p "$work" "$crashes"
  for s in $(seeds_for "$t"); do cp -f "$s" "$work/$(echo "$s" | tr '/' '_')"; done
  [[ -d tests/fuzz/seeds/$t ]] && cp -f tests/fuzz/seeds/$t/* "$work/" 2>/dev/null || true
  echo "== $t for ${SECS}s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$B/tests/fuzz/$t" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "$work" 2>"$B/$t.log"; then
    status=1
    echo "!! $t found a failure; inputs in $crashes (copied to tests/fuzz/regressions/$t)"
    mkdir -p tests/fuzz/regressions/$t && cp -f "$crashes"/* tests/fuzz/regressions/$t/ 2>/dev/null || true
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$B/$t.log" | sed "s/^/   $t /" || true
done
exit $status
