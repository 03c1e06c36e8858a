#!/bin/bash
# device run (issue 25): whole fixtures with memoryless_mse under W4A16 and MXFP4A16, fp4forge's CLI output
# against upstream's model_free pipeline (fixture_upstream.py <scheme>)
cd "$(dirname "$0")"; O=$PWD
B="${FP4FORGE_BIN:-fp4forge}"
mkdir -p $OUT/fx /tmp/o
for fx in llama qwen3 phi3; do
  for sc in W4A16 MXFP4A16; do
    [ $sc = W4A16 ] && [ $fx != llama ] && continue
    lc=$(echo $sc | tr A-Z a-z)
    $B quantize src/$fx /tmp/o/$fx-$lc --scheme $lc --observer memoryless-mse -j 8 > /tmp/o/$fx-$lc.log 2>&1; echo "quantize $fx $sc rc $?"
    python3 fixture_upstream.py ct lc src/$fx /tmp/o/$fx-$lc $OUT/fx/$fx.$lc memoryless_mse $sc 2>&1 | tail -8
  done
done
cd $OUT && tar cJf fx3.tar.xz fx && rm -rf fx && ls -la
