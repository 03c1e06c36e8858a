#!/bin/bash
# device run (issue 25): memoryless_mse golden vectors for the schemes beside NVFP4A16, 2 seeds, CPU+CUDA;
cd "$(dirname "$0")"
python3 -c "import torch, os; print(torch.__version__, torch.cuda.is_available(), os.cpu_count(), torch.backends.cpu.get_cpu_capability())"
for seed in 4242 90210; do
  GOLDEN_SEED=$seed timeout 420 python3 observers_golden.py ct lc $OUT/mm-$seed --observer memoryless_mse --schemes W4A16,MXFP4A16,FP8_DYNAMIC,FP8_BLOCK > $OUT/mm-$seed.log 2>&1; echo "rc $seed $?"
  tail -5 $OUT/mm-$seed.log
  ls -la $OUT/mm-$seed
done
cd $OUT && tar cJf golden_mm.tar.xz mm-4242 mm-90210 && rm -rf mm-4242 mm-90210 && ls -la $OUT
