#!/bin/bash
# Device benchmark: fp4forge minmax / mse quantize and verify on a synthesized llama 8b (caches dropped),
# the I/O floor, the codec search bench; then upstream's observer end to end on the H200.
set -u
cd "$(dirname "$0")"
. ./io_floor.sh
D=$(pwd)/dist
run() { "$D/lib/ld-linux-x86-64.so.2" --library-path "$D/lib" "$@"; }
W=/root/bench; mkdir -p $W
tm() { local t0=$(date +%s.%N); "$@"; local rc=$?; local t1=$(date +%s.%N); echo "TIME $(python3 -c "print(round($t1-$t0,2))") rc=$rc :: ${*: -3}"; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200
if [ "${STAGE:-1}" = 1 ]; then
  FP4FORGE_BENCH_SHAPES=4096x4096 FP4FORGE_BENCH_THREADS=1,16 run $D/codec_search_bench --benchmark_filter='AVX|minmax|threads' 2>&1 | grep -v WARNING | tail -8
  [ -d $W/src ] || run $D/fp4forge synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
  run $D/fp4forge quantize $W/src --dry-run --json > $W/plan.json
  OUTB=$(plan_output_bytes $W/plan.json)
  echo "FLOOR $(serial_floor $W/src $OUTB $W/floor.bin) s (read $(du -sb $W/src | cut -f1) + write $OUTB)"
  drop; t0=$(date +%s.%N); read_source $W/src; t1=$(date +%s.%N); echo "READ $(elapsed $t0 $t1)"
  rm -rf $W/mm $W/mse
  drop; tm run $D/fp4forge quantize $W/src $W/mm --no-progress --json > $W/mm.json; python3 -c "import json;d=json.load(open('$W/mm.json'));print('minmax', d['seconds'], d['peak_rss_bytes']/2**30)"
  drop; tm run $D/fp4forge quantize $W/src $W/mse --observer mse --no-progress --json > $W/mse.json; python3 -c "import json;d=json.load(open('$W/mse.json'));print('mse', d['seconds'], d['peak_rss_bytes']/2**30)"
  drop; /usr/bin/time -v -o $W/tv.txt $D/lib/ld-linux-x86-64.so.2 --library-path $D/lib $D/fp4forge verify $W/mse --against $W/src --no-progress --json > $W/vmse.json; grep -E "Elapsed|Maximum resident" $W/tv.txt; python3 -c "import json;d=json.load(open('$W/vmse.json'));a=d['stats']['against'];print('verify mse ok', d['ok'], a['mean_rel_rms'], a['mean_minmax_rel_rms'], a['reencode_mismatched_rows'])"
  drop; /usr/bin/time -v -o $W/tv2.txt $D/lib/ld-linux-x86-64.so.2 --library-path $D/lib $D/fp4forge verify $W/mm --against $W/src --no-progress --json > $W/vmm.json; grep -E "Elapsed|Maximum resident" $W/tv2.txt
  cp $W/mse.json $W/mm.json $W/vmse.json $OUT/ 2>/dev/null
fi
if [ "${STAGE:-1}" = 2 ]; then
  [ -d $W/src ] || run $D/fp4forge synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
  rm -rf $W/up; drop; python3 upstream_e2e.py ct lc $W/src $W/up nvfp4_expanded_mse
  rm -rf $W/up
fi
if [ "${STAGE:-1}" = 3 ]; then
  for b in codec_search_bench codec_search_bench_nogather; do echo "== $b"; FP4FORGE_BENCH_SHAPES=4096x4096 FP4FORGE_BENCH_THREADS=16 run $D/$b --benchmark_filter='AVX3|threads' 2>&1 | grep -v WARNING | tail -2; done
  [ -d $W/src ] || run $D/fp4forge synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
  rm -rf $W/mse
  drop; /usr/bin/time -v -o $W/tq.txt $D/lib/ld-linux-x86-64.so.2 --library-path $D/lib $D/fp4forge quantize $W/src $W/mse --no-progress --json > $W/mse.json; grep -E "Elapsed|Maximum resident" $W/tq.txt
  drop; /usr/bin/time -v -o $W/tv.txt $D/lib/ld-linux-x86-64.so.2 --library-path $D/lib $D/fp4forge verify $W/mse --against $W/src --no-progress --json > $W/vmse.json; grep -E "Elapsed|Maximum resident" $W/tv.txt
  python3 -c "import json;d=json.load(open('$W/vmse.json'));a=d['stats']['against'];print('verify ok', d['ok'], a['mean_rel_rms'], a['mean_minmax_rel_rms'], a['reencode_mismatched_rows'], a['reencoded_rows'])"
fi
