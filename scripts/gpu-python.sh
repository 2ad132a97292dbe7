#!/usr/bin/env bash
# On a GPU machine with PyTorch (like the lent H200: torch in python3, CMake and ninja beside it,
# fmt/nlohmann-json installed, no package registry): builds the Python package with the CUDA
# backends (sm_90a unless CUDA_ARCH says otherwise) into a venv that sees the packages of the
# machine's python3 (torch there lives in a venv itself, so a .pth file adds its site-packages
# behind the new venv's own), then runs the Python tests (torch CUDA ones included), the examples and the overhead benchmark.
#
#   scripts/gpu-python.sh OUTDIR
#
# The pinned build dependencies come from .whl/ when present (pip download them there first:
# nanobind and scikit-build-core at the versions of pyproject.toml); otherwise the machine's own.
# OUTDIR gets: env.txt build.log pytest.log examples.log overhead.txt overhead.json summary.txt
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-python.sh OUTDIR}
mkdir -p "$out"
# shellcheck source=scripts/lib/gpu-build.sh
source scripts/lib/gpu-build.sh
export PATH="$(dirname "$cmake"):$(dirname "$ninja"):$PATH"
venv=${VENV:-/tmp/qmoe-venv}
python3 -m venv --system-site-packages "$venv"
py=$venv/bin/python
python3 -c 'import site; print("\n".join(site.getsitepackages()))' \
  >"$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine-python.pth"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$py" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  cmake --version | head -1
  git log -1 --format='commit %H %cd' 2>/dev/null
  date -u
} >"$out/env.txt" 2>&1

step() {  # name, command...: runs it, records its exit code and time in summary.txt
  local name=$1 start=$SECONDS
  shift
  "$@"
  local rc=$?
  echo "$name rc=$rc $((SECONDS - start))s" >>"$out/summary.txt"
  return $rc
}

install_pinned() {
  if ls .whl/nanobind-*.whl .whl/scikit_build_core-*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps .whl/nanobind-*.whl .whl/scikit_build_core-*.whl
  fi
  "$py" -c 'import nanobind, scikit_build_core; print("nanobind", nanobind.__version__, "scikit-build-core", scikit_build_core.__version__)'
}

build() {
  CMAKE_BUILD_PARALLEL_LEVEL=$nproc "$py" -m pip install -v --no-index --no-deps \
    --no-build-isolation -C build-dir=build-gpu-python \
    -C cmake.define.QMOE_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a-real}" \
    -C cmake.define.CMAKE_POLICY_VERSION_MINIMUM=3.5 .
}

: >"$out/summary.txt"
step install_pinned install_pinned >>"$out/env.txt" 2>&1
step build build >"$out/build.log" 2>&1 || { cat "$out/summary.txt"; exit 1; }
step pytest "$py" -m pytest -v -rs tests/python >"$out/pytest.log" 2>&1
{
  step example_compare "$py" examples/python/compare_with_pytorch.py --device cuda:0
  step example_compare_cpu "$py" examples/python/compare_with_pytorch.py --device cpu
  step example_block "$py" examples/python/moe_block.py
} >"$out/examples.log" 2>&1
step overhead "$py" bench/python/overhead.py --json "$out/overhead.json" >"$out/overhead.txt" 2>&1
cat "$out/summary.txt"
tail -3 "$out/pytest.log"
cat "$out/overhead.txt"
