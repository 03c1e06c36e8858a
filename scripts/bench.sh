#!/usr/bin/env bash
# make bench: runs the Google Benchmark programs of a build and writes their figures into
# docs/performance.md (each module owns one section between "<!-- NAME:begin -->" and
# "<!-- NAME:end -->" markers; a section is replaced in place, or appended when missing).
#
# Usage: scripts/bench.sh [BUILD_DIR]            (default: build)
# Environment:
#   FP4FORGE_BENCH_MIN_TIME  seconds per benchmark (default 0.3: quick, a few iterations each)
#   FP4FORGE_BENCH_REPS      repetitions per benchmark; the median is reported (default 5)
#   FP4FORGE_BENCH_SCALAR=1  also time the NVFP4 scalar reference path (slow: seconds per iteration);
#                            the other schemes' scalar references are always timed (on 256 rows)
#   FP4FORGE_BENCH_SCHEMES=0 skip the MXFP4A16 / FP8 / W4A16 section
#   FP4FORGE_BENCH_CODEC=0   skip the NVFP4A16 section
#   FP4FORGE_BENCH_FP8=0     skip the FP8-source expansion section
#   FP4FORGE_BENCH_SEARCH=0  skip the searched-observer section
#   FP4FORGE_BENCH_DOC       file to update (default docs/performance.md)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DOC=${FP4FORGE_BENCH_DOC:-$ROOT/docs/performance.md}
MIN_TIME=${FP4FORGE_BENCH_MIN_TIME:-0.3}
REPS=${FP4FORGE_BENCH_REPS:-5}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/fp4forge-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

cpu_model() {
  local m
  m=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
  echo "${m:-unknown CPU}"
}

# replace_section NAME FILE: puts FILE's text between the NAME markers of $DOC.
replace_section() {
  local name=$1 body=$2 begin="<!-- $1:begin -->" end="<!-- $1:end -->"
  mkdir -p "$(dirname "$DOC")"
  [[ -f "$DOC" ]] || printf '# Performance\n\nFigures written by `make bench` (scripts/bench.sh).\n' >"$DOC"
  if grep -qF "$begin" "$DOC"; then
    awk -v b="$begin" -v e="$end" -v f="$body" '
      $0 == b { print; while ((getline line < f) > 0) print line; skip = 1; next }
      $0 == e { skip = 0 }
      !skip { print }' "$DOC" >"$OUT/doc.new"
  else
    { cat "$DOC"; printf '\n%s\n' "$begin"; cat "$body"; printf '%s\n' "$end"; } >"$OUT/doc.new"
  fi
  mv "$OUT/doc.new" "$DOC"
}

# rows_from_json FILE: "name<TAB>label<TAB>bytes_per_second" per benchmark of a Google Benchmark
# JSON report (its pretty-printed layout: one key per line).
rows_from_json() {
  awk '
    /"name":/ { n = $0; sub(/.*"name": "/, "", n); sub(/",?$/, "", n); l = ""; b = "" }
    /"label":/ { l = $0; sub(/.*"label": "/, "", l); sub(/",?$/, "", l) }
    /"bytes_per_second":/ { b = $0; sub(/.*"bytes_per_second": /, "", b); sub(/,?$/, "", b) }
    /^ *},?$/ { if (n != "" && b != "") print n "\t" l "\t" b; n = "" }' "$1"
}

gbs() { awk -v v="$1" 'BEGIN { printf "%.2f", v / 1e9 }'; }

# ---- codec: NVFP4 encode throughput per path vs per-core memcpy --------------------------------
codec_bench() {
  local bin="$BUILD/bench/codec_encode_bench"
  if [[ "${FP4FORGE_BENCH_CODEC:-1}" == "0" ]]; then return 0; fi
  if [[ ! -x "$bin" ]]; then
    echo "bench.sh: $bin not built; skipping the codec section" >&2
    return 0
  fi
  local filter='BM_Memcpy|BM_Encode/.*/(AVX|SSE|NEON|SVE|EMU128)|BM_EncodeThreads'
  [[ "${FP4FORGE_BENCH_SCALAR:-0}" == "1" ]] && filter='.'
  echo "bench.sh: $bin (min time ${MIN_TIME}s per benchmark)" >&2
  "$bin" --benchmark_min_time="$MIN_TIME" --benchmark_filter="$filter" \
    --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/codec.json" --benchmark_out_format=json >&2
  # Medians of the repetitions (a shared VM's memory bandwidth varies from run to run).
  rows_from_json "$OUT/codec.json" | awk -F'\t' -v OFS='\t' '$1 ~ /_median$/ { sub(/_median$/, "", $1); print }' \
    >"$OUT/codec.tsv"
  local memcpy best_name="" best=0
  memcpy=$(awk -F'\t' '$1 ~ /^BM_Memcpy/ { print $3; exit }' "$OUT/codec.tsv")
  {
    echo
    echo "## Codec: NVFP4A16 encode"
    echo
    echo "Whole encode (amax pass + E4M3 scales + FP4 codes + packing) of one 8192x8192 BF16 tensor"
    echo "(128 MiB), in GB/s of source bytes per core (CPU time of a single thread), next to a"
    echo "single-threaded memcpy of the same bytes in the same binary (\`bench/codec_encode_bench.cc\`)."
    echo
    echo "- CPU: $(cpu_model) ($(nproc) logical CPUs visible)"
    echo "- date: $(date -u +%Y-%m-%d), build: $BUILD, median of $REPS repetitions of at least ${MIN_TIME}s each"
    echo "- load average when run: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) (other work on the machine inflates CPU time)"
    echo "- memcpy per core: **$(gbs "$memcpy") GB/s**"
    echo
    echo "| path | GB/s per core | ratio to memcpy |"
    echo "|---|---:|---:|"
    while IFS=$'\t' read -r name label bps; do
      [[ "$name" == BM_Encode/* ]] || continue
      printf '| %s | %s | %s |\n' "$label" "$(gbs "$bps")" "$(awk -v a="$bps" -v m="$memcpy" 'BEGIN { printf "%.2f", a / m }')"
      if awk -v a="$bps" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$bps; best_name=$label; fi
    done <"$OUT/codec.tsv"
    echo
    echo "Fastest path: **$best_name, $(gbs "$best") GB/s per core**, $(awk -v a="$best" -v m="$memcpy" 'BEGIN { printf "%.2f", a / m }') of memcpy"
    echo "(target: >= 4 GB/s and >= 0.3 of memcpy). The runtime dispatch picks the best path the CPU"
    echo "supports; \`fp4forge selftest\` lists them. The scalar reference (a literal transcription of"
    echo "the spec, used as the test oracle) is timed only with FP4FORGE_BENCH_SCALAR=1."
    if grep -q '^BM_EncodeThreads' "$OUT/codec.tsv"; then
      echo
      echo "Thread scaling of the best path (rows split across threads; wall clock, whole tensor):"
      echo
      echo "| threads | GB/s |"
      echo "|---:|---:|"
      awk -F'\t' '$1 ~ /^BM_EncodeThreads/ { t = $2; sub(/.* x/, "", t); printf "| %s | %.2f |\n", t, $3 / 1e9 }' \
        "$OUT/codec.tsv"
    fi
    echo
  } >"$OUT/codec.md"
  replace_section codec "$OUT/codec.md"
  echo "bench.sh: codec section of $DOC updated" >&2
}

# ---- codec: MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16 encode per path (scalar vs SIMD) vs memcpy -----
mbs() { awk -v v="$1" 'BEGIN { printf "%.0f", v / 1e6 }'; }

schemes_bench() {
  local bin="$BUILD/bench/codec_schemes_bench"
  if [[ "${FP4FORGE_BENCH_SCHEMES:-1}" == "0" ]]; then return 0; fi
  if [[ ! -x "$bin" ]]; then
    echo "bench.sh: $bin not built; skipping the schemes section" >&2
    return 0
  fi
  echo "bench.sh: $bin (min time ${MIN_TIME}s per benchmark)" >&2
  "$bin" --benchmark_min_time="$MIN_TIME" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/schemes.json" --benchmark_out_format=json >&2
  rows_from_json "$OUT/schemes.json" | awk -F'\t' -v OFS='\t' '$1 ~ /_median$/ { sub(/_median$/, "", $1); print }' \
    >"$OUT/schemes.tsv"
  local memcpy
  memcpy=$(awk -F'\t' '$1 ~ /^BM_Memcpy/ { print $3; exit }' "$OUT/schemes.tsv")
  {
    echo
    echo "## Codec: MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16 encode"
    echo
    echo "Whole encode (max pass + scales + codes + packing) of one 4096x4096 BF16 weight (32 MiB) per"
    echo "scheme and path, in MB/s of source bytes per core (CPU time of a single thread), next to a"
    echo "single-threaded memcpy of the same bytes in the same binary (\`bench/codec_schemes_bench.cc\`)."
    echo "The scalar references (literal transcriptions of compressed-tensors, the test oracle) are timed"
    echo "on the first 256 rows; the SIMD paths on the whole tensor. Every path writes the same bytes."
    echo
    echo "- CPU: $(cpu_model) ($(nproc) logical CPUs visible)"
    echo "- date: $(date -u +%Y-%m-%d), build: $BUILD, median of $REPS repetitions of at least ${MIN_TIME}s each"
    echo "- load average when run: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown) (other work on the machine inflates CPU time)"
    echo "- memcpy per core (baseline, same run): **$(mbs "$memcpy") MB/s**"
    echo
    echo "| scheme | path | MB/s per core | x scalar | ratio to memcpy |"
    echo "|---|---|---:|---:|---:|"
    awk -F'\t' -v m="$memcpy" '
      $1 ~ /^BM_Encode\// {
        split($1, p, "/"); s = p[2]
        if ($2 == "scalar") scalar[s] = $3
        order[++n] = s; label[n] = $2; rate[n] = $3
      }
      END {
        for (i = 1; i <= n; ++i) {
          x = (order[i] in scalar && scalar[order[i]] > 0) ? sprintf("%.0f", rate[i] / scalar[order[i]]) : ""
          printf "| %s | %s | %.0f | %s | %.2f |\n", order[i], label[i], rate[i] / 1e6, x, rate[i] / m
        }
      }' "$OUT/schemes.tsv"
    if grep -q '^BM_EncodeThreads' "$OUT/schemes.tsv"; then
      echo
      echo "Thread scaling of the best path (rows split in 128-row strips across threads; wall clock, whole"
      echo "tensor, MB/s):"
      echo
      awk -F'\t' '
        $1 ~ /^BM_EncodeThreads\// {
          split($1, p, "/"); s = p[2]; t = p[4]; sub(/^real_time$/, "", t)
          if (!(s in seen)) { seen[s] = 1; ss[++ns] = s }
          if (!(t in tseen)) { tseen[t] = 1; ts[++nt] = t }
          v[s, t] = $3
        }
        END {
          h = "| scheme |"; d = "|---|"
          for (j = 1; j <= nt; ++j) { h = h " " ts[j] " |"; d = d "---:|" }
          print h; print d
          for (i = 1; i <= ns; ++i) {
            l = "| " ss[i] " |"
            for (j = 1; j <= nt; ++j) l = l sprintf(" %.0f |", v[ss[i], ts[j]] / 1e6)
            print l
          }
        }' "$OUT/schemes.tsv"
    fi
    echo
  } >"$OUT/schemes.md"
  replace_section schemes "$OUT/schemes.md"
  echo "bench.sh: schemes section of $DOC updated" >&2
}

# ---- FP8 sources: FP8 -> bf16 expansion per scale layout, and expand + NVFP4A16 encode -------------
fp8_bench() {
  local bin="$BUILD/bench/codec_fp8_dequant_bench"
  if [[ "${FP4FORGE_BENCH_FP8:-1}" == "0" ]]; then return 0; fi
  if [[ ! -x "$bin" ]]; then
    echo "bench.sh: $bin not built; skipping the fp8-source section" >&2
    return 0
  fi
  echo "bench.sh: $bin (min time ${MIN_TIME}s per benchmark)" >&2
  "$bin" --benchmark_min_time="$MIN_TIME" --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
    --benchmark_out="$OUT/fp8.json" --benchmark_out_format=json >&2
  rows_from_json "$OUT/fp8.json" | awk -F'\t' -v OFS='\t' '$1 ~ /_median$/ { sub(/_median$/, "", $1); print }' \
    >"$OUT/fp8.tsv"
  {
    echo
    echo "## FP8 sources: expansion to bf16"
    echo
    echo "Expanding one 4096x4096 F8_E4M3 weight to bf16 (docs/fp8-sources.md), in MB/s of FP8 source bytes per"
    echo "core (CPU time of one thread), per scale layout; then a row range expanded and encoded to NVFP4A16 on"
    echo "the best codec path, as quantize does per task (\`bench/codec_fp8_dequant_bench.cc\`). The memcpy row"
    echo "copies the expanded (bf16) bytes."
    echo
    echo "- CPU: $(cpu_model) ($(nproc) logical CPUs visible)"
    echo "- date: $(date -u +%Y-%m-%d), build: $BUILD, median of $REPS repetitions of at least ${MIN_TIME}s each"
    echo
    echo "| benchmark | MB/s per core |"
    echo "|---|---:|"
    while IFS=$'\t' read -r name label bps; do
      printf '| %s | %s |\n' "${label:-$name}" "$(mbs "$bps")"
    done <"$OUT/fp8.tsv"
    echo
  } >"$OUT/fp8.md"
  replace_section fp8-source "$OUT/fp8.md"
  echo "bench.sh: fp8-source section of $DOC updated" >&2
}

# ---- NVFP4A16 searched observer (nvfp4_expanded_mse): Melem/s per core and per thread count ----------
search_bench() {
  local bin="$BUILD/bench/codec_search_bench"
  if [[ "${FP4FORGE_BENCH_SEARCH:-1}" == "0" ]]; then return 0; fi
  if [[ ! -x "$bin" ]]; then
    echo "bench.sh: $bin not built; skipping the search section" >&2
    return 0
  fi
  local shape=${FP4FORGE_BENCH_SEARCH_SHAPE:-1024x4096}
  echo "bench.sh: $bin ($shape)" >&2
  FP4FORGE_BENCH_SHAPES=$shape "$bin" --benchmark_out="$OUT/search.json" --benchmark_out_format=json >&2
  # name <TAB> Melem_per_s, from the pretty-printed JSON (one key per line).
  awk '
    /"name":/ { n = $0; sub(/.*"name": "/, "", n); sub(/",?$/, "", n); r = "" }
    /"Melem_per_s":/ { r = $0; sub(/.*"Melem_per_s": /, "", r); sub(/,?$/, "", r) }
    /^ *},?$/ { if (n != "" && r != "") print n "\t" r; n = "" }' "$OUT/search.json" >"$OUT/search.tsv"
  {
    echo
    echo "## Codec: NVFP4A16 searched observer (nvfp4_expanded_mse)"
    echo
    echo "The search of one $shape BF16 weight (111 steps per group of 16; docs/schemes.md#observers), in million"
    echo "source elements per second per core, on each path (\`bench/codec_search_bench.cc\`); the reference and"
    echo "table paths on the first 64 rows. Beside it, in the same binary, the min-max encode of the same weight"
    echo "(amax + scales + codes) and the search's thread scaling (row ranges on a pool; wall clock)."
    echo
    echo "- CPU: $(cpu_model) ($(nproc) logical CPUs visible)"
    echo "- date: $(date -u +%Y-%m-%d), build: $BUILD"
    echo "- load average when run: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
    echo
    echo "| what | Melem/s |"
    echo "|---|---:|"
    awk -F'\t' '{ n = $1; sub(/\/min_time.*/, "", n); sub(/\/real_time$/, "", n); printf "| %s | %.2f |\n", n, $2 }' "$OUT/search.tsv"
    echo
  } >"$OUT/search.md"
  replace_section search "$OUT/search.md"
  echo "bench.sh: search section of $DOC updated" >&2
}

codec_bench
schemes_bench
fp8_bench
search_bench
