#!/usr/bin/env bash
# Builds the host-code test suites with AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off)
# in build-sanitize/ and runs them: the cpu backend for every SIMD variant this CPU has, and the
# reference path, checkpoint parsing (untrusted input), oracle and shard planner. Any report fails
# the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Warnings are not errors here: instrumentation changes inlining, and GCC 12 then reports
# false -Wmaybe-uninitialized in the standard library (std::regex); the main build keeps -Werror.
cmake -S . -B build-sanitize "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQMOE_CUDA=OFF \
  -DQMOE_WERROR=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
suites=(backend_cpu_tests core_tests quant_tests reference_path_tests emulation_tests format_tests
  oracle_tests dist_tests public_api_tests soak_tests)
cmake --build build-sanitize --target "${suites[@]}" --parallel "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
# The randomized property and soak tests run at a twentieth of their count (instrumented code is
# ~10x slower); the main suite runs them in full.
export QMOE_TEST_SCALE="${QMOE_TEST_SCALE:-0.05}"
for suite in "${suites[@]}"; do
  binary=$(find build-sanitize/tests -type f -name "$suite" | head -1)
  echo "== $suite (ASan + UBSan)"
  (cd "$(dirname "$binary")" && "./$suite" --gtest_brief=1)
done
