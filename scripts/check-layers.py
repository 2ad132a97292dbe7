#!/usr/bin/env python3
"""Checks that no #include points to a folder above its own (docs/architecture.md, "Layers").

Each folder of src/ has a layer; a file may include its own folder, the public API and folders of
lower layers only. Backends may include the backend contract, the shared CUDA pieces and
themselves, never each other. The programs on top (tools/, bench/, python/, fuzz/) may include
anything in src/ but not each other. Exits 1 listing every offending include."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Lowest first. A folder may include folders of a strictly lower layer (and itself).
LAYERS = [
    ["core"],
    ["quant", "act", "route", "device", "config", "sample", "cuda"],
    ["format"],
    ["oracle"],
    ["backend"],
    ["moe", "dist"],
    ["measure"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
PROGRAMS = ["tools", "bench", "python", "fuzz"]
SHARED_BACKEND_PARTS = {"backend.hpp", "cuda_common"}
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh|in)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def area_of(path):
    """('src', folder) / ('include', 'qmoe') / ('program', name) for a repository path."""
    parts = path.relative_to(ROOT).parts
    if parts[0] == "src":
        return ("src", parts[1])
    if parts[0] == "include":
        return ("include", "qmoe")
    return ("program", parts[0])


def target_of(include, including_file):
    if include.startswith("qmoe/"):
        return ("include", "qmoe")
    if (ROOT / "src" / include).exists():
        return ("src", include.split("/")[0])
    if (including_file.parent / include).exists():
        return area_of(including_file.parent / include)
    return None


def backend_rule(path, include):
    """A backend folder includes only the contract, the shared CUDA pieces and itself."""
    parts = path.relative_to(ROOT / "src" / "backend").parts
    if len(parts) < 2 or not include.startswith("backend/"):
        return None
    own, used = parts[0], include.split("/")[1]
    if used in SHARED_BACKEND_PARTS or used == own:
        return None
    return f"backend '{own}' includes backend '{used}'"


def problem(path, include):
    source, target = area_of(path), target_of(include, path)
    if target is None:
        return f"'{include}' not found"
    if source == target:
        return backend_rule(path, include) if source == ("src", "backend") else None
    if source[0] == "include":
        return "the public API includes a private header"
    if target[0] == "program":
        return f"includes from {target[1]}/, a program"
    if target[0] == "include" or source[0] == "program":
        return None
    if source[1] not in RANK or target[1] not in RANK:
        unknown = source[1] if source[1] not in RANK else target[1]
        return f"src/{unknown} has no layer in scripts/check-layers.py"
    if RANK[target[1]] >= RANK[source[1]]:
        return f"src/{source[1]} (layer {RANK[source[1]]}) includes src/{target[1]} " \
               f"(layer {RANK[target[1]]})"
    return None


def main():
    files = [p for top in ["src", "include", *PROGRAMS] for p in sorted((ROOT / top).rglob("*"))
             if p.is_file() and SOURCE.search(p.name)]
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if match and (why := problem(path, match.group(1))):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(1)}: {why}")
    for line in found:
        print(line)
    print(f"check-layers: {len(files)} files, {len(found)} includes against the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
