#!/usr/bin/env bash
# Configures and builds qmoe into ./build (Release, warnings as errors). Extra arguments go to
# CMake's configure step, e.g. scripts/build.sh -DQMOE_CUDA=OFF. QMOE_TARGETS (space-separated)
# builds only those targets instead of everything. ccache is used when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B build "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release -DQMOE_WERROR=ON \
  "$@"
targets=()
for t in ${QMOE_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build --parallel "$(nproc)" "${targets[@]}"
