#!/usr/bin/env bash
# make bench-e2e: end-to-end quantize benchmark against the I/O floor.
#
#   bash scripts/bench-e2e.sh [BUILD_DIR] [--size 8b|small|tiny] [--arch llama] [--keep] [--no-record]
#                             [--no-drop]   (keep page caches: for shared machines)
#                             [--fp8-source] (quantize an FP8 release: the synthesized checkpoint is first
#                                            written as compressed-tensors FP8_BLOCK, 128x128 block scales as
#                                            DeepSeek-V3 / Qwen3-FP8 ship them, untimed; docs/fp8-sources.md)
#                             [--flags "QUANTIZE FLAGS"] (e.g. a recipe: "--scheme nvfp4a16 --scheme-for
#                                            attention=fp8-block"; named in the row's checkpoint column)
#
# 1. synthesizes a checkpoint (`fp4forge synth --arch llama --size 8b`, about 16 GB);
# 2. measures the I/O floor: read every source file once (cat > /dev/null) + write the planned output
#    size with dd (conv=fsync, as quantize fsyncs);
# 3. times `fp4forge quantize` (default -j and --max-memory) under /usr/bin/time -v when available;
# 4. prints wall ratio (quantize / floor) and peak RSS, and appends a row to docs/performance.md
#    (quantize section). Page caches are dropped before each timed step when running as root;
#    otherwise the row says "warm" (both steps then read from the page cache).
# Targets (issue 4): ratio <= 1.3, peak RSS <= 2.5 GiB with the default --max-memory.
set -euo pipefail
BUILD=build
SIZE=8b
ARCH=llama
KEEP=0
RECORD=1
DROP=1
FP8=0
FLAGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) SIZE=$2; shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-record) RECORD=0; shift ;;
    --no-drop) DROP=0; shift ;;
    --fp8-source) FP8=1; shift ;;
    --flags) FLAGS=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "bench-e2e: unknown option '$1'" >&2; exit 2 ;;
    *) BUILD=$1; shift ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "$BUILD/bin/fp4forge")
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/fp4forge-bench-e2e.XXXXXX")
[[ $KEEP == 1 ]] || trap 'rm -rf "$WORK"' EXIT

now() { date +%s.%N; }
drop_caches() {
  sync
  if [[ $DROP == 1 && $(id -u) == 0 ]] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then CACHE=dropped; else CACHE=warm; fi
}
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$@"; }

echo "== synth $ARCH $SIZE into $WORK/src"
"$BIN" synth --arch "$ARCH" --size "$SIZE" --out "$WORK/src" --seed 1 >/dev/null
LABEL="$ARCH $SIZE"
if [[ $FP8 == 1 ]]; then
  echo "== FP8 source: $WORK/src as FP8_BLOCK (untimed)"
  "$BIN" quantize "$WORK/src" "$WORK/src-fp8" --scheme fp8-block >/dev/null
  rm -rf "$WORK/src"
  mv "$WORK/src-fp8" "$WORK/src"
  LABEL="$ARCH $SIZE, FP8_BLOCK source"
fi
[[ -n $FLAGS ]] && LABEL="$LABEL, $FLAGS"
read -r -a QFLAGS <<< "$FLAGS"
SRC_BYTES=$(du -sb --apparent-size "$WORK/src" | cut -f1)
"$BIN" quantize "$WORK/src" --dry-run --json "${QFLAGS[@]}" > "$WORK/plan.json"
OUT_BYTES=$(json_get "$WORK/plan.json" '["plan"]["output_bytes"]')

echo "== I/O floor: read $(( SRC_BYTES / 1000000 )) MB + write $(( OUT_BYTES / 1000000 )) MB"
drop_caches
t0=$(now)
cat "$WORK"/src/*.safetensors > /dev/null
dd if=/dev/zero of="$WORK/floor.bin" bs=4M count=$(( (OUT_BYTES + 4194303) / 4194304 )) conv=fsync status=none
t1=$(now)
rm -f "$WORK/floor.bin"
FLOOR=$(python3 -c "print(f'{$t1 - $t0:.3f}')")

echo "== quantize"
drop_caches
TIMEV=()
[[ -x /usr/bin/time ]] && TIMEV=(/usr/bin/time -v -o "$WORK/time.txt")
t0=$(now)
"${TIMEV[@]}" "$BIN" quantize "$WORK/src" "$WORK/q" --json "${QFLAGS[@]}" > "$WORK/summary.json"
t1=$(now)
QWALL=$(python3 -c "print(f'{$t1 - $t0:.3f}')")
RSS=$(json_get "$WORK/summary.json" '["peak_rss_bytes"]')
if [[ -f $WORK/time.txt ]]; then
  KB=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); print $2}' "$WORK/time.txt")
  [[ -n $KB ]] && RSS=$(( KB * 1024 ))
fi
JOBS=$(json_get "$WORK/summary.json" '["jobs"]')
MAXMEM=$(json_get "$WORK/summary.json" '["max_memory"]')
GBS=$(python3 -c "import json; print(f\"{json.load(open('$WORK/summary.json'))['gb_per_s']:.2f}\")")
RATIO=$(python3 -c "print(f'{$QWALL / $FLOOR:.2f}')")
RSS_GIB=$(python3 -c "print(f'{$RSS / 2**30:.2f}')")
CPU=$(awk -F: '/model name/ {sub(/^ /,"",$2); print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
HOST="$(nproc) cores, ${CPU}"

echo "source ${SRC_BYTES} B, output ${OUT_BYTES} B"
echo "I/O floor ${FLOOR} s, quantize ${QWALL} s (${GBS} GB/s in), ratio ${RATIO} (target <= 1.3)"
echo "peak RSS ${RSS_GIB} GiB (target <= 2.5 GiB), -j ${JOBS}, --max-memory ${MAXMEM}, caches ${CACHE}"

if [[ $RECORD == 1 ]]; then
  DOC="$ROOT/docs/performance.md"
  [[ -f $DOC ]] || printf '# Performance\n' > "$DOC"
  ROW="| $(date -u +%F) | ${HOST} | ${LABEL} | $(python3 -c "print(f'{$SRC_BYTES/1e9:.2f}')") | $(python3 -c "print(f'{$OUT_BYTES/1e9:.2f}')") | ${FLOOR} | ${QWALL} | ${RATIO} | ${RSS_GIB} | ${JOBS} | ${CACHE} |"
  # The quantize section lives between its markers; rows are appended to its table.
  python3 - "$DOC" "$ROW" <<'PY'
import sys
path, row = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = "<!-- quantize:begin -->", "<!-- quantize:end -->"
if begin not in text:
    text = text.rstrip("\n") + "\n\n" + begin + """

## quantize (bench-e2e)

`make bench-e2e` (scripts/bench-e2e.sh): synthesize a checkpoint, then time the I/O floor (read the
source once with cat, write the planned output size with dd conv=fsync) and `fp4forge quantize` with the
default `-j` (all cores) and `--max-memory` (2 GiB). Ratio = quantize wall / floor wall. Peak RSS from
`/usr/bin/time -v` (else the `--json` summary's getrusage). "caches": page caches dropped before each
timed step (root) or warm. Targets (issue 4): ratio <= 1.3, peak RSS <= 2.5 GiB.

| date | host | checkpoint | source GB | output GB | floor s | quantize s | ratio | peak RSS GiB | -j | caches |
|---|---|---|---|---|---|---|---|---|---|---|

""" + end + "\n"
head, rest = text.split(begin, 1)
body, tail = rest.split(end, 1)
lines = body.rstrip("\n").split("\n")
last = max(i for i, l in enumerate(lines) if l.startswith("|"))
lines.insert(last + 1, row)
open(path, "w").write(head + begin + "\n".join(lines) + "\n\n" + end + tail)
PY
  echo "recorded in docs/performance.md"
fi
