#!/usr/bin/env bash
# Installs the Debian 12 packages fp4forge needs to build and test, only when missing.
# Runs `apt-get update` once before the first install. Safe to run repeatedly.
set -euo pipefail
PKGS=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev libhwy-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcurl4-openssl-dev libyaml-cpp-dev
      libxxhash-dev libre2-dev
      librsvg2-bin)  # tests only: rsvg-convert renders the --svg pictures (tests/e2e/util_svg_render_test.cc)
if [[ "${FP4FORGE_WITH_FUZZ:-0}" == "1" ]]; then PKGS+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then echo "install-deps: all packages present"; exit 0; fi
SUDO=""; if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
