#!/usr/bin/env bash
# Nsight Compute profile of the cuda-mma expert GEMMs on a machine like the lent H200: builds
# moe_bench, then per case (shape:M) profiles the first two launches of KERNELS (by default the
# expert GEMM: GEMM1, GEMM2) with the full section set and writes their details page and
# per-instruction source counters;
# then one forward's kernels with only their durations, to split its time. Clocks are left alone.
# Usage: scripts/gpu-profile.sh OUTDIR [shape:M ...]   (env: KERNELS, a regex of the kernels to
#   profile in full, default the expert GEMM; e.g. KERNELS=align_one_block for the alignment;
#   SCHEME, moe_bench's --scheme, default int4-g128)
#   default cases: mixtral-8x7b:1 deepseek-v3:1 qwen3-30b-a3b:1 deepseek-v3:128
# OUTDIR gets: build.log, <case>.details.txt, <case>.source.csv, forward.txt, sass.txt.gz
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-profile.sh OUTDIR [shape:M ...]}
shift
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(mixtral-8x7b:1 deepseek-v3:1 qwen3-30b-a3b:1 deepseek-v3:128)
mkdir -p "$out"
. scripts/lib/gpu-build.sh
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null |
  head -1)
[ -n "$ncu" ] || { echo "gpu-profile: no ncu on this machine"; exit 1; }

{ "$cmake" "${configure_args[@]}" && "$cmake" --build "$build" --parallel "$nproc" \
  --target moe_bench; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bench=("$build/moe_bench" --backend cuda-mma --budget-ms 5 --check-tokens 4
  --scheme "${SCHEME:-int4-g128}")
cuobjdump -sass "$build/moe_bench" | gzip >"$out/sass.txt.gz"

for c in "${cases[@]}"; do
  shape=${c%%:*} m=${c##*:} name=${c//:/-m}
  "$ncu" --clock-control none --set full -k regex:"${KERNELS:-expert_gemm}" --launch-count 2 \
    -o "$out/$name" -f "${bench[@]}" --shapes "$shape" --m "$m" >"$out/$name.log" 2>&1
  "$ncu" --import "$out/$name.ncu-rep" --page details >"$out/$name.details.txt" 2>&1
  "$ncu" --import "$out/$name.ncu-rep" --page source --print-source sass --csv \
    >"$out/$name.source.csv" 2>&1
  rm -f "$out/$name.ncu-rep"
  grep -E "${KERNELS:-expert_gemm}|Duration|DRAM Throughput|Memory Throughput|Registers|Achieved Occ|Issued Ipc|No Eligible" \
    "$out/$name.details.txt" | head -40
done

# One forward's kernels (after warm-up) with durations only: where the time of a forward goes.
first=${cases[0]}
"$ncu" --clock-control none --section SpeedOfLight --launch-skip 8 --launch-count 8 \
  -k regex:'align|expert_gemm|activation_kernel|combine_kernel' \
  "${bench[@]}" --shapes "${first%%:*}" --m "${first##*:}" >"$out/forward.txt" 2>&1
grep -E "^  [a-z_:<>A-Z0-9]+.*\(|Duration" "$out/forward.txt" | head -40
