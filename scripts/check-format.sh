#!/usr/bin/env bash
# Fails when any tracked C++/CUDA file differs from what .clang-format would produce.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
[ ${#files[@]} -eq 0 ] || clang-format --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files clean"
