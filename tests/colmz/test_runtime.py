"""``colmz.runtime``: warm-up (with progress), the kernel cache directory, scratch release,
and loading cached kernels without Numba's registry refresh."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import colmz
from colmz import runtime
from colmz.kernels import pool


def test_warmup_returns_seconds_and_reports_progress():
    calls = []
    seconds = colmz.warmup(progress=lambda done, total, label: calls.append((done, total, label)))
    assert seconds >= 0.0
    total = calls[0][1]
    assert total == len(calls) - 1 > 0
    assert [d for d, _, _ in calls] == list(range(total + 1))  # counts up by one to total
    assert all(t == total for _, t, _ in calls)
    assert {label for _, _, label in calls} >= {"consolidate", "Correction", "Spine"}


def test_warmup_verbose_prints_one_line(capsys):
    colmz.warmup(verbose=True)
    out = capsys.readouterr().out
    assert out.startswith("colmz kernels ready in ") and out.count("\n") == 1


def test_warmup_rejects_a_progress_that_is_not_callable():
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        colmz.warmup(progress=3)


def test_warmup_progress_that_raises_aborts():
    def stop(done, total, label):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        colmz.warmup(progress=stop)


def test_public_names_are_the_runtime_ones():
    assert colmz.warmup is runtime.warmup
    assert colmz.set_cache_dir is runtime.set_cache_dir
    assert colmz.release_scratch is runtime.release_scratch


def test_set_cache_dir_rejects_non_paths():
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int"):
        colmz.set_cache_dir(3)


def test_release_scratch_empties_the_pool():
    pool.scratch("test_runtime", 1000, np.uint64)
    assert pool.scratch_bytes() > 0
    colmz.release_scratch()
    assert pool.scratch_bytes() == 0


def test_set_cache_dir_in_a_fresh_process(tmp_path):
    code = (
        "import os, colmz, numpy as np\n"
        f"colmz.set_cache_dir({str(tmp_path / 'nc')!r})\n"
        "assert os.environ['NUMBA_CACHE_DIR'].endswith('nc')\n"
        # three rows: a batch of two is consolidated without a kernel (colmz.ops)
        "u = colmz.Updates({'s': ['b', 'a', 'c']}, time=[1, 0, 2], diff=[1, 1, 1])\n"
        "assert colmz.consolidate(u).to_pylist() == [('a', 0, 1), ('b', 1, 1), ('c', 2, 1)]\n"
        "from colmz.kernels.split import lower_bound\n"
        "lower_bound(np.arange(3, dtype=np.uint64), np.uint64(1))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)
    cached = [p.name for p in (tmp_path / "nc").rglob("*") if p.is_file()]
    # kernels decorated at `import colmz` (before the call) and imported after it
    for stem in ("encode.encode_bytes", "consolidate._small_sort_consolidate", "split.lower_bound"):
        assert any(n.startswith(stem) and n.endswith(".nbi") for n in cached), (stem, cached)


def test_a_fresh_process_loads_cached_kernels_without_refreshing(tmp_path):
    """With the cache warm, a fresh process's first consolidate loads its kernels without
    Numba's target-context refresh (which imports Numba's whole NumPy support) and gives the
    right answer; a real compile afterwards still works."""
    # The session's kernel cache when there is one (the test command warms it up first): the
    # first process then compiles only what it lacks instead of everything from cold, and the
    # second is a fresh process with a warm cache either way.
    cache = os.environ.get("NUMBA_CACHE_DIR") or str(tmp_path / "nc")
    code = (
        "import sys, numpy as np, colmz\n"
        "from numba.core.registry import cpu_target\n"
        "rng = np.random.default_rng(0)\n"
        "n = 5000\n"
        "k = rng.integers(-40, 40, n)\n"
        "t = rng.integers(0, 9, n).astype(np.uint64)\n"
        "u = colmz.Updates({'k': k}, t, np.ones(n, np.int64))\n"
        "out = colmz.consolidate(u, order='data')\n"
        "exp = sorted(__import__('collections').Counter(zip(k.tolist(), t.tolist())).items())\n"
        "assert out.to_pylist() == [(a, b, c) for (a, b), c in exp], 'wrong result'\n"
        "print('refreshed' if 'numba.np.linalg' in sys.modules else 'light')\n"
        "import numba\n"
        "f = numba.njit(lambda a: np.cumsum(a).sum())\n"
        "assert f(np.ones(4)) == 10.0\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip() == "light"


def test_warmup_rejects_bad_jobs():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="jobs must be a positive int"):
            colmz.warmup(jobs=bad)


def test_cold_warmup_with_a_helper_process_fills_the_cache(tmp_path):
    # A cold warm-up with jobs=2 compiles the largest step in a helper process; afterwards the
    # cache holds every kernel: a fresh process's warm-up compiles nothing (no cache misses).
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run(
        [sys.executable, "-c", "import colmz, colmz.runtime as r; assert r._cold(); colmz.warmup(jobs=2); "
         "assert not r._cold()"],
        env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    second = subprocess.run(
        [sys.executable, "-c", "import colmz; from colmz.kernels.decorators import DISPATCHERS; colmz.warmup(jobs=1); "
         "print(sum(sum(d.stats.cache_misses.values()) for d in DISPATCHERS), "
         "sum(sum(d.stats.cache_hits.values()) for d in DISPATCHERS))"],
        env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    misses, hits = map(int, second.stdout.split())
    assert misses == 0 and hits > 0


def test_every_entry_point_shares_one_kernel_cache(tmp_path):
    """Without NUMBA_CACHE_DIR, `python -c 'import colmz'`, the `colmz` command and Spark's
    worker environment all use one directory (colmz's default under XDG_CACHE_HOME), and a
    kernel compiled by one process is a cache hit in the next -- no `__pycache__` beside the
    kernels, no per-command temporary cache."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    code = (
        "import os, colmz\n"
        "from colmz.kernels.split import lower_bound\n"
        "from colmz.spark.session import default_cache_dir, executor_env\n"
        "import numpy as np\n"
        "lower_bound(np.arange(3, dtype=np.uint64), np.uint64(1))\n"
        "print(os.environ['NUMBA_CACHE_DIR'])\n"
        "print(default_cache_dir())\n"
        "print(executor_env()['NUMBA_CACHE_DIR'])\n"
        "print(sum(lower_bound.stats.cache_hits.values()))\n"
    )
    run = lambda: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,  # noqa: E731
                                 text=True, timeout=300)
    first, second = run(), run()
    assert first.returncode == 0, first.stderr[-3000:]
    assert second.returncode == 0, second.stderr[-3000:]
    want = str(tmp_path / "xdg" / "colmz" / "numba")
    env_dir, spark_dir, worker_dir, _ = first.stdout.split()
    assert env_dir == spark_dir == worker_dir == want
    assert any(p.name.startswith("split.lower_bound") for p in (tmp_path / "xdg").rglob("*.nbi"))
    assert int(second.stdout.split()[-1]) >= 1  # the second process loaded it: one cache
