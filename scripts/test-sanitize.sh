#!/usr/bin/env bash
# Builds the cpu backend's tests with AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off) in
# build-sanitize/ and runs them for every SIMD variant this CPU has. Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Warnings are not errors here: instrumentation changes inlining, and GCC 12 then reports
# false -Wmaybe-uninitialized in the standard library (std::regex); the main build keeps -Werror.
cmake -S . -B build-sanitize "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQMOE_CUDA=OFF \
  -DQMOE_WERROR=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
cmake --build build-sanitize --target backend_cpu_tests --parallel "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
build-sanitize/tests/backend_cpu/backend_cpu_tests
