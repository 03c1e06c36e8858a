#!/bin/bash
# device run: golden vectors for both searched observers (2 seeds) + big differential + timings
set -x
cd "$(dirname "$0")"
python3 -c "import torch, sys; print(torch.__version__, torch.cuda.is_available())"
for obs in nvfp4_expanded_mse memoryless_mse; do
  for seed in 4242 90210; do
    GOLDEN_SEED=$seed python3 observers_golden.py ct lc $OUT/$obs-$seed --observer $obs > $OUT/$obs-$seed.log 2>&1; echo "rc $obs $seed $?"
    tail -3 $OUT/$obs-$seed.log
    xz -9 $OUT/$obs-$seed/NVFP4A16.json
  done
done
python3 bigdiff.py ct lc $OUT/big > $OUT/big.log 2>&1; echo "rc big $?"; tail -20 $OUT/big.log
cd $OUT && tar cJf golden_obs.tar.xz nvfp4_expanded_mse-4242 nvfp4_expanded_mse-90210 memoryless_mse-4242 memoryless_mse-90210 && tar cJf big.tar.xz big && rm -rf */ && ls -la $OUT
