"""The distribution installs `kernels/` and `spark/` as `colmz.kernels` and `colmz.spark`."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True, cwd=out,
    )
    (whl,) = out.glob("colmz-*.whl")
    return whl


def test_wheel_maps_the_top_level_folders_into_the_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "colmz/kernels/consolidate.py" in names
    assert "colmz/spark/cli/__init__.py" in names and "colmz/spark/cli/sink.py" in names
    assert "colmz/py.typed" in names
    assert "colmz/sql/parse.py" in names  # colmz.sql is a package
    assert "colmz/continual/model.py" in names and "colmz/sql/lift.py" in names
    assert not any(n.startswith(("kernels/", "spark/")) for n in names)


def test_installed_wheel_imports_all_three_packages(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
    )
    code = (
        "import colmz, colmz.kernels, colmz.spark, colmz.kernels.merge;"
        "print(colmz.__file__); print(colmz.kernels.__file__); print(colmz.spark.__file__)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    files = out.stdout.split()
    assert len(files) == 3
    assert all(f.startswith(str(target)) for f in files), files


def test_test_modules_have_unique_names():
    """pytest imports test modules by basename (no __init__.py in tests/): two files of one
    name in different folders stop the whole run at collection ("import file mismatch")."""
    from collections import Counter
    from pathlib import Path

    names = Counter(p.name for p in (Path(__file__).parent).rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
