#!/usr/bin/env bash
# One-call GPU check for a machine like the lent H200 (nvcc, CMake and ninja present, GoogleTest
# sources, no package registry): configure and build with CUDA on (sm_90a only, all cores), run
# the GPU tests, a reduced GPU test set under compute-sanitizer memcheck and racecheck, then the
# MoE benchmark (and, with two GPUs, dist_bench). Everything lands in OUTDIR as at most 8 files
# (what the device tool brings back):
#   env.txt build.log ctest.log memcheck.log racecheck.log bench.txt bench.jsonl summary.json
# Usage: scripts/gpu-check.sh OUTDIR   (env: BENCH_ARGS, DIST_ARGS, DEADLINE_S (default 560), CUDA_ARCH,
#   SANITIZE=0 to skip the compute-sanitizer steps (SANITIZE=wgmma: only cuda-wgmma's; =mma: all
#   but cuda-wgmma's), CTEST_REGEX
#   to run only matching GPU tests)
# It never runs scripts/setup.sh: there is no package registry to install from there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out"
start=$(date +%s)
deadline=${DEADLINE_S:-560}
steps=()

left() { echo $((deadline - ($(date +%s) - start))); }
# upto N: N seconds, or what is left before the deadline (minus 10 s for the steps after) if less.
upto() {
  local rest=$(($(left) - 10))
  echo $((rest < $1 ? rest : $1))
}
# step NAME LOG SECONDS CMD...: runs CMD with a time limit, appends its output to LOG, records rc.
step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local t0 rc
  t0=$(date +%s)
  echo "== $name: $*" >>"$log"
  if [ "$limit" -le 5 ]; then
    echo "skipped: no time left" >>"$log"
    rc=124
  else
    timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
    rc=$?
  fi
  steps+=("{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $(($(date +%s) - t0))}")
  echo "$name: rc $rc ($(($(date +%s) - t0)) s)"
  return $rc
}

. scripts/lib/gpu-build.sh
{
  date -u
  nvidia-smi || true
  /usr/local/cuda/bin/nvcc --version || nvcc --version || true
  echo "cmake: ${cmake:-none} $(${cmake:-false} --version | head -1)"
  echo "ninja: ${ninja:-none}"
  echo "googletest sources: $(ls -d /usr/src/googletest /usr/src/gtest 2>/dev/null | tr '\n' ' ')"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  echo "cores: $nproc"
  git log -1 --format='commit %H %s' 2>/dev/null || true
} >"$out/env.txt" 2>&1

finish() {
  local joined
  joined=$(IFS=,; echo "${steps[*]}")
  printf '{"seconds": %d, "steps": [%s]}\n' $(($(date +%s) - start)) "$joined" >"$out/summary.json"
  cat "$out/summary.json"
}
trap finish EXIT

if [ -z "${cmake:-}" ] || [ -z "${ninja:-}" ]; then
  echo "gpu-check: need CMake >= 3.25 and ninja (see $out/env.txt)" | tee -a "$out/env.txt"
  exit 1
fi

step configure "$out/build.log" "$(upto 120)" "$cmake" "${configure_args[@]}" || exit 1
# Only what runs here: the benchmark, the qmoe tool, the CLI tests (for qmoe bench on the GPU) and
# every test executable of a CUDA area.
targets=(moe_bench dist_bench qmoe_cli cli_tests $("$ninja" -C "$build" -t targets all 2>/dev/null |
  sed -n 's/^\([A-Za-z0-9_]*cuda[A-Za-z0-9_]*\): phony$/\1/p' | grep -v '^cmake_' | sort -u))
# The build leaves 200 s for the steps after it, but never gets less than 120 s (or what is
# left): with a short DEADLINE_S it was skipped outright, and so was everything after it.
build_limit=$(($(left) - 200))
[ "$build_limit" -ge 120 ] || build_limit=$(upto 120)
step build "$out/build.log" "$build_limit" "$cmake" --build "$build" --parallel "$nproc" \
  --target "${targets[@]}" || exit 1

step ctest "$out/ctest.log" "$(upto 150)" ctest --test-dir "$build" -L cuda --output-on-failure \
  --parallel 4 --timeout 120 ${CTEST_REGEX:+-R "$CTEST_REGEX"}
# The user's first command on a GPU machine: the demo picks the GPU and the oracle's backend there.
step demo "$out/ctest.log" "$(upto 60)" "$build/qmoe" demo
# The README's walk-through on a GPU machine: verify runs every backend of the machine (cpu and
# cuda-mma) against the float64 reference; qmoe bench times cuda-mma per M on the GPU.
step verify "$out/ctest.log" "$(upto 60)" sh -c \
  "'$build/qmoe' sample '$build/qmoe-sample' --force && '$build/qmoe' verify '$build/qmoe-sample'"
step qmoe-bench "$out/ctest.log" "$(upto 60)" "$build/qmoe" bench --device cuda \
  --shape 2048,768,128,8 --m 1,8,32,128 --quiet
# The same on the tool's JSON: ceilings, cublas-bf16 rows, floor and speed-up recomputed per row.
step qmoe-bench-test "$out/ctest.log" "$(upto 90)" "$build/tests/cli/cli_tests" \
  --gtest_filter='Bench.OnAGpu*'
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# Small cases that still cross every kernel's block and warp boundaries (instrumented runs are
# 10-100x slower).
reduced='CudaAlign.TheDocumentedExample:CudaAlign.EmptyExpertsAndAllOnOne:CudaAlign.IdsOutside*'
reduced+=':CudaRouting.AllLogitsEqual*:CudaRouting.StridedLogits:CudaRouting.GroupedTopK'
reduced+=':CudaActivation.ManyRows*'
reduced+=':CudaCombine.RowsInSortedOrder*:CudaGraphCapture.*'
# cuda-mma: every tile size (8 to 64 rows staged, act-order through the general loop), shared
# activations at 32, 48 and 64 rows, a K split at 64 rows, the staged loop's unchecked trips (long
# K), int4 and int8, zero points, the fused gated and per-warp epilogues, two streams at once,
# two strips per warp (back to back at 8-row tiles, side by side at shared tiles, and there the
# loops for tiles whose last fragments are empty), the last round split along K across CTAs, and
# MXFP4 (e2m1 codes) on the 8-, 16- and pair-tile paths, and GEMM1's fused decode alignment.
mma='Schemes/CudaMmaMatchesReference.WithinDtypeBound/int4_g128_m1_e8_top2'
for name in int4_g128_m36_e8_top2_tile16 int4_g128_m128_e8_top2_tile48 \
  int4_g128_asym_m1_e4_top4_long_k \
  int4_channelwise_m256_e8_top2_tile32_shared int4_channelwise_m144_e8_top2_tile48_shared \
  int4_g32_m256_e8_top2_tile32_shared_long_k int4_g32_m144_e8_top2_tile48_shared_long_k \
  int8_g64_asym_m256_e8_top2_f16_tile32 int8_g64_m144_e8_top2_tile48 int4_g32_asym_m7_e256_top8 int4_act_order_g32_m7_e8_top2 \
  int8_act_order_g128_m1000_e8_top2_tile64 int4_channelwise_swigluoai_uninterleave_i36_bias \
  int4_g32_asym_silu_bias_h64_warp_epilogue int4_channelwise_bias_m80_h72_i48_warp_epilogue_tile32 \
  int4_channelwise_relu2_on_input_bias_m2048_h64_i40_warp_epilogue_tile64 \
  int4_g32_m320_e8_top2_tile64_shared_long_k int4_g64_m200_e2_top1_tile64_k_split \
  int8_g64_asym_m520_e8_top2_f16_tile64 mxfp4_m7_e128_top4_swigluoai_bias_f16 \
  mxfp4_m48_e8_top2_uninterleave mxfp4_m144_e8_top2_pairs; do
  mma+=":Schemes/CudaMmaMatchesReference.WithinDtypeBound/$name"
done
mma+=':CudaMma.ConcurrentForwardsOnTwoStreams:CudaMma.BackToBack*:*/StripRuns.*:*/TailSplit.*'
mma+=':StripRuns.PairTilesWithEveryCountOfLiveFragments:FusedAlignment.*'
# cuda-wgmma: int4 and int8, zero points (two group chunks, the last partial), bias, f16, experts
# without rows, N not whole tiles, whole tiles plus a remainder tile, act-order (rows gathered
# through the channel order), MXFP4 re-coded as e4m3 (bf16 and f16).
wgmma='Matrix/CudaWgmmaMatchesReference.WithinDtypeBound/int4_g64_m300_e8_top2_n_not_whole_tiles'
for name in int4_g128_asym_m7_e256_top8 int8_g64_asym_m300_e60_top6_bias \
  int4_g64_asym_m600_e2_top1_groups_33_36 int4_g64_swigluoai_bias_m64_e8_top2 \
  int4_g64_actorder_asym_swigluoai_bias_m64_e8_top2 mxfp4_swigluoai_m7_e128_top4 \
  mxfp4_swigluoai_bias_m300_e8_top2_n_not_whole_tiles_f16; do
  wgmma+=":Matrix/CudaWgmmaMatchesReference.WithinDtypeBound/$name"
done
for tool in $([ "${SANITIZE:-1}" = 0 ] || echo memcheck racecheck); do
  [ "${SANITIZE:-1}" = mma ] ||
    step "$tool-wgmma" "$out/$tool.log" "$(upto 100)" "$sanitizer" --tool "$tool" \
      --error-exitcode 3 "$build/tests/cuda_wgmma/cuda_wgmma_tests" --gtest_filter="$wgmma"
  [ "${SANITIZE:-1}" = wgmma ] && continue
  step "$tool" "$out/$tool.log" "$(upto 60)" "$sanitizer" --tool "$tool" --error-exitcode 3 \
    "$build/tests/cuda/cuda_kernels_test" --gtest_filter="$reduced"
  step "$tool-mma" "$out/$tool.log" "$(upto 200)" "$sanitizer" --tool "$tool" --error-exitcode 3 \
    "$build/tests/cuda_mma/cuda_mma_tests" --gtest_filter="$mma"
done
# The layer over NCCL ranks, one GPU each, against one GPU (needs two GPUs; DIST_ARGS adds options).
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  # shellcheck disable=SC2086  # DIST_ARGS is a list of options
  step dist-bench "$out/bench.txt" "$(upto 240)" env NCCL_NVLS_ENABLE=0 \
    "$build/dist_bench" ${DIST_ARGS:-}
fi
# shellcheck disable=SC2086  # BENCH_ARGS is a list of options
step bench "$out/bench.txt" $(($(left) - 10)) "$build/moe_bench" --json "$out/bench.jsonl" \
  ${BENCH_ARGS:-}
