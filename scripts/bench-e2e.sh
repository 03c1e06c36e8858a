#!/usr/bin/env bash
# make bench-e2e: end-to-end quantize benchmark against the I/O floor.
#
#   bash scripts/bench-e2e.sh [BUILD_DIR] [--size 8b|small|tiny] [--arch llama] [--keep] [--no-record]
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
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) SIZE=$2; shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-record) RECORD=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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
  if [[ $(id -u) == 0 ]] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then CACHE=dropped; else CACHE=warm; fi
}
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d"+sys.argv[2]))' "$@"; }

echo "== synth $ARCH $SIZE into $WORK/src"
"$BIN" synth --arch "$ARCH" --size "$SIZE" --out "$WORK/src" --seed 1 >/dev/null
SRC_BYTES=$(du -sb --apparent-size "$WORK/src" | cut -f1)
"$BIN" quantize "$WORK/src" --dry-run --json > "$WORK/plan.json"
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
"${TIMEV[@]}" "$BIN" quantize "$WORK/src" "$WORK/q" --json > "$WORK/summary.json"
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
  if ! grep -q '^## quantize (bench-e2e)' "$DOC"; then
    cat >> "$DOC" <<'HDR'

## quantize (bench-e2e)

`make bench-e2e` (scripts/bench-e2e.sh): synthesize a checkpoint, then time the I/O floor (read the
source once + write the output's size with dd, fsynced) and `fp4forge quantize` with default `-j` and
`--max-memory`. Targets: wall ratio <= 1.3, peak RSS <= 2.5 GiB.

| date | host | checkpoint | source GB | output GB | floor s | quantize s | ratio | peak RSS GiB | -j | caches |
|---|---|---|---|---|---|---|---|---|---|---|
HDR
  fi
  ROW="| $(date -u +%F) | ${HOST} | ${ARCH} ${SIZE} | $(python3 -c "print(f'{$SRC_BYTES/1e9:.2f}')") | $(python3 -c "print(f'{$OUT_BYTES/1e9:.2f}')") | ${FLOOR} | ${QWALL} | ${RATIO} | ${RSS_GIB} | ${JOBS} | ${CACHE} |"
  # Append the row right after the quantize table (the section may be followed by others).
  python3 - "$DOC" "$ROW" <<'PY'
import sys
path, row = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
start = next(i for i, l in enumerate(lines) if l.startswith("## quantize (bench-e2e)"))
i = start + 1
while i < len(lines) and not lines[i].startswith("| date"):
    i += 1
i += 2  # header + separator
while i < len(lines) and lines[i].startswith("|"):
    i += 1
lines.insert(i, row)
open(path, "w").write("\n".join(lines))
PY
  echo "recorded in docs/performance.md"
fi
