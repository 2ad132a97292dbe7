#!/usr/bin/env bash
# Builds one libFuzzer target with clang++ (-fsanitize=fuzzer,address,undefined) and runs it for a
# bounded time, starting from the kept corpus (fuzz/corpus/TARGET, replayed first) and the matching
# fixture files. Used by CTest (tests/format) whatever compiler the main build uses; exits 77
# (CTest: skipped) when clang++ or its fuzzer runtime is missing.
#   fuzz/run_fuzzer.sh BUILD_DIR [SECONDS] [TARGET] [-- LIBFUZZER_ARGS...]
# TARGET: safetensors (default), config (config.json) or index (model.safetensors.index.json).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: run_fuzzer.sh BUILD_DIR [SECONDS] [TARGET]}/fuzz"
seconds="${2:-25}"
target="${3:-safetensors}"
shift $(($# < 3 ? $# : 3))
[ "${1:-}" = "--" ] && shift
clangxx="${CLANGXX:-$(command -v clang++ || true)}"
if [ -z "$clangxx" ]; then
  echo "skipped: clang++ not found (Debian: clang, libclang-rt-dev)"
  exit 77
fi
extra_flags=()
libs=(-lfmt)
case "$target" in
  safetensors)
    sources=(src/format/safetensors.cpp src/format/tensor_part.cpp src/format/tensor_read.cpp
             src/core/dtype.cpp)
    seeds='*.safetensors' ;;
  config)
    # The config parser reaches every format's rules through the registry, and so their adapters.
    sources=(src/format/model_config.cpp src/format/json_fields.cpp src/format/module_pattern.cpp
             src/format/registry.cpp src/format/adapter.cpp src/format/gptq.cpp src/format/awq.cpp
             src/format/compressed_tensors.cpp src/format/gpt_oss_mxfp4.cpp src/format/quark.cpp
             src/format/gptq_zero_overflow.cpp src/format/expert_names.cpp src/format/packing.cpp
             src/format/tensor_part.cpp src/format/tensor_read.cpp src/format/tensor_store.cpp
             src/format/projection.cpp src/format/safetensors.cpp
             src/format/safetensors_writer.cpp src/format/mapped_file.cpp
             src/format/regular_file.cpp src/config/moe_config.cpp src/quant/scheme.cpp
             src/quant/quantized_weight.cpp src/core/dtype.cpp src/core/tensor.cpp
             src/core/host_memory.cpp)
    # Module patterns are matched with RE2 where it is installed, as the CMake build does.
    if pkg-config --exists re2 2>/dev/null; then
      read -ra re2_cflags <<<"$(pkg-config --cflags re2)"
      read -ra re2_libs <<<"$(pkg-config --libs re2)"
      extra_flags=(-DQMOE_WITH_RE2 "${re2_cflags[@]}")
      libs+=("${re2_libs[@]}")
    fi
    seeds='config.json' ;;
  index)
    sources=(src/format/tensor_store.cpp src/format/tensor_part.cpp src/format/tensor_read.cpp
             src/format/safetensors.cpp src/format/mapped_file.cpp src/format/regular_file.cpp
             src/core/dtype.cpp)
    seeds='*.index.json' ;;
  *) echo "unknown fuzz target '$target' (valid: safetensors, config, index)" >&2; exit 2 ;;
esac
corpus="$out/corpus-$target"
mkdir -p "$corpus"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src" "${extra_flags[@]}")
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$clangxx" -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "skipped: $clangxx cannot link -fsanitize=fuzzer (Debian: libclang-rt-dev)"
  exit 77
fi
binary="$out/${target}_fuzzer"
inputs=("$root/fuzz/${target}_fuzzer.cpp")
for s in "${sources[@]}"; do inputs+=("$root/$s"); done
build=("$clangxx" "${flags[@]}" "${inputs[@]}" "${libs[@]}" -o "$binary")
# Rebuilt when a source is newer or the command differs (RE2 installed or removed since).
if [ ! -x "$binary" ] || [ "$(cat "$binary.cmd" 2>/dev/null)" != "${build[*]}" ] ||
    [ -n "$(find "${inputs[@]}" "$root/src/format" "$root/include" -newer "$binary" -name '*.[hc]pp')" ]; then
  "${build[@]}"
  echo "${build[*]}" >"$binary.cmd"
fi
n=0
while IFS= read -r f; do
  cp "$f" "$corpus/seed-$n"
  n=$((n + 1))
done < <(find "$root/tests/data" -name "$seeds" | sort)
# New inputs go to the first corpus directory only; the kept one is read. libFuzzer's default exit
# code for a finding is 77, which CTest would read as "skipped".
kept=()
[ -d "$root/fuzz/corpus/$target" ] && kept=("$root/fuzz/corpus/$target")
"$binary" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$out/" -print_final_stats=1 "$@" \
  "$corpus" "${kept[@]}"
