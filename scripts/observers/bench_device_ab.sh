#!/bin/bash
# Device A/B of fp4forge builds on the synthesized llama 8b, in one run: quantize under each observer of OBSERVERS
# (default mse; page caches dropped before each run) and verify --against the mse output, wall, CPU time and peak
# RSS per build, the I/O floor beside them (before the runs and after them). Run from the repo root with build/bin
# (the build under test), build/devlibs (the shared libraries the device lacks) and build/devbins/fp4forge_<name>
# (the other builds) carried; outputs are compared with the first name's. A name other than "new" runs
# build/devbins/fp4forge_<name>; a name LABEL:BUILD:FLAGS runs build BUILD with quantize FLAGS (commas for spaces,
# e.g. j24:base:-j,24). VERIFY_NAMES (default: NAMES; "" for none) the specs whose verify is timed, in the same
# LABEL:BUILD:FLAGS form (the flags go to verify: e.g. v16:new:-j,16), each VERIFY_ROUNDS times (default 1), the
# specs alternated within a round; verify always reads the mse output of the name "new".
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
OBSERVERS=${OBSERVERS:-mse}
build_of() { case "$1" in *:*) local r=${1#*:}; echo "${r%%:*}" ;; *) echo "$1" ;; esac; }
bin_of() { local b; b=$(build_of "$1"); if [ "$b" = new ]; then echo "$B"; else echo "$PWD/build/devbins/fp4forge_$b"; fi; }
flags_of() { case "$1" in *:*:*) echo "${1##*:}" | tr , ' ' ;; esac; }
label_of() { echo "${1%%:*}"; }
for round in $(seq 1 ${ROUNDS:-2}); do
  for obs in $OBSERVERS; do
    for spec in $NAMES; do
      name=$(label_of $spec)
      rm -rf $W/${obs}_$name
      # shellcheck disable=SC2046
      drop; /usr/bin/time -f "%e %U %S %M" -o $W/t.txt $(bin_of $spec) quantize $W/src $W/${obs}_$name --observer $obs --no-progress --json $(flags_of $spec) > /dev/null
      echo "$round $obs $name quantize wall_s user_s sys_s maxrss_kb: $(cat $W/t.txt)"
    done
  done
done
echo "FLOOR after $(serial_floor $W/src $(plan_output_bytes $W/plan.json) $W/floor.bin) s"
# Every build's output against the first name's.
REF=$(label_of ${NAMES%% *})
for obs in $OBSERVERS; do
  for spec in $NAMES; do
    name=$(label_of $spec)
    cmp -s <(cat $W/${obs}_$REF/*.safetensors | md5sum) <(cat $W/${obs}_$name/*.safetensors | md5sum) && echo "$obs $name output identical to $REF" || echo "$obs $name OUTPUT DIFFERS from $REF"
  done
done
case " $OBSERVERS " in *" mse "*) ;; *) exit 0 ;; esac
for vround in $(seq 1 ${VERIFY_ROUNDS:-1}); do
  for spec in ${VERIFY_NAMES-$NAMES}; do
    name=$(label_of $spec)
    # shellcheck disable=SC2046
    drop; /usr/bin/time -f "%e %U %S %M" -o $W/t.txt $(bin_of $spec) verify $W/mse_new --against $W/src --no-progress --json $(flags_of $spec) > $W/v_$name.json
    echo "$vround $name verify wall_s user_s sys_s maxrss_kb: $(cat $W/t.txt) $(python3 -c "import json;d=json.load(open('$W/v_$name.json'));a=d['stats']['against'];print(d['ok'], a.get('jobs'), a['mean_rel_rms'], a['mean_minmax_rel_rms'], a['reencode_mismatched_rows'], a['reencoded_rows'])")"
  done
done
