#!/usr/bin/env bash
# make demo: runs the main jobs of fp4forge on a built-in example (a synthesized tiny multimodal MoE).
set -euo pipefail
BIN=${1:-build/bin/fp4forge}
BIN=$(realpath "$BIN")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fp4forge-demo.XXXXXX")
PIDS=()  # background helpers (the canned seats of the gateway stages), stopped on exit
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
stage() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "${*:2}"; "${@:2}"; }

"$BIN" --version
stage "selftest: the NVFP4A16 golden vectors through every codec path this CPU runs, and the MXFP4A16, FP8 and W4A16 vectors through their reference encoders (byte-exact to compressed-tensors)" \
  "$BIN" selftest
stage "synthesize a tiny Gemma-4 MoE multimodal checkpoint" \
  "$BIN" synth --arch gemma4-moe --size tiny --out "$WORK/src" --seed 7
stage "doctor: check config vs tensors, processor and tokenizer files (must exit 0)" \
  "$BIN" doctor "$WORK/src"
stage "inspect it" "$BIN" inspect "$WORK/src"
stage "plan vLLM seats for it (bf16, and as NVFP4A16) on an example GPU with 41 GiB held by another tenant" \
  "$BIN" plan --seat demo="$WORK/src" --seat demo-nvfp4="$WORK/src:assume=nvfp4a16" --gpu 0=96GiB:used=41GiB
stage "the same seat as vLLM 0.19 and as 0.28 would size it, on a known card (its driver reserve and the start-up check taken into account); 0.19 cannot build this Gemma-4 config form, so the plan fails on it and says what to fix (exit 1 expected)" \
  bash -c '"$0" plan --seat v019="$1/src:assume=nvfp4a16,vllm_version=0.19" --seat v028="$1/src:assume=nvfp4a16,vllm_version=0.28" --gpu "0=81559MiB:name=NVIDIA H100 80GB HBM3:used=30GiB"; test $? -eq 1' "$BIN" "$WORK"
EXS=$(cd "$(dirname "$0")/.." && pwd)/examples/synth
stage "a seat at a real model's size without its weights: synth --config reads Qwen3-235B-A22B's config.json into the family's layout (235,093,634,560 parameters, as published) and --header-only writes its shards as headers over sparse data (a few MiB on disk)" \
  "$BIN" synth --config "$EXS/qwen3-235b-a22b" --header-only --out "$WORK/q235"
stage "plan that seat as NVFP4A16 across two 96 GB cards (tensor parallel 2)" \
  "$BIN" plan --seat q235="$WORK/q235:assume=nvfp4a16,tp=2,gpu=0+1,max_model_len=32768" --gpu 0=96GiB --gpu 1=96GiB
stage "any family synth lays out by rule, at its real size: DeepSeek-V3 as published (MLA, 3 dense + 58 MoE layers of 256 experts, its MTP layer), header-only: 684,489,845,504 parameters (671B + the 14B MTP layer) in a few MiB, planned as NVFP4A16 on eight 141 GB cards" \
  bash -c '"$0" synth --config "$1/deepseek-v3" --header-only --no-progress --out "$2/dsv3" && "$0" plan --seat "dsv3=$2/dsv3:assume=nvfp4a16,tp=8,gpu=0+1+2+3+4+5+6+7,max_model_len=65536" $(for i in 0 1 2 3 4 5 6 7; do printf -- "--gpu %s=143771MiB " "$i"; done) | sed -n "1,16p"' "$BIN" "$EXS" "$WORK"
EX=$(cd "$(dirname "$0")/.." && pwd)/examples/plan
stage "today's seats under vLLM 0.34 rules (the newest modelled; each seat says how far its flags move it) and their picture (--svg: each seat numbered on the bar, a legend of every part): a Gemma-4 31B (sliding + global layers, k_eq_v) and a Qwen3.6-27B (GatedDeltaNet hybrid), NVFP4-sized weights, fp8 KV at 256K tokens, on one 96 GB RTX PRO 6000 (the model runner decides whether CUDA graphs come out of the budget)" \
  "$BIN" plan --seat "gemma4-31b=$EX/gemma-4-31b:weights=19GiB,kv_cache_dtype=fp8,max_model_len=256K,gpu_memory_utilization=0.52" \
  --seat "qwen36-27b=$EX/qwen3.6-27b:weights=17GiB,kv_cache_dtype=fp8,max_model_len=256K,gpu_memory_utilization=0.44" \
  --gpu "0=97887MiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition" --svg "$WORK/gpus.svg"
stage "calibration from the seat's own start-up log (log=): vLLM 0.19's Gemma-2 9B seat on an H100, its pool reproduced, and the same seat at utilization 0.85 with the measured overhead carried" \
  bash -c '"$0" plan --seat "g2=$1/gemma-2-9b:log=$1/gemma-2-9b/vllm-startup.log" --gpu "0=81559MiB:name=NVIDIA H100 80GB HBM3" | sed -n "1,30p" && "$0" plan --seat "g2=$1/gemma-2-9b:log=$1/gemma-2-9b/vllm-startup.log,gpu_memory_utilization=0.85" --gpu "0=81559MiB:name=NVIDIA H100 80GB HBM3" | grep -E "KV memory|re-estimated|carried"' "$BIN" "$EX"
stage "plan --from-log: the seat recovered from its log alone (model, name, args, the card it ran on)" \
  bash -c 'sed "s#'"'"'model'"'"': '"'"'google/gemma-2-9b-it'"'"'#'"'"'model'"'"': '"'"'$1/gemma-2-9b'"'"'#" "$1/gemma-2-9b/vllm-startup.log" > "$2/seat.log" && "$0" plan --from-log "$2/seat.log" | grep -E "^seat|measured|KV memory|^all"' "$BIN" "$EX" "$WORK"
stage "a unified-memory card (DGX Spark): the start-up check uses the free memory at boot, and a new seat replaces a running one on a busy card" \
  bash -c '"$0" plan --seat "g26=$1/gemma-4-26b-a4b:weights=16GiB,max_model_len=32k,gpu_memory_utilization=0.45" --gpu "spark=119.7GiB:name=NVIDIA GB10:unified:free=70GiB" | tail -4 && "$0" plan --seat "old=$1/qwen3.6-27b:weights=17GiB,max_model_len=64k,gpu=0,gpu_memory_utilization=0.5" --seat "new=$1/gemma-4-26b-a4b:weights=16GiB,max_model_len=64k,gpu=0,gpu_memory_utilization=0.5,replaces=old" --gpu "0=97887MiB:used=60GiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition" | tail -6' "$BIN" "$EX"
stage "a busy card: 76 GiB held by others, utilization 0.20 asked; vLLM would refuse at start-up, and plan says so first with the utilization that passes (exit 1 expected)" \
  bash -c '"$0" plan --seat "g26=$1/gemma-4-26b-a4b:weights=16GiB,gpu_memory_utilization=0.20,max_model_len=32k" --gpu "0=97887MiB:used=76GiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition"; test $? -eq 1' "$BIN" "$EX"
# A Qwen3 seat whose chat template renders JSON tool calls and can think (enable_thinking), as Qwen3's does.
QWEN="$WORK/qwen3-chat"
cp -r "$(dirname "$0")/../tests/data/qwen3" "$QWEN"
printf '%s' '{%- if tools %}<tools>{{ tools }}</tools>{%- endif %}{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }}<|im_end|>{% endfor %}{%- if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}<tool_call>' > "$QWEN/chat_template.jinja"
stage "a pinned stack: --emit-compose writes the image of the planned vLLM release (never latest), the family's tool-call and reasoning parsers chosen by its chat template and version (so probe's tools check passes), and extra flags from vllm_args=" \
  bash -c '"$0" plan --seat "chat=$1:vllm_version=0.28,vllm_args=--enable-chunked-prefill" --gpu "0=81559MiB:name=NVIDIA H100 80GB HBM3:headroom=2GiB" --emit-compose "$2/deploy" --api-host gpu-host-1 | grep -E "^  serving|HEADROOM|^0 " && grep -E "image:|tool-call-parser|reasoning-parser|enable-auto-tool-choice|enable-chunked-prefill" -A1 "$2/deploy/chat/compose.yaml" | grep -v "^--"' "$BIN" "$QWEN" "$WORK"
stage "a stack vLLM could not start is refused with the reason and the fix (a config-only seat sized by weights=; exit 1, nothing written)" \
  bash -c '"$0" plan --seat "chat=$1" --seat "cfg=$2/gemma-4-31b:weights=19GiB" --gpu "0=97887MiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition" --emit-compose "$3/deploy2" > /dev/null; test $? -eq 1 && test ! -e "$3/deploy2"' "$BIN" "$QWEN" "$EX" "$WORK"
stage "size the seat's weights under each scheme fp4forge knows (assume=SCHEME)" \
  "$BIN" plan --seat nvfp4="$WORK/src:assume=nvfp4a16" --seat mxfp4="$WORK/src:assume=mxfp4a16" \
  --seat fp8="$WORK/src:assume=fp8-dynamic" --seat fp8b="$WORK/src:assume=fp8-block" --seat int4="$WORK/src:assume=w4a16"
stage "plan the NVFP4A16 quantization (dry run: nothing written)" "$BIN" quantize "$WORK/src" --dry-run
stage "quantize it (preflight first: doctor's checks on the source, an error refuses; then streaming, atomic; NVFP4A16 with llm-compressor's recommended nvfp4_expanded_mse search, byte-exact to it; the output gets the preprocessor_config.json doctor --fix derives)" "$BIN" quantize "$WORK/src" "$WORK/q"
stage "the same with the preset's min-max observer (one flag away, byte-exact to llm-compressor's default recipe)" \
  "$BIN" quantize "$WORK/src" "$WORK/q-minmax" --observer minmax
stage "min-max vs the search side by side: verify each against the source; the quality report (error per module kind and layer, error vs min-max, the scheme's reference) and its SVG, rendered to PNG where rsvg-convert is installed" \
  bash -c '"$0" verify "$2/q-minmax" --against "$1" | grep -E "observer|rel RMS" && "$0" verify "$2/q" --against "$1" --svg "$2/quality.svg" | sed -n "1,22p" && test -s "$2/quality.svg" && if command -v rsvg-convert > /dev/null; then rsvg-convert "$2/quality.svg" -o "$2/quality.png" && echo "rendered quality.png ($(wc -c < "$2/quality.png") bytes)"; fi' "$BIN" "$WORK/src" "$WORK"
stage "quantize it again, single-threaded (an independent second run)" \
  "$BIN" quantize "$WORK/src" "$WORK/q2" -j1
stage "verify the quantization against its source (structure, policy, values, error vs source)" \
  "$BIN" verify "$WORK/q" --against "$WORK/src"
stage "diff the two quantizations (same class; must be identical)" "$BIN" diff "$WORK/q" "$WORK/q2"
DATA="$(dirname "$0")/../tests/data"
stage "the other data-free schemes, each byte-exact to compressed-tensors: MXFP4A16, FP8 dynamic, FP8 block, W4A16" \
  bash -c 'for s in mxfp4a16 fp8-dynamic fp8-block w4a16; do "$0" quantize "$1" "$2/q-$s" --scheme $s && "$0" inspect "$2/q-$s" | grep quantization || exit 1; done' "$BIN" "$WORK/src" "$WORK"
stage "prove each of them: verify --against the source (every quantized Linear re-encoded and compared byte for byte; on this narrow example W4A16 and FP8_BLOCK keep most Linears, which verify warns about), doctor without errors" \
  bash -c 'for s in mxfp4a16 fp8-dynamic fp8-block w4a16; do v=$("$0" verify "$2/q-$s" --against "$1") || { echo "$v"; exit 1; }; echo "$s: ${v##*$'"'"'\n'"'"'}"; d=$("$0" doctor "$2/q-$s") || { echo "$d"; exit 1; }; done' "$BIN" "$WORK/src" "$WORK"
stage "searched scales for the group schemes too: W4A16 and MXFP4A16 with llm-compressor's memoryless_mse (byte-exact to it), verified against the source with the error vs min-max" \
  bash -c 'for s in w4a16 mxfp4a16; do "$0" quantize "$1" "$2/mse-$s" --scheme $s --observer memoryless-mse > /dev/null && "$0" verify "$2/mse-$s" --against "$1" | grep -E "observer memoryless_mse|result"; done' "$BIN" "$DATA/llama" "$WORK"
stage "a wider Qwen3.5-MoE (widths multiples of 128): FP8_BLOCK quantizes experts and 8-bit GatedDeltaNet projections, verified byte for byte" \
  bash -c "\"$BIN\" quantize \"$DATA/qwen3_5-moe-mm-wide\" \"$WORK/wide-fp8b\" --scheme fp8-block && \"$BIN\" verify \"$WORK/wide-fp8b\" --against \"$DATA/qwen3_5-moe-mm-wide\" --strict"
stage "the architecture registry: every family fp4forge knows, with what vLLM registers for it" \
  "$BIN" inspect --families
stage "a Qwen3-VL-MoE checkpoint in the Hub's expert orientation ([E, H, 2I]): orientation read from the shapes" \
  "$BIN" quantize "$DATA/qwen3_vl_moe-hub" "$WORK/vlm"
stage "verify it against its source (every expert slice compared)" \
  "$BIN" verify "$WORK/vlm" --against "$DATA/qwen3_vl_moe-hub"
stage "DeepSeek-V3 (MLA, shared experts, an MTP layer): doctor, quantize, verify" \
  bash -c "\"$BIN\" doctor \"$DATA/deepseek_v3\" && \"$BIN\" quantize \"$DATA/deepseek_v3\" \"$WORK/ds\" && \"$BIN\" verify \"$WORK/ds\" --against \"$DATA/deepseek_v3\""
stage "structure first: the same DeepSeek-V3 under family names no registry lists (model_type and architectures renamed): the generic reading finds the MTP layer from the config and the tensors, writes the registry reading's bytes, and verifies clean" \
  bash -c 'cp -r "$1" "$2/ds-generic-src" && sed -i -e "s/\"deepseek_v3\"/\"fp4forge_generic\"/" -e "s/\"DeepseekV3ForCausalLM\"/\"Fp4forgeGenericForCausalLM\"/" "$2/ds-generic-src/config.json" && grep -q fp4forge_generic "$2/ds-generic-src/config.json" && "$0" quantize "$2/ds-generic-src" "$2/ds-generic" > /dev/null && for f in "$2"/ds/*.safetensors; do cmp "$f" "$2/ds-generic/${f##*/}" || exit 1; done && echo "every shard byte-identical to the registry reading" && "$0" verify "$2/ds-generic" --against "$2/ds-generic-src" | tail -1 && "$0" doctor "$2/ds-generic" | tail -1' "$BIN" "$DATA/deepseek_v3" "$WORK"
FP8="$DATA/fp8"
stage "FP8 releases as input: DeepSeek-V3 in its native FP8 form (128x128 weight_scale_inv blocks, written by transformers' FineGrainedFP8): inspect and doctor read it as a source" \
  bash -c "\"$BIN\" inspect \"$FP8/native-deepseek_v3\" | grep -E '^(quantization|fp8 source)' && \"$BIN\" doctor \"$FP8/native-deepseek_v3\""
stage "quantize it straight to NVFP4A16 (each FP8 weight expanded to bf16 as transformers dequantizes it, streamed into the codec), verify against the FP8 release" \
  bash -c "\"$BIN\" quantize \"$FP8/native-deepseek_v3\" \"$WORK/ds-fp8\" && \"$BIN\" verify \"$WORK/ds-fp8\" --against \"$FP8/native-deepseek_v3\""
stage "the same from the bf16 expansion transformers wrote: every tensor identical (only transformers' re-saved config differs)" \
  bash -c "\"$BIN\" quantize \"$FP8/native-deepseek_v3.bf16\" \"$WORK/ds-bf16\" >/dev/null; \"$BIN\" diff \"$WORK/ds-fp8\" \"$WORK/ds-bf16\" | grep -E '^(class|scheme|tensors: .* 0 differ)'"
stage "every dialect: compressed-tensors FP8 (channel, block, tensor) and a ModelOpt FP8 export, each quantized and verified against its FP8 source" \
  bash -c 'for f in ct-fp8-dynamic ct-fp8-block ct-fp8-tensor ct-fp8-block-qwen3_moe modelopt-fp8; do "$0" quantize "$1/$f" "$2/q-$f" >/dev/null && v=$("$0" verify "$2/q-$f" --against "$1/$f") || { echo "$v"; exit 1; }; echo "$f: ${v##*$'"'"'\n'"'"'}"; done' "$BIN" "$FP8" "$WORK"
stage "an already-4-bit source is refused with the reason (exit 3), nothing written" \
  bash -c "\"$BIN\" quantize \"$WORK/ds-fp8\" \"$WORK/requant\"; rc=\$?; echo \"exit \$rc\"; [ \$rc -eq 3 ] && [ ! -e \"$WORK/requant\" ]"
# A release ships its tokenizer: the fixtures and synth's output carry one. Without it, doctor says the folder is not
# servable (an error), unless --tokenizer names where vLLM will read it from.
stage "servable means servable: a folder without its tokenizer is an error (vLLM cannot start on it); doctor --tokenizer names where vllm serve --tokenizer will read it from" \
  bash -c "cp -r \"$DATA/llama\" \"$WORK/notok\" && rm \"$WORK/notok\"/tokenizer*.json \"$WORK/notok/chat_template.jinja\" && { \"$BIN\" doctor \"$WORK/notok\"; test \$? -eq 1; } && \"$BIN\" doctor \"$WORK/notok\" --tokenizer \"$DATA/llama\""
stage "preflight refuses what doctor rejects: a Gemma-4 re-save that lost its global-KV fields (no per_layer_config either) and its processor; quantize exits 3 before writing anything, one line per finding with its fix" \
  bash -c "cp -r \"$WORK/src\" \"$WORK/broken\" && sed -i '/\"per_layer_config\": {/,/^    },\$/d' \"$WORK/broken/config.json\" && ! grep -q per_layer_config \"$WORK/broken/config.json\" && rm \"$WORK/broken/processor_config.json\" && { \"$BIN\" quantize \"$WORK/broken\" \"$WORK/q-broken\"; test \$? -eq 3 && test ! -e \"$WORK/q-broken\" && echo 'refused, nothing written'; }"
stage "the fixes it named: doctor --fix writes the derived global fields; --processor-from and --tokenizer-from take the missing serving files from the release (a folder or a cached repo id; here its tokenizer went missing too), checked as doctor checks them; the output is servable as written: doctor and verify clean" \
  bash -c "\"$BIN\" doctor \"$WORK/broken\" --fix | grep -E '^changed|^summary'; rm \"$WORK/broken\"/tokenizer*.json \"$WORK/broken/chat_template.jinja\" && \"$BIN\" quantize \"$WORK/broken\" \"$WORK/q-served\" --processor-from \"$WORK/src\" --tokenizer-from \"$WORK/src\" | grep -E '^preflight|^  (took|wrote)' && \"$BIN\" doctor \"$WORK/q-served\" | tail -1 && \"$BIN\" verify \"$WORK/q-served\" --against \"$WORK/broken\" | tail -1"
stage "verify and inspect say what doctor says of an output without its tokenizer (verify exit 1); verify --tokenizer names where vllm serve --tokenizer reads it from" \
  bash -c "cp -r \"$WORK/q-served\" \"$WORK/q-notok\" && rm \"$WORK/q-notok\"/tokenizer*.json \"$WORK/q-notok/chat_template.jinja\" && { \"$BIN\" verify \"$WORK/q-notok\" | grep -E '^error|^result' | cut -c1-150; test \${PIPESTATUS[0]} -eq 1; } && \"$BIN\" inspect \"$WORK/q-notok\" | grep -A1 '^serving files' | cut -c1-150 && \"$BIN\" verify \"$WORK/q-notok\" --tokenizer \"$WORK/src\" | tail -1"
stage "guard rails: a stale index total_size is a warning that doctor --fix rewrites (with a backup); a run into an existing DST is refused (exit 3) and leaves it alone" \
  bash -c "cp -r \"$DATA/llama\" \"$WORK/stale\" && sed -i 's/\"total_size\": *[0-9]*/\"total_size\": 1/' \"$WORK/stale/model.safetensors.index.json\" && \"$BIN\" doctor \"$WORK/stale\" --fix && \"$BIN\" doctor \"$WORK/stale\" --strict && { \"$BIN\" quantize \"$WORK/stale\" \"$WORK/q\"; test \$? -eq 3; }"
# A Hugging Face hub cache as huggingface_hub lays one out (blobs + snapshot links + refs/main), built from SRC.
hub_cache() {  # hub_cache SRC CACHE ORG NAME
  local repo="$2/models--$3--$4" commit blob f
  commit=$(cat "$1"/*.json | sha1sum | cut -c1-40)
  mkdir -p "$repo/blobs" "$repo/refs" "$repo/snapshots/$commit"
  for f in "$1"/*; do
    [ -f "$f" ] || continue
    blob=$(sha256sum "$f" | cut -c1-64)
    cp "$f" "$repo/blobs/$blob"
    ln -s "../../blobs/$blob" "$repo/snapshots/$commit/$(basename "$f")"
  done
  printf '%s' "$commit" >"$repo/refs/main"
}
hub_cache "$WORK/src" "$WORK/hub" demo-org tiny-gemma4
mkdir "$WORK/cwd"
cache_state() { find "$WORK/hub" -printf '%p %y %s %T@ %l\n' | sort | sha1sum; }
before=$(cache_state)
stage "Hugging Face cache repo ids: inspect, quantize (DST defaults to ./NAME-NVFP4A16) and verify read demo-org/tiny-gemma4 from HF_HUB_CACHE, offline; the cache is never written" \
  bash -c "cd \"$WORK/cwd\" && export HF_HUB_CACHE=\"$WORK/hub\" && \"$BIN\" inspect demo-org/tiny-gemma4 && \"$BIN\" quantize demo-org/tiny-gemma4 && \"$BIN\" verify tiny-gemma4-NVFP4A16 --against demo-org/tiny-gemma4"
stage "--tokenizer-from / --processor-from a cached repo id: the re-save without its tokenizer and processor takes them from demo-org/tiny-gemma4 in HF_HUB_CACHE (copied as bytes, never links into the cache), vocabulary checked against the embeddings; doctor clean" \
  bash -c "export HF_HUB_CACHE=\"$WORK/hub\" && \"$BIN\" quantize \"$WORK/broken\" \"$WORK/q-from-cache\" --tokenizer-from demo-org/tiny-gemma4 --processor-from demo-org/tiny-gemma4 | grep -E '^preflight|^  (took|wrote)' | sed \"s|$WORK/hub/||\" && test ! -L \"$WORK/q-from-cache/tokenizer.json\" && \"$BIN\" doctor \"$WORK/q-from-cache\" | tail -1"
[ "$(cache_state)" = "$before" ] || { echo "demo: the Hugging Face cache changed" >&2; exit 1; }
# A transformers re-save drops the MTP tensors (F8): strip them as it does (the MTP shard and its index
# entries), then splice them back from the release.
strip_mtp() {
  cp -r "$1" "$2" && rm "$2/model-mtp.safetensors"
  awk '/"mtp\./ { next } { l[n++] = $0 } END { for (i = 0; i < n; i++) { s = l[i]; if (i + 1 < n && l[i + 1] ~ /^ *}/) sub(/,$/, "", s); print s } }' \
    "$1/model.safetensors.index.json" >"$2/model.safetensors.index.json"
}
stage "MTP lost on re-save (F8): synthesize a tiny Qwen3.5-MoE release (its MTP layer in model-mtp.safetensors)" \
  bash -c "\"$BIN\" synth --arch qwen3_5-moe --size tiny --out \"$WORK/mtp-release\" --seed 7 >/dev/null && echo synthesized"
stage "strip the MTP as a transformers re-save does (the MTP shard and its index entries), twice: one copy for doctor, one for quantize" \
  bash -c "$(declare -f strip_mtp); strip_mtp \"$WORK/mtp-release\" \"$WORK/resaved\" && strip_mtp \"$WORK/mtp-release\" \"$WORK/resaved2\" && ls \"$WORK/resaved\" | grep -c safetensors"
stage "doctor names it (mtp-declared-missing, a warning: exit 0)" \
  bash -c "\"$BIN\" doctor \"$WORK/resaved\" | grep '^warning  mtp-declared-missing'"
stage "doctor --fix --mtp-from the release: the MTP tensors spliced back unquantized into their own shard, index updated, backups written" \
  "$BIN" doctor "$WORK/resaved" --fix --mtp-from "$WORK/mtp-release"
stage "doctor is clean now (--strict), and a second --fix --mtp-from is a no-op" \
  bash -c "\"$BIN\" doctor \"$WORK/resaved\" --strict && \"$BIN\" doctor \"$WORK/resaved\" --fix --mtp-from \"$WORK/mtp-release\" | grep 'nothing to splice'"
stage "quantize --mtp-from: the stripped copy's quantization gets the release's MTP (bf16, in ignore), verifies against the release, and equals quantizing the release" \
  bash -c "\"$BIN\" quantize \"$WORK/resaved2\" \"$WORK/q-mtp\" --mtp-from \"$WORK/mtp-release\" && \"$BIN\" verify \"$WORK/q-mtp\" --against \"$WORK/mtp-release\" && \"$BIN\" quantize \"$WORK/mtp-release\" \"$WORK/q-release\" >/dev/null && \"$BIN\" diff \"$WORK/q-mtp\" \"$WORK/q-release\""
stage "config groups as vLLM matches them (names before the Linear class): a config whose only group targets attention leaves the quantized MLP with no scheme, a warning in inspect and an error in verify (exit 1)" \
  bash -c "\"$BIN\" quantize \"$DATA/llama\" \"$WORK/mix\" >/dev/null && sed -i 's/\"Linear\"/\"re:.*self_attn[.]\"/' \"$WORK/mix/config.json\" && \"$BIN\" inspect \"$WORK/mix\" | grep -E '^quantization|match no config group' && { \"$BIN\" verify \"$WORK/mix\" | grep -E 'match no config group|^result'; test \${PIPESTATUS[0]} -eq 1; }"
stage "mixed precision in one run (issue 30): the wide Qwen3.5-MoE with NVFP4A16 experts, FP8_BLOCK attention and FP8_DYNAMIC GatedDeltaNet projections (kept at 4 bits, quantized at 8); one config group per scheme, targets proven against vLLM's own lookup; verified byte for byte against the source, doctor without errors" \
  bash -c "\"$BIN\" quantize \"$DATA/qwen3_5-moe-mm-wide\" \"$WORK/mixed\" --scheme nvfp4a16 --scheme-for attention=fp8-block --scheme-for linear_attention=fp8-dynamic | grep -E '^  group_|^wrote' && \"$BIN\" verify \"$WORK/mixed\" --against \"$DATA/qwen3_5-moe-mm-wide\" | tail -1 && \"$BIN\" doctor \"$WORK/mixed\" | tail -1"
stage "the same shape from a recipe file (FP8_DYNAMIC by default, NVFP4A16 routed experts), and plan sizes the seat with recipe= exactly as the output weighs" \
  bash -c "printf 'scheme: fp8-dynamic\\nrules:\\n  - match: experts\\n    scheme: nvfp4a16\\n' > \"$WORK/recipe.yaml\" && \"$BIN\" quantize \"$DATA/qwen3_moe\" \"$WORK/recipe-q\" --recipe \"$WORK/recipe.yaml\" | grep -E '^  group_' && \"$BIN\" verify \"$WORK/recipe-q\" --against \"$DATA/qwen3_moe\" | tail -1 && \"$BIN\" plan --seat \"m=$DATA/qwen3_moe:recipe=$WORK/recipe.yaml\" | grep weights && \"$BIN\" plan --seat \"m=$WORK/recipe-q\" | grep weights"
stage "a DeepSeek FP8 release to NVFP4A16 experts with its attention kept in FP8: the attention's 128x128-block payload and scales pass through untouched (no re-encoding), the rest quantized from the bf16 expansion; verify proves both" \
  bash -c "\"$BIN\" quantize \"$DATA/fp8/native-deepseek_v3\" \"$WORK/ds-mixed\" --scheme nvfp4a16 --scheme-for attention=fp8-block 2>/dev/null | grep -E 'passed through|^  group_' && \"$BIN\" verify \"$WORK/ds-mixed\" --against \"$DATA/fp8/native-deepseek_v3\" | grep -E 'passed through|^result'"
stage "a DeepSeek-V4-style release (FP8 attention with E8M0 128x128 scales, routed experts as packed FP4 with one E8M0 scale per 32; written from transformers' own quantizer): NVFP4A16 experts by the lossless cast (FP4 codes kept, E8M0 scales folded into E4M3 under a power-of-two global scale), the FP8 attention passed through (E8M0 scales written as their exact F32 values); verify proves both equal to the source, doctor clean" \
  bash -c "\"$BIN\" inspect \"$DATA/fp8/dsv4-fp8-fp4\" | grep -iE 'fp8|fp4' | head -3 && \"$BIN\" quantize \"$DATA/fp8/dsv4-fp8-fp4\" \"$WORK/dsv4\" --scheme nvfp4a16 --scheme-for attention=fp8-block 2>/dev/null | grep -E 'passed through|cast losslessly|^  group_|^wrote' && \"$BIN\" verify \"$WORK/dsv4\" --against \"$DATA/fp8/dsv4-fp8-fp4\" | grep -E 'passed through|cast losslessly|^result' && \"$BIN\" doctor \"$WORK/dsv4\" | tail -1"
stage "gpt-oss's own MXFP4 release (experts as *_blocks / *_scales): doctor names the format and the experts it could not check, as warnings, exit 0 (it used to apply compressed-tensors' checks: ten false errors); verify, which cannot prove it, says so in one error (exit 1)" \
  bash -c "\"$BIN\" doctor \"$DATA/mxfp4/gpt_oss-mxfp4\" | grep -E '^warning|^error|^summary' | cut -c1-160 && { \"$BIN\" verify \"$DATA/mxfp4/gpt_oss-mxfp4\" | grep -E '^error|^result' | cut -c1-160; test \${PIPESTATUS[0]} -eq 1; }"
stage "a rule that would give q_proj another scheme than k_proj/v_proj is refused (vLLM loads them as one qkv_proj; exit 2), nothing written" \
  bash -c "\"$BIN\" quantize \"$DATA/llama\" \"$WORK/split\" --scheme-for model.layers.0.self_attn.q_proj=fp8-dynamic; test \$? -eq 2 && test ! -e \"$WORK/split\""
stage "structure first: GPT-NeoX (gpt_neox.layers.*, no registry row) and Nemotron-H (backbone.*, non-gated experts) quantized from what their tensors show, verified against the source, doctor clean" \
  bash -c "for f in gpt_neox nemotron_h; do \"$BIN\" quantize \"$DATA/\$f\" \"$WORK/s-\$f\" | tail -2 && \"$BIN\" verify \"$WORK/s-\$f\" --against \"$DATA/\$f\" | tail -1 && \"$BIN\" doctor \"$WORK/s-\$f\" | tail -1 || exit 1; done"
stage "experts as three separate 3-D stacks (Step-3.x's storage): split like the fused form; a run that would quantize nothing is refused (exit 3), nothing written" \
  bash -c "\"$BIN\" quantize \"$DATA/qwen3_vl_moe-sep3d\" \"$WORK/sep3d\" | tail -2 && \"$BIN\" verify \"$WORK/sep3d\" --against \"$DATA/qwen3_vl_moe-sep3d\" | tail -1 && { \"$BIN\" quantize \"$DATA/qwen3\" \"$WORK/none\" --scheme w4a16; test \$? -eq 3 && test ! -e \"$WORK/none\" && echo 'refused, nothing written'; }"
stage "show the aliases of an example LiteLLM gateway config (and who routes to a seat)" \
  "$BIN" gateway show --config "$(dirname "$0")/../examples/litellm-config.yaml" --backend http://127.0.0.1:8001
# A load-balanced alias: two replicas of 'chat'. The seats and the gateway below are fp4forge-fake-seat, a canned
# OpenAI-compatible server built beside the binary (no GPU, no LiteLLM here): it stands in for the new vLLM seat and
# for the LiteLLM proxy after its restart.
FAKE="$(dirname "$BIN")/fp4forge-fake-seat"
cp "$(dirname "$0")/../examples/litellm-replicas.yaml" "$WORK/litellm.yaml"
# The new seat takes its own key (NVFP4_SEAT_KEY), not the one the alias's deployments name today (VLLM_API_KEY).
export VLLM_API_KEY=demo-seat-key NVFP4_SEAT_KEY=demo-nvfp4-seat-key LITELLM_MASTER_KEY=demo-master-key
"$FAKE" --model org/Qwen3-8B-NVFP4A16 --api-key-env NVFP4_SEAT_KEY --kv-blocks 2048 --block-size 16 --lifetime 120 \
  --url-file "$WORK/seat.url" >/dev/null &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/seat.url" ] && break; sleep 0.1; done
SEAT=$(cat "$WORK/seat.url")
# The LiteLLM proxy after its restart: it names the deployment that answered in its x-litellm-* headers.
"$FAKE" --model chat --api-key-env LITELLM_MASTER_KEY --litellm-api-base "$SEAT/v1" --litellm-model-id chat-gpu8 \
  --lifetime 120 --url-file "$WORK/gw.url" >/dev/null &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/gw.url" ] && break; sleep 0.1; done
GW=$(cat "$WORK/gw.url")
stage "gateway swap on a load-balanced alias: without --deployment it lists the replicas and refuses (exit 2)" \
  bash -c '"$0" gateway swap --config "$1" --alias chat --backend-model hosted_vllm/org/Qwen3-8B-NVFP4A16 --api-base "$2/v1"; test $? -eq 2' "$BIN" "$WORK/litellm.yaml" "$SEAT"
stage "swap replica 2 (by its model_info.id) to the NVFP4A16 seat with the seat's own key: the probe sends NVFP4_SEAT_KEY's key, the swap writes api_key: os.environ/NVFP4_SEAT_KEY (never the key), then the backup, the diff and the next steps" \
  "$BIN" gateway swap --config "$WORK/litellm.yaml" --alias chat --deployment chat-gpu8 --text-only \
  --backend-model hosted_vllm/org/Qwen3-8B-NVFP4A16 --api-base "$SEAT/v1" --api-key-env NVFP4_SEAT_KEY
stage "the swapped replica names the key it was probed with" \
  bash -c 'grep -n "os.environ/NVFP4_SEAT_KEY" "$0" && ! grep -q demo-nvfp4-seat-key "$0"' "$WORK/litellm.yaml"
stage "gateway check: the probe through the gateway for the alias, as its clients see it (key: general_settings.master_key); LiteLLM's x-litellm-model-api-base / -model-id headers must name a deployment the file has; replica 1, which this gateway never routes to, answered no check, so the alias is NOT PROVEN (exit 1 expected)" \
  bash -c '"$0" gateway check --config "$1" --alias chat --url "$2" --text-only; test $? -eq 1' "$BIN" "$WORK/litellm.yaml" "$GW"
stage "gateway add: a new alias 'char-rp-fast' on the same seat, probed first (key and extra_body as written), backup, diff" \
  "$BIN" gateway add --config "$WORK/litellm.yaml" --alias char-rp-fast --backend-model hosted_vllm/org/Qwen3-8B-NVFP4A16 \
  --api-base "$SEAT/v1" --api-key-env NVFP4_SEAT_KEY --model-info id=char-rp-fast-1 --text-only \
  --param 'extra_body={chat_template_kwargs: {enable_thinking: false}}' --checks models,prose,logprobs,long
stage "probe context and kv on the seat: a code hidden at a random depth of a long prompt (seeded), and the served KV pool (vllm:cache_config_info, 2048 blocks x 16) against the expected 32768 tokens" \
  "$BIN" probe "$SEAT" --model org/Qwen3-8B-NVFP4A16 --api-key-env NVFP4_SEAT_KEY --checks context,kv --seed 7 \
  --expect-kv-tokens 32768
stage "the same seat with another KV pool than expected (a re-pulled image, another flag): kv fails (exit 1)" \
  bash -c '"$0" probe "$1" --model org/Qwen3-8B-NVFP4A16 --api-key-env NVFP4_SEAT_KEY --checks kv --expect-kv-tokens 40000; test $? -eq 1' "$BIN" "$SEAT"
echo
echo "demo finished: all stages passed"
