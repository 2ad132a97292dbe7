#!/usr/bin/env bash
# The trust tests on a GPU machine like the lent H200 (same setup as gpu-check.sh, never
# scripts/setup.sh): builds cuda_mma_tests and the host soak tests in build-gpu, then runs
# cuda-mma's soak, threads-on-streams, routing-contract (QMOE_CHECK_ROUTING) and oracle/prepare
# property tests, the decode-path regression, and the host soak suite, each under a time limit.
# OUTDIR gets build.log, soak.log and summary.txt.
# Usage: scripts/gpu-soak.sh OUTDIR   (env: QMOE_TEST_SCALE, default 1 = 10^4 GPU forwards;
# CUDA_ARCH as for gpu-check.sh)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/gpu-soak.sh OUTDIR}
mkdir -p "$out"
. scripts/lib/gpu-build.sh
export QMOE_TEST_SCALE="${QMOE_TEST_SCALE:-1}"
status=0
{
  "$cmake" "${configure_args[@]}" &&
    "$cmake" --build "$build" --parallel "$nproc" --target cuda_mma_tests soak_tests
} >"$out/build.log" 2>&1 || { echo "build failed (see build.log)" | tee "$out/summary.txt"; exit 1; }
{
  echo "QMOE_TEST_SCALE=$QMOE_TEST_SCALE"
  timeout 300 "$build/tests/cuda_mma/cuda_mma_tests" \
    --gtest_filter='CudaMmaSoak.*:UpstreamRegression.*:CudaMma.RepeatedForwardsAreBitwiseEqual'
  echo "cuda_mma_tests rc $?"
  timeout 200 "$build/tests/soak/soak_tests"
  echo "soak_tests rc $?"
} >"$out/soak.log" 2>&1
grep -E '^\[  (PASSED|FAILED|SKIPPED) |rc [0-9]+$' "$out/soak.log" | tee "$out/summary.txt"
grep -q 'rc [1-9]' "$out/soak.log" && status=1
exit $status
