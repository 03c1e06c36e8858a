#!/bin/bash
# The disk itself beside quantize, on the device machine and the synthesized llama 8b, in one run. First the
# transfers with plain tools: the source read by cat, the output's size written by dd with fsync, both one after
# the other (the serial floor), both at once, the source read by 4 concurrent cats, and those 4 readers and the
# write at once (the most this disk gives when reads and writes overlap). Then quantize min-max (and
# --observer mse where MSE=1), ROUNDS times, once per entry of ENVS (environment settings, ';'-separated: for
# builds with experimental switches). Page caches dropped before each. Prints "IO <what> <s>" and
# "RUN <observer> <round> env=... wall_s user_s sys_s maxrss_kb: ... <md5 prefix of the output>" lines.
# IOROUNDS repeats the plain-tool part. Run from the repo root with build/bin and build/devlibs carried.
set -u
. "$(dirname "$0")/io_floor.sh"
export LD_LIBRARY_PATH=$PWD/build/devlibs
B=${B:-$PWD/build/bin/fp4forge}
W=${W:-/root/bench}; mkdir -p $W
[ -d $W/src ] || $B synth --arch llama --size 8b --out $W/src --seed 1 > /dev/null
$B quantize $W/src --dry-run --json > $W/plan.json
OUTB=$(plan_output_bytes $W/plan.json)
rd() { read_source $W/src; }
rd4() { ls $W/src/*.safetensors | xargs -P 4 -n 1 cat > /dev/null; }
wr() { write_bytes $W/floor.bin $OUTB; }
timed() {  # name, command...: caches dropped, the command timed, the scratch output removed
  local name=$1 t0 t1; shift
  drop; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); rm -f $W/floor.bin
  echo "IO $name $(elapsed $t0 $t1)"
}
at_once() { "$1" & "$2" & wait; }
echo "IO source_GB $(du -sb $W/src | awk '{print $1/1e9}') output_GB $(python3 -c "print($OUTB/1e9)")"
for round in $(seq 1 ${IOROUNDS:-1}); do
  timed read rd
  timed write wr
  echo "IO serial_floor $(serial_floor $W/src $OUTB $W/floor.bin)"
  timed read_and_write_at_once at_once rd wr
  timed read_4_readers rd4
  timed read_4_readers_and_write_at_once at_once rd4 wr
done
obs="minmax"; [ "${MSE:-0}" = 1 ] && obs="minmax mse"
# ENVS: ';'-separated environment settings, one quantize per entry and observer per round (default: none).
IFS=';' read -ra envs <<< "${ENVS:-}"
[ ${#envs[@]} -eq 0 ] && envs=("")
for round in $(seq 1 ${ROUNDS:-2}); do
  for o in $obs; do
    for e in "${envs[@]}"; do
      rm -rf $W/q_$o
      drop; env $e /usr/bin/time -f "%e %U %S %M" -o $W/t.txt $B quantize $W/src $W/q_$o --observer $o --no-progress --json > /dev/null
      echo "RUN $o $round env='$e' wall_s user_s sys_s maxrss_kb: $(cat $W/t.txt) $(cat $W/q_$o/*.safetensors | md5sum | cut -c1-12)"
    done
  done
done
