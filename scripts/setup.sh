#!/usr/bin/env bash
# Installs the Debian packages qmoe builds against, only those that are missing.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  nlohmann-json3-dev libcli11-dev libfmt-dev libre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  clang clang-format libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
