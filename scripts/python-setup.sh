#!/usr/bin/env bash
# Builds the Python package qmoe (`pip install .`) into the virtual environment .venv (made on
# first use; VENV=DIR picks another, e.g. one made with --system-site-packages to use a torch
# installed there). Extra arguments go to pip, e.g. -C cmake.define.QMOE_CUDA=OFF for the CPU
# backends only. The build dependencies pinned in pyproject.toml are installed into the venv and
# the package is built without isolation, so that rebuilds are incremental (build/python/) and
# stubgen can run from the venv. Set PIP_NO_INDEX=1 and PIP_FIND_LINKS=DIR to install from
# wheels in DIR only (machines without a package registry).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py=$venv/bin/python
build_requires=$("$py" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
# shellcheck disable=SC2086
"$py" -m pip install -q $build_requires numpy pytest
# QMOE_CUDA is always given, AUTO unless the arguments set it: the build directory is reused, and a
# value cached by an earlier CPU-only build (scripts/python-test.sh) would otherwise stay.
cuda=(-C cmake.define.QMOE_CUDA=AUTO)
case " $* " in *cmake.define.QMOE_CUDA=*) cuda=() ;; esac
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
    -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$py" -m pip install -q --no-build-isolation --no-deps "${cuda[@]}" "${launcher[@]}" "$@" .
echo "python: qmoe installed in $venv ($("$py" -c 'import qmoe; print("CUDA backends" if qmoe.cuda_built else "CPU backends")'))"
