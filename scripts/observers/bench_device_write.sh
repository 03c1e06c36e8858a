#!/bin/bash
# Device microbenchmark of the output's write path (write_paths.cc): THREADS threads write MB megabytes in chunks
# of CHUNK megabytes into one file by pwrite with writeback per chunk (as quantize does), into a file sized with
# ftruncate or reserved with fallocate first (measured and not kept), into one file per thread, and by memcpy into a
# shared mapping; page caches dropped before each, ROUNDS rounds. Run from the repo root with
# build/devbins/write_paths carried (built with the command at the top of write_paths.cc).
set -u
. "$(dirname "$0")/io_floor.sh"
W=/root/bench; mkdir -p $W
for round in $(seq 1 ${ROUNDS:-1}); do
  for mode in ${MODES:-pwrite1 trunc1 falloc1 pwriteN mmap1}; do
    drop; echo "$round $($PWD/build/devbins/write_paths $W $mode ${THREADS:-16} ${MB:-6144} ${CHUNK:-16})"
  done
done
