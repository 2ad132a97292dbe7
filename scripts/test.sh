#!/usr/bin/env bash
# Sets up, builds, checks formatting and runs the whole test suite (CTest prints its summary),
# then builds a project against the installed CMake package and tests the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
# Everything, whatever an earlier scripts/demo.sh configured (it leaves out tests and, on a
# machine without a GPU, the CUDA backends).
scripts/build.sh -DQMOE_CUDA=AUTO -DQMOE_BUILD_TESTS=ON
scripts/check-format.sh
status=0
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 1200 || status=$?
# Skipped tests (the GPU ones on a machine without a GPU) say why; show each distinct reason.
log=build/Testing/Temporary/LastTest.log
if grep -q '^\[  SKIPPED \]' "$log" 2>/dev/null; then
  echo "Skipped tests, by reason:"
  grep -A1 ': Skipped$' "$log" | grep -v -e ': Skipped$' -e '^--$' | sort | uniq -c
fi
scripts/test-consumer.sh || status=$?
scripts/python-test.sh || status=$?
exit $status
