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
build/consumer/app tests/data/awq-int4-g32-bias
# The README's ```cmake block must be the consumer's CMake lines, word for word: the package alone
# (no C++ standard or other setting of the consumer's own) is enough to build against it.
readme_cmake=$(awk '/^```cmake$/{f=1;next} /^```$/{if(f)exit} f' README.md)
if [ -z "$readme_cmake" ] ||
  ! diff <(echo "$readme_cmake") <(grep -xF -f <(echo "$readme_cmake") examples/cpp/CMakeLists.txt); then
  echo "README.md's CMake lines are not those of examples/cpp/CMakeLists.txt (diff above)" >&2
  exit 1
fi
# The README's ```cpp block (the first one) must be examples/cpp/run_layer.cpp.
if ! diff <(awk '/^```cpp$/{f=1;next} /^```$/{if(f)exit} f' README.md) examples/cpp/run_layer.cpp; then
  echo "README.md's C++ example differs from examples/cpp/run_layer.cpp (diff above)" >&2
  exit 1
fi
echo "consumer: built and ran examples/cpp against the installed package"
