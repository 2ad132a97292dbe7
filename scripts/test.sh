#!/usr/bin/env bash
# Sets up, builds, checks formatting and runs the whole test suite (CTest prints its summary).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/check-format.sh
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 1200
