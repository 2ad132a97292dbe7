#!/usr/bin/env bash
# Configures and builds qmoe into ./build (Release, warnings as errors). Extra arguments go to
# CMake's configure step, e.g. scripts/build.sh -DQMOE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DQMOE_WERROR=ON "$@"
cmake --build build --parallel "$(nproc)"
