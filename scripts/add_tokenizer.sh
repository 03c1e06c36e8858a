#!/usr/bin/env bash
# Copies the fixtures' tokenizer (tests/data/tokenizer/: written by transformers' save_pretrained, see
# scripts/make_tokenizer.py) into each checkpoint folder given, as a release ships its tokenizer beside the
# weights. save_pretrained of a model writes none; make_fixtures.py / make_fp8_fixtures.py call this after
# writing a folder, and it was run once over every folder under tests/data that has a config.json.
#   scripts/add_tokenizer.sh tests/data/llama [more folders...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tok="$here/tests/data/tokenizer"
for d in "$@"; do
  [ -f "$d/config.json" ] || { echo "add_tokenizer: $d has no config.json" >&2; exit 3; }
  cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$tok/chat_template.jinja" "$d/"
done
