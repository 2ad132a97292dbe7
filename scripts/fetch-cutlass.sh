#!/usr/bin/env bash
# Puts CUTLASS's headers (the cuda-wgmma backend builds on its Hopper mixed-input grouped GEMM)
# into .deps/cutlass-<version>/: include/ (cute, cutlass) and util/include/. They come from PyPI's
# nvidia-cutlass wheel, pinned by version and checked by sha256. A wheel already in .whl/ is used
# first (machines without a package registry). Does nothing when the headers are there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.2.0.0
sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
wheel_name=nvidia_cutlass-${version}-py3-none-any.whl
dest=.deps/cutlass-${version}
[ -f "$dest/include/cutlass/cutlass.h" ] && exit 0

mkdir -p .deps
wheel=.whl/$wheel_name
if [ ! -f "$wheel" ]; then
  wheel=.deps/$wheel_name
  [ -f "$wheel" ] || python3 -m pip download -q --no-deps --only-binary=:all: \
    -d .deps "nvidia-cutlass==${version}"
fi
echo "$sha256  $wheel" | sha256sum -c --quiet
rm -rf "$dest.tmp"
python3 - "$wheel" "$dest.tmp" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefixes = {"cutlass_library/source/include/": "include/",
            "cutlass_library/source/tools/util/include/": "util/include/",
            "nvidia_cutlass-4.2.0.0.dist-info/licenses/LICENSE.txt": "LICENSE.txt"}
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        for src, dst in prefixes.items():
            if name.startswith(src) and not name.endswith("/"):
                target = f"{out}/{dst}{name[len(src):]}"
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(name) as f, open(target, "wb") as g:
                    g.write(f.read())
PY
mv "$dest.tmp" "$dest"
echo "fetch-cutlass: CUTLASS ${version} headers in $dest"
