# Sourced by the device scripts (not run): the serial I/O floor of docs/performance.md, one home for its
# definition. The floor of a run is reading the source's shards once with cat plus writing the run's planned
# output bytes with dd and one fsync, one after the other, page caches dropped first.
# shellcheck shell=bash

# Drops the page caches (root on the device machine): every timed run starts cold.
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# Seconds between two `date +%s.%N` stamps, to 0.01 s.
elapsed() { python3 -c "print(round($2 - $1, 2))"; }
# The output bytes a `quantize --dry-run --json` plan (the file at $1) says the run writes.
plan_output_bytes() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['plan']['output_bytes'])" "$1"; }
# Reads every shard of the checkpoint at $1 once.
read_source() { cat "$1"/*.safetensors > /dev/null; }
# Writes $2 bytes (rounded up to 4 MiB) of zeros to the file $1 and fsyncs it.
write_bytes() { dd if=/dev/zero of="$1" bs=4M count=$(( ($2 + 4194303) / 4194304 )) conv=fsync status=none; }
# The serial floor of reading the checkpoint at $1 and writing $2 bytes to the scratch file $3 (removed after):
# prints its seconds.
serial_floor() {
  drop
  local t0 t1
  t0=$(date +%s.%N); read_source "$1"; write_bytes "$3" "$2"; t1=$(date +%s.%N)
  rm -f "$3"
  elapsed "$t0" "$t1"
}
