#!/bin/bash
# Device benchmark of search-kernel variants side by side, then quantize --observer mse on a synthesized
# llama 8b (caches dropped): wall, peak RSS, and verify --against. Run from the repo root with the Release
# build carried (build/bin, build/devlibs with the shared libraries the device lacks, build/devbins with the
# codec_search_bench_<variant> binaries to compare). Prints one line per measurement.
set -u
. "$(dirname "$0")/io_floor.sh"
export LD_LIBRARY_PATH=$PWD/build/devlibs
B=$PWD/build/bin/fp4forge
W=/root/bench; mkdir -p $W
lscpu | grep -E "Model name|^CPU\(s\)|Thread" | cut -c1-120
for round in 1 2; do
  for b in build/devbins/codec_search_bench_*; do
    [ -e "$b" ] || continue
    echo "$round $(basename $b) $(FP4FORGE_BENCH_SHAPES=4096x4096 FP4FORGE_BENCH_THREADS=1,16 $b --benchmark_filter='AVX3|threads' 2>&1 | grep -o '^search[^ ]*\|Melem_per_s=[0-9.]*' | paste -sd ' ')"
  done
done
[ -d $W/src ] || $B synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
$B quantize $W/src --dry-run --json > $W/plan.json
echo "FLOOR $(serial_floor $W/src $(plan_output_bytes $W/plan.json) $W/floor.bin) s"
rm -rf $W/mse
drop; /usr/bin/time -v -o $W/tq.txt $B quantize $W/src $W/mse --observer mse --no-progress --json > $W/mse.json
grep -E "Elapsed|Maximum resident" $W/tq.txt; python3 -c "import json;d=json.load(open('$W/mse.json'));print('mse', d['seconds'], d['peak_rss_bytes']/2**30)"
if [ "${VERIFY:-1}" = 1 ]; then
  drop; /usr/bin/time -v -o $W/tv.txt $B verify $W/mse --against $W/src --no-progress --json > $W/vmse.json
  grep -E "Elapsed|Maximum resident" $W/tv.txt
  python3 -c "import json;d=json.load(open('$W/vmse.json'));a=d['stats']['against'];print('verify ok', d['ok'], a['mean_rel_rms'], a['mean_minmax_rel_rms'], a['reencode_mismatched_rows'], a['reencoded_rows'])"
fi
