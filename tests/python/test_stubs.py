"""python/qmoe/_qmoe.pyi is what nanobind's stubgen writes for the built module."""
import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT


def test_stubs_match_the_built_module(tmp_path):
    if importlib.util.find_spec("nanobind") is None:
        pytest.skip("nanobind is not installed (scripts/python-setup.sh installs it)")
    out = tmp_path / "_qmoe.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "qmoe._qmoe", "-o", str(out)],
                   check=True)
    committed = ROOT / "python" / "qmoe" / "_qmoe.pyi"
    assert out.read_text() == committed.read_text(), (
        f"regenerate with: {sys.executable} -m nanobind.stubgen -m qmoe._qmoe -o {committed}"
    )
