#!/usr/bin/env bash
# Builds the Python package into .venv (CPU backends: the test machines have no GPU, and the CUDA
# backends are built and tested by the C++ suite) and runs its tests. Tests that need torch or a
# GPU skip with the reason when those are missing; scripts/gpu-python.sh runs them on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python-setup.sh -C cmake.define.QMOE_CUDA=OFF
.venv/bin/python -m pytest -q -rs tests/python
