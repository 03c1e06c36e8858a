#!/bin/bash
# Device measure of quantize from a DeepSeek-V4-style low-bit source (issue 30): a synthesized release of
# FP8 E4M3 attention / shared experts with E8M0 128x128 scales and packed E2M1 routed experts with one E8M0 scale
# per 32 (scripts/observers/synth_fp4src.py; random codes, scale exponents within a 2^17 span so every expert casts),
# quantized to NVFP4A16 three ways: the default (experts cast, attention re-encoded), --scheme-for attention=fp8-block
# (attention passed through too) and --requantize-fp8 --observer minmax (everything re-encoded from the expansion).
# Page caches dropped before each; the I/O floor is reading the source once plus writing the output's bytes.
# Run from the repo root with build/bin and build/devlibs carried (and build/devbins/fp4forge_base for a verify A/B).
# LAYERS / EXPERTS size the source.
set -u
. "$(dirname "$0")/io_floor.sh"
export LD_LIBRARY_PATH=$PWD/build/devlibs
W=/root/bench_fp4; mkdir -p $W
B=$PWD/build/bin/fp4forge
[ -d $W/src ] || python3 scripts/observers/synth_fp4src.py $W/src ${LAYERS:-6} ${EXPERTS:-64} || exit 1
du -sb $W/src | awk '{printf "SOURCE %.2f GB\n", $1/1e9}'
$B inspect $W/src | grep -E "fp8 source|tensors"
run() {  # name, quantize options
  local name=$1; shift
  rm -rf $W/out_$name
  $B quantize $W/src --dry-run --json "$@" > $W/plan.json || return 1
  local floor; floor=$(serial_floor $W/src $(plan_output_bytes $W/plan.json) $W/floor.bin)
  drop; /usr/bin/time -f "%e %U %M" -o $W/t.txt $B quantize $W/src $W/out_$name --no-progress --json "$@" > $W/q_$name.json
  echo "$name floor_s $floor quantize wall_s user_s maxrss_kb: $(cat $W/t.txt) $(python3 -c "import json;d=json.load(open('$W/q_$name.json'));print('cast', d['cast_weights'], 'refused', len(d['cast_refused']), 'GB_read', round(d['bytes_read']/1e9,2), 'GB_out', round(d['bytes_out']/1e9,2))")"
}
run cast
run passthrough --scheme nvfp4a16 --scheme-for attention=fp8-block
run requant --requantize-fp8 --observer minmax
# verify --against the passthrough output: the build under test, and the baseline build where one is carried
# (build/devbins/fp4forge_base), alternated, so the two are compared on one machine.
for name in ${VERIFY_NAMES:-new base}; do
  bin=$B; [ $name = base ] && bin=$PWD/build/devbins/fp4forge_base
  [ -x $bin ] || continue
  drop; /usr/bin/time -f "%e %U %M" -o $W/t.txt $bin verify $W/out_passthrough --against $W/src --no-progress --json > $W/v.json
  echo "verify passthrough ($name) wall_s user_s maxrss_kb: $(cat $W/t.txt) $(python3 -c "import json;d=json.load(open('$W/v.json'));a=d['stats']['against'];print(d['ok'], 'cast', a['cast_modules'], 'passthrough', a['passthrough_modules'])")"
  [ -x $PWD/build/devbins/fp4forge_base ] || break
done
