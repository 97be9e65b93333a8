"""Every notebook in ``examples/notebooks`` runs top to bottom without an error.

Each notebook is executed with nbclient in a fresh kernel of this interpreter (a kernelspec
written to a temporary directory, so a ``python3`` kernel installed elsewhere on the machine
is never picked up), with a temporary working directory. The kernel inherits the environment,
so ``NUMBA_CACHE_DIR`` set for the test run serves the notebooks too. The notebooks'
own ``assert`` cells check their results; a failing cell fails the test with the cell's
error. Committed notebooks carry no outputs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "examples" / "notebooks"
SPARK = {"spark_sink.ipynb"}
# Generous per-cell limit: a cold Spark start on a loaded 2-core machine takes a minute.
CELL_TIMEOUT = 600


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def params():
    out = []
    for p in notebooks():
        marks = [pytest.mark.spark] if p.name in SPARK else []
        out.append(pytest.param(p, id=p.stem, marks=marks))
    return out


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kernels")
    spec = d / "colmz-test-python"
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "colmz tests",
        "language": "python",
    }))
    return d


def test_there_are_notebooks():
    names = {p.name for p in notebooks()}
    assert {"correction.ipynb", "spine.ipynb", "as_of.ipynb", "spark_sink.ipynb", "arrangement.ipynb",
            "continual_task.ipynb"} <= names


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code"
    for i, cell in enumerate(code):
        assert cell.outputs == [] and cell.execution_count is None, (
            f"{path.name}: code cell {i} was committed with outputs; strip them"
        )


@pytest.mark.parametrize("path", params())
def test_notebook_runs(path, kernel_dir, tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    nb = nbformat.read(path, as_version=4)
    km = KernelManager(
        kernel_name="colmz-test-python",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]),
    )
    client = nbclient.NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(tmp_path)}},
    )
    start = time.perf_counter()
    try:
        client.execute()  # raises CellExecutionError naming the cell and its traceback
    finally:
        # a client handed a kernel manager leaves the kernel to its owner
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    # every code cell ran, in order
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))
    # the plots were drawn: at least one image output per notebook
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert images, f"{path.name} drew no picture"
    print(f"{path.name}: {elapsed:.1f} s")
    assert list(tmp_path.iterdir()) == [], "a notebook left files in its working directory"


def test_readme_pictures_are_drawn_by_make_figures(tmp_path, monkeypatch):
    """Every picture the README and docs show is one docs/make_figures.py draws, and it draws
    them all (into a temporary directory here, so the committed ones are left alone)."""
    import importlib.util
    import re

    pytest.importorskip("matplotlib")
    pytest.importorskip("duckdb")
    root = NOTEBOOKS.parent.parent
    spec = importlib.util.spec_from_file_location("make_figures", root / "docs" / "make_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "IMG", tmp_path)
    mod.main([])
    drawn = {p.name for p in tmp_path.glob("*.png")}
    shown = set()
    for doc in [root / "README.md", *(root / "docs").glob("*.md")]:
        shown |= set(re.findall(r"docs/img/([\w.-]+\.png)", doc.read_text()))
        shown |= set(re.findall(r"\(img/([\w.-]+\.png)\)", doc.read_text()))
    committed = {p.name for p in (root / "docs" / "img").glob("*.png")}
    assert shown and shown <= drawn
    assert committed == drawn
