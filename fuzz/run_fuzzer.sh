#!/usr/bin/env bash
# Builds the safetensors libFuzzer target with clang++ (-fsanitize=fuzzer,address,undefined) and
# runs it for a bounded time, seeded with the fixture files. Used by CTest (tests/format) whatever
# compiler the main build uses; exits 77 (CTest: skipped) when clang++ or its fuzzer runtime is
# missing.
#   fuzz/run_fuzzer.sh BUILD_DIR [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: run_fuzzer.sh BUILD_DIR [SECONDS]}/fuzz"
seconds="${2:-25}"
clangxx="${CLANGXX:-$(command -v clang++ || true)}"
if [ -z "$clangxx" ]; then
  echo "skipped: clang++ not found (Debian: clang, libclang-rt-dev)"
  exit 77
fi
mkdir -p "$out/corpus"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src")
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$clangxx" -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "skipped: $clangxx cannot link -fsanitize=fuzzer (Debian: libclang-rt-dev)"
  exit 77
fi
sources=("$root/fuzz/safetensors_fuzzer.cpp" "$root/src/format/safetensors.cpp"
         "$root/src/core/dtype.cpp")
if [ ! -x "$out/safetensors_fuzzer" ] || [ -n "$(find "${sources[@]}" "$root/src/format/safetensors.hpp" -newer "$out/safetensors_fuzzer")" ]; then
  "$clangxx" "${flags[@]}" "${sources[@]}" -lfmt -o "$out/safetensors_fuzzer"
fi
find "$root/tests/data" -name '*.safetensors' -exec cp {} "$out/corpus/" \;
"$out/safetensors_fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 "$out/corpus"
