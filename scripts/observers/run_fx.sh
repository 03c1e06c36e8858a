#!/bin/bash
cd "$(dirname "$0")"
mkdir -p $OUT/fx
for fx in llama qwen3 phi3; do
  python3 fixture_upstream.py ct lc src/$fx fx/$fx-mse $OUT/fx/$fx nvfp4_expanded_mse 2>&1 | tail -12
  python3 fixture_upstream.py ct lc src/$fx fx/$fx-memoryless-mse $OUT/fx/$fx memoryless_mse 2>&1 | tail -12
done
cd $OUT && tar cJf fx.tar.xz fx && rm -rf fx
