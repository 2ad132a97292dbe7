#!/usr/bin/env bash
# Sets up, builds what the demo needs on this machine, and runs `qmoe demo` on its embedded
# default. Only the `qmoe` tool is built, and the CUDA backends only where a GPU is present, so
# that a fresh 2-core machine shows its result in minutes; scripts/test.sh builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then cuda=AUTO; fi
QMOE_TARGETS=qmoe_cli scripts/build.sh -DQMOE_CUDA="$cuda" -DQMOE_BUILD_TESTS=OFF
./build/qmoe demo "$@"
