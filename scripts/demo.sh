#!/usr/bin/env bash
# Sets up, builds, and runs `qmoe demo` on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
./build/qmoe demo "$@"
