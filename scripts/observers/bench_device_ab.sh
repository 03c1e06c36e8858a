#!/bin/bash
# Device A/B of two fp4forge builds on the synthesized llama 8b, in one run: quantize --observer mse and
# verify --against (page caches dropped before each), wall, CPU time and peak RSS per build, the I/O floor
# beside them. Run from the repo root with build/bin (the build under test), build/devlibs (the shared
# libraries the device lacks) and build/devbins/fp4forge_<name> (the other builds) carried; outputs are compared
# with the first name's. A name other than
# "new" runs build/devbins/fp4forge_<name>; VERIFY_NAMES (default: NAMES) the builds whose verify is timed.
set -u
. "$(dirname "$0")/io_floor.sh"
export LD_LIBRARY_PATH=$PWD/build/devlibs
W=/root/bench; mkdir -p $W
B=$PWD/build/bin/fp4forge
[ -d $W/src ] || $B synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
$B quantize $W/src --dry-run --json > $W/plan.json
echo "FLOOR $(serial_floor $W/src $(plan_output_bytes $W/plan.json) $W/floor.bin) s"
# NAMES="new" runs the build under test alone; ROUNDS the quantize rounds.
NAMES=${NAMES:-base new}
for round in $(seq 1 ${ROUNDS:-2}); do
  for name in $NAMES; do
    bin=$B; [ $name != new ] && bin=$PWD/build/devbins/fp4forge_$name
    rm -rf $W/mse_$name
    drop; /usr/bin/time -f "%e %U %M" -o $W/t.txt $bin quantize $W/src $W/mse_$name --observer mse --no-progress --json > /dev/null
    echo "$round $name quantize wall_s user_s maxrss_kb: $(cat $W/t.txt)"
  done
done
# Every build's output against the first name's.
REF=${NAMES%% *}
for name in $NAMES; do
  cmp -s <(cat $W/mse_$REF/*.safetensors | md5sum) <(cat $W/mse_$name/*.safetensors | md5sum) && echo "$name output identical to $REF" || echo "$name OUTPUT DIFFERS from $REF"
done
for name in ${VERIFY_NAMES:-$NAMES}; do
  bin=$B; [ $name != new ] && bin=$PWD/build/devbins/fp4forge_$name
  drop; /usr/bin/time -f "%e %U %M" -o $W/t.txt $bin verify $W/mse_new --against $W/src --no-progress --json > $W/v_$name.json
  echo "$name verify wall_s user_s maxrss_kb: $(cat $W/t.txt) $(python3 -c "import json;d=json.load(open('$W/v_$name.json'));a=d['stats']['against'];print(d['ok'], a['mean_rel_rms'], a['mean_minmax_rel_rms'], a['reencode_mismatched_rows'], a['reencoded_rows'])")"
done
