#!/usr/bin/env bash
# Installs the qmoe build in ./build into build/install, then builds and runs the out-of-tree
# consumer examples/cpp against that installed package (find_package(qmoe)), as another project
# would. Also checks that the README's C++ example is that program, word for word.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --install build --prefix build/install >/dev/null
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S examples/cpp -B build/consumer "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer
build/consumer/run_layer tests/data/awq-int4-g32-bias
# The README's ```cpp block (the first one) must be examples/cpp/run_layer.cpp.
if ! diff <(awk '/^```cpp$/{f=1;next} /^```$/{if(f)exit} f' README.md) examples/cpp/run_layer.cpp; then
  echo "README.md's C++ example differs from examples/cpp/run_layer.cpp (diff above)" >&2
  exit 1
fi
echo "consumer: built and ran examples/cpp against the installed package"
