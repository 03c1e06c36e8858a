#!/bin/bash
# Device timeline of quantize --observer $OBSERVER (default mse) on the synthesized llama 8b: every $DT s (default
# 0.5) the process's CPU (user + system, in cores), bytes read and written so far (/proc/PID/stat and /proc/PID/io)
# and the disk's own sectors read and written so far (/proc/diskstats of $DISK, default vda: writeback included),
# page caches dropped first. One run per entry of RUNS (extra quantize flags, ';'-separated; default: none).
# Prints "TL <run> <t_s> <cores> <read_GB> <written_GB> <disk_read_GB> <disk_written_GB>" lines and a summary per
# run. Run from the repo root with build/bin and build/devlibs carried.
set -u
. "$(dirname "$0")/io_floor.sh"
export LD_LIBRARY_PATH=$PWD/build/devlibs
B=${B:-$PWD/build/bin/fp4forge}
W=${W:-/root/bench}; mkdir -p $W
# The disk's bytes read and written so far (sectors of 512 bytes in /proc/diskstats).
disk() { awk -v d=${DISK:-vda} '$3 == d {printf "%.0f %.0f\n", $6 * 512, $10 * 512}' /proc/diskstats; }
[ -d $W/src ] || $B synth --arch llama --size ${SIZE:-8b} --out $W/src --seed 1 > /dev/null
TCK=$(getconf CLK_TCK)
IFS=';' read -ra runs <<< "${RUNS:-}"
[ ${#runs[@]} -eq 0 ] && runs=("")
n=0
for flags in "${runs[@]}"; do
  n=$((n + 1)); rm -rf $W/tl; drop
  t0=$(date +%s.%N)
  d0=$(disk)
  $B quantize $W/src $W/tl --observer ${OBSERVER:-mse} --no-progress $flags > /dev/null &
  pid=$!
  while kill -0 $pid 2> /dev/null; do
    st=$(cut -d' ' -f14,15 /proc/$pid/stat 2> /dev/null) || break
    io=$(grep -E '^(read|write)_bytes' /proc/$pid/io 2> /dev/null | awk '{print $2}' | paste -sd ' ')
    echo "$(date +%s.%N) $st $io $(disk)"
    sleep ${DT:-0.5}
  done > $W/tl.txt
  wait $pid; rc=$?
  t1=$(date +%s.%N)
  echo "RUN $n flags='$flags' rc=$rc wall_s=$(elapsed $t0 $t1)"
  echo "DISK $n after: $(python3 -c "a='$d0'.split(); b='$(disk)'.split(); print(round((int(b[0])-int(a[0]))/1e9,2), round((int(b[1])-int(a[1]))/1e9,2))") GB read, written"
  python3 - "$W/tl.txt" "$t0" "$TCK" "$n" "$d0" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 7]
t0, tck, n = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
dr0, dw0 = (int(x) for x in sys.argv[5].split())
prev = None
for r in rows:
    t, u, s, rb, wb, dr, dw = float(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6])
    if prev:
        dt = t - prev[0]
        cores = ((u + s) - (prev[1] + prev[2])) / tck / dt if dt > 0 else 0
        print(f"TL {n} {t - t0:6.2f} {cores:5.2f} {rb / 1e9:6.2f} {wb / 1e9:6.2f} {(dr - dr0) / 1e9:6.2f} {(dw - dw0) / 1e9:6.2f}")
    prev = (t, u, s)
PY
done
