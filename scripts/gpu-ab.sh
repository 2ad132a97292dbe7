#!/usr/bin/env bash
# A/B of the MoE benchmark across source trees in ONE device run (machines differ by ~5% from
# run to run, as much as the changes being judged): builds moe_bench in each tree given (e.g.
# exports of two commits) and runs it with the same arguments, one after the other, on the same
# GPU. OUTDIR gets <tree name>.txt per tree and ab.txt with the cuda-mma rows side by side.
# Usage: scripts/gpu-ab.sh OUTDIR TREE [TREE ...]   (env: BENCH_ARGS, default the decode rows)
set -uo pipefail
out=${1:?usage: scripts/gpu-ab.sh OUTDIR TREE [TREE ...]}
shift
[ $# -gt 0 ] || { echo "gpu-ab: name at least one source tree"; exit 1; }
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
args=${BENCH_ARGS:---m 1,8,32,128 --backend cuda-mma --budget-ms 60}
names=()
for tree in "$@"; do
  name=$(basename "$tree")
  names+=("$name")
  (
    cd "$tree" || exit 1
    . "$here/scripts/lib/gpu-build.sh"
    { "$cmake" "${configure_args[@]}" && "$cmake" --build "$build" --parallel "$nproc" \
      --target moe_bench; } >"$out/$name.build.log" 2>&1 || { echo "gpu-ab: $name did not build"; exit 1; }
    # shellcheck disable=SC2086  # args is a list of options
    "$build/moe_bench" $args >"$out/$name.txt" 2>&1
  ) || echo "gpu-ab: $name failed (see $out/$name.*)"
done
# Side by side: shape, M, then each tree's median us for the non-baseline rows.
{
  printf '| shape | M |'
  printf ' %s us |' "${names[@]}"
  printf '\n| --- | --- |'
  printf ' --- |%.0s' "${names[@]}"
  printf '\n'
  paste -d'|' $(for n in "${names[@]}"; do
    f="$out/$n.txt"
    grep -E '^\| [a-z0-9-]+ \| [0-9]+ \| ' "$f" | grep -v cublas-bf16 |
      awk -F'|' '{gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $5); print $2 " " $3 " " $5}' >"$f.cols"
    echo "$f.cols"
  done) | awk -F'|' '{split($1, a, " "); line = "| " a[1] " | " a[2] " |";
    for (i = 1; i <= NF; i++) { split($i, b, " "); line = line " " b[3] " |" } print line}'
} >"$out/ab.txt"
rm -f "$out"/*.cols
cat "$out/ab.txt"
