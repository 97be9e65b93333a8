"""All Numba plumbing for colmz kernels lives here (numbagg style).

Kernels elsewhere are plain Python functions decorated with :func:`jit`. This module decides
how they compile:

* ``cache=True`` always: compile cost is paid once per machine (or per Spark worker image), not
  once per process. The cache lands in ``NUMBA_CACHE_DIR`` when that is set -- set it to a
  writable, node-local directory on Spark executors (numba/numba#7883) -- and otherwise next
  to the modules in ``__pycache__``. :func:`colmz.set_cache_dir` sets it for you, but only
  before the first kernel is compiled, because Numba reads the variable once.
* Never ``parallel=True``: Spark already runs one Python worker per core, and cached parallel
  kernels segfault when the thread count changes (lmcinnes/pynndescent#175).
* ``nogil=True`` so a thread pool (Dask, notebook helpers) can run kernels side by side.
* ``boundscheck`` follows ``COLMZ_BOUNDSCHECK=1`` for debugging sessions.

Set ``NUMBA_DISABLE_JIT=1`` to run every kernel as the Python function it is written as; the
tests use this mode to check the kernels' own Python against their references as well.
"""

from __future__ import annotations

import os

import numba

__all__ = ["jit", "JIT_OPTIONS", "DISPATCHERS"]

JIT_OPTIONS: dict[str, object] = {
    "cache": True,
    "nogil": True,
    "boundscheck": os.environ.get("COLMZ_BOUNDSCHECK", "") == "1",
}


#: Every dispatcher made by :func:`jit`, so :func:`colmz.set_cache_dir` can re-point their caches
#: (Numba fixes a function's cache directory when the function is decorated).
DISPATCHERS: list = []


def jit(fn):
    """Compile ``fn`` in nopython mode with colmz's options (cached, GIL released)."""
    dispatcher = numba.njit(**JIT_OPTIONS)(fn)
    DISPATCHERS.append(dispatcher)
    return dispatcher
