"""The kernels' on-disk cache: an entry another process cannot load is a miss, not an error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

KERNEL = textwrap.dedent(
    """
    import numpy as np
    from colmz.kernels.decorators import jit

    TABLE = np.arange(4)


    @jit
    def bump(x):
        if x[0] < 0:
            raise ValueError("negative", x[0])
        return x[0] + TABLE[1]
    """
)


def _run(code: str, cwd, cache) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_entry_written_under_another_module_name_is_recompiled(tmp_path):
    # A test runner imports a kernel file as ``alpha.kern`` (its folder on sys.path); Numba's
    # entry then names that module. A program that loads the same file under another name, with
    # no ``alpha`` importable, must compile afresh instead of failing on the import.
    pkg = tmp_path / "src" / "alpha"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kern.py").write_text(KERNEL)
    cache = tmp_path / "cache"
    first = _run(
        f"import sys, numpy as np; sys.path.insert(0, {str(pkg.parent)!r}); import alpha.kern as k; "
        "print(k.bump(np.ones(2)))",
        cwd=tmp_path, cache=cache,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "2.0"
    assert any(p.suffix == ".nbi" for p in cache.rglob("*")), "the first process wrote no cache entry"

    second = _run(
        "import importlib.util, numpy as np; "
        f"spec = importlib.util.spec_from_file_location('other_name', {str(pkg / 'kern.py')!r}); "
        "k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k); "
        "print(k.bump(np.ones(2)))",
        cwd=tmp_path, cache=cache,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "2.0"
