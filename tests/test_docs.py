"""Every fenced shell and Python block of README.md and docs/*.md runs as written.

Design
------
A documented command that nobody runs rots silently. This test walks the Markdown files,
takes every block whose info string is ``bash``, ``sh``, ``python`` or ``sql`` and runs each
file's blocks *in order, verbatim, in one fresh directory* -- as a reader following the page
would, with nothing but the README's setup:

* shell blocks run with ``bash -euo pipefail`` (the first failing line fails the test), with
  ``colmz`` on ``PATH`` and ``.venv`` in that directory linked to the interpreter's
  environment, so ``.venv/bin/colmz`` means what the README means by it;
* Python blocks run with ``exec`` in one namespace per file, so a page's later blocks see
  what its earlier ones defined;
* SQL blocks are scripts for colmz's catalog: they run with ``colmz.Catalog().execute`` in
  one in-memory catalog per file, so a page's later SQL sees the tables its earlier SQL made.

A block defines what it uses: there is no hidden input a test supplies (a page whose block
needs a DataFrame or a file shows the lines that make it).

HTML comments directly before a block (invisible on the rendered page) say what a block needs:

``<!-- docs-test: spark -->``
    it needs Spark (a JVM), or follows a block that does: it runs with the file's other
    ``spark`` blocks in a test marked ``spark`` (a few JVM starts, about a minute per file);
    the rest run in the quick test.
``<!-- docs-test: skip -- REASON -->``
    not run here, for the reason given (a synopsis with placeholders, a fragment over the
    reader's own data, an install); a skip without a reason fails.
``<!-- docs-test: instead: COMMAND -->``
    runs COMMAND in place of the block: only for ``bash scripts/main``/``scripts/test``, which
    install into ``.venv`` (their job, ``colmz sink``, is what runs; the fresh-process test
    of it is tests/spark/test_cli.py::test_the_main_job_in_a_fresh_process).

Blocks with another info string (output, layouts) are text and are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"bash": "shell", "sh": "shell", "python": "python", "sql": "sql"}
MARK = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    kind: str  # "shell", "python" or "sql"
    text: str
    spark: bool = False
    skip: str | None = None
    instead: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The runnable blocks of ``path`` with their markers, in order."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        kind = RUN.get(m.group(1))
        if kind is not None:
            b = Block(path, i + 1, kind, "\n".join(lines[i + 1 : end]) + "\n")
            k = i - 1
            while k >= 0 and MARK.match(lines[k]):
                _apply(b, MARK.match(lines[k]).group(1))
                k -= 1
            out.append(b)
        i = end + 1
    return out


def _apply(b: Block, directive: str) -> None:
    if directive == "spark":
        b.spark = True
    elif directive.startswith("skip"):
        reason = directive[len("skip"):].lstrip(" -")
        assert reason, f"{b.where}: a skipped block must say why (docs-test: skip -- REASON)"
        b.skip = reason
    elif directive.startswith("instead:"):
        b.instead = directive[len("instead:"):].strip()
    else:
        raise AssertionError(f"{b.where}: unknown docs-test directive {directive!r}")


ALL = [b for p in DOCS for b in blocks(p)]


def _env(workdir: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))
    return env


def _fresh_dir(tmp_path: Path) -> Path:
    work = tmp_path / "reader"
    work.mkdir()
    # The README runs .venv/bin/colmz from the clone: the same environment as this test.
    (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return work


def run_sequence(seq: list[Block], work: Path, monkeypatch) -> None:
    """Run ``seq`` in order in ``work``; a failure names the block and its output."""
    namespace: dict = {"__name__": "__docs__"}
    env = _env(work)
    monkeypatch.chdir(work)
    for var in ("NUMBA_CACHE_DIR",):
        monkeypatch.setenv(var, env[var])
    catalog = None
    for b in seq:
        if b.kind == "sql":
            import colmz

            catalog = catalog if catalog is not None else colmz.Catalog()
            catalog.execute(b.text)
            continue
        if b.kind == "python":
            exec(compile(b.text, b.where, "exec"), namespace)
            continue
        script = b.instead if b.instead is not None else b.text
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (f"{b.where} failed (status {r.returncode}):\n{script}\n"
                                   f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")
    # What following the page leaves in a clone is ignored by git (view.parquet, events/, ...).
    made = [p.name + ("/" if p.is_dir() else "") for p in work.iterdir() if p.name != ".venv"]
    if made and shutil.which("git") and (ROOT / ".git").exists():
        r = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *made],
                           capture_output=True, text=True)
        ignored = set(r.stdout.split())
        assert set(made) <= ignored, f"not in .gitignore: {sorted(set(made) - ignored)}"


def _sequences(spark: bool) -> list:
    params = []
    for p in DOCS:
        seq = [b for b in blocks(p) if b.skip is None and b.spark == spark]
        if seq:
            marks = [pytest.mark.spark] if spark else []
            params.append(pytest.param(seq, id=str(p.relative_to(ROOT)), marks=marks))
    return params


def test_the_dev_extra_installs_what_the_tests_use():
    import tomllib

    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    names = {re.split(r"[<>=\[ ]", d, maxsplit=1)[0] for d in dev}
    assert {"nbclient", "nbformat", "nbconvert", "pytest", "pyspark", "duckdb"} <= names


def test_every_block_is_run_or_says_why_not():
    assert ALL, "no fenced blocks found"
    for b in ALL:
        assert b.skip or b.text.strip(), f"{b.where}: empty block"
        assert b.instead is None or b.spark, f"{b.where}: instead: is for the Spark sequence"
    # the walk sees what it must: the README's quick example and its streaming sequence
    readme = [b for b in ALL if b.path.name == "README.md"]
    assert any("colmz.consolidate(u)" in b.text and not b.spark and not b.skip for b in readme)
    assert any("--example-events events/" in b.text and b.spark for b in readme)
    # ... and SQL blocks, which run too
    assert any(b.kind == "sql" and "CREATE CONTINUAL TASK" in b.text for b in ALL)


def test_no_block_takes_a_hidden_input():
    """Each block runs with what the page shows: the `given:` directive (a line of Python a
    test ran before a block, invisible to the reader) is gone, and an unknown directive
    fails the walk."""
    for p in DOCS:
        assert "docs-test: given" not in p.read_text(), p
    with pytest.raises(AssertionError, match="unknown docs-test directive"):
        _apply(Block(DOCS[0], 1, "python", "x = 1\n"), "given: x = 2")


@pytest.mark.parametrize("seq", _sequences(spark=False))
def test_docs_blocks_run(seq, tmp_path, monkeypatch):
    run_sequence(seq, _fresh_dir(tmp_path), monkeypatch)


@pytest.mark.parametrize("seq", _sequences(spark=True))
def test_docs_spark_blocks_run(seq, tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    run_sequence(seq, _fresh_dir(tmp_path), monkeypatch)


@pytest.mark.slow
def test_asv_first_use_as_the_readme_says(tmp_path):
    """``asv run`` on a machine asv has not described stops (at a console it asks questions);
    the README's ``asv machine --yes`` first makes it go on. Checked with ``asv check`` (the
    discovery ``asv run`` starts with) so no benchmark runs; HOME is a fresh directory."""
    asv = Path(sys.executable).parent / "asv"
    if not asv.exists():
        pytest.skip("asv is not installed (the dev extra installs it)")
    env = {**_env(tmp_path), "HOME": str(tmp_path)}

    def run(*args):
        return subprocess.run([str(asv), *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=600)

    first = run("run", "--python=same", "--quick", "--bench", "^$")
    assert first.returncode != 0 and "asv machine --yes" in first.stdout + first.stderr
    assert run("machine", "--yes").returncode == 0
    checked = run("check", "--python=same")
    assert checked.returncode == 0 and "No problems found" in checked.stdout + checked.stderr
