"""Reusable scratch buffers for kernel temporaries.

On the virtual machines colmz is measured on, memory returned to the system goes back to the
host, and the first touch of a fresh page costs far more than a memory copy (0.4 GB/s measured
for a fresh 80 MB array against 7 GB/s when the pages are reused). A sort that allocates three
temporaries of the input's size on every call loses to that. Temporaries are therefore taken
from a per-thread pool that grows to the largest size seen and is kept; results handed to the
caller are always fresh arrays and never alias scratch space.

:func:`release` drops the pool (``colmz.release_scratch``), e.g. after a one-off huge job.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["release", "scratch", "scratch_bytes"]

_local = threading.local()


def _pool() -> dict:
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = {}
    return pool


def scratch(slot: str, n: int, dtype) -> np.ndarray:
    """A length-``n`` array of ``dtype`` from the pool slot ``slot`` (contents undefined).

    Two live temporaries must use two slot names.
    """
    dtype = np.dtype(dtype)
    pool = _pool()
    buf = pool.get(slot)
    need = n * dtype.itemsize
    if buf is None or buf.nbytes < need:
        # Grow by a quarter more than asked so a slowly growing workload settles quickly.
        buf = np.empty(max(need + need // 4, 64), np.uint8)
        pool[slot] = buf
    return buf[:need].view(dtype)


def scratch_bytes() -> int:
    """Bytes held by this thread's scratch pool."""
    return sum(b.nbytes for b in _pool().values())


def release() -> None:
    """Drop this thread's scratch pool."""
    _pool().clear()
