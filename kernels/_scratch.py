"""Reusable scratch buffers for kernel temporaries.

On the virtual machines colmz is measured on, memory returned to the system goes back to the
host, and the first touch of a fresh page costs far more than a memory copy (0.4 GB/s measured
for a fresh 80 MB array against 7 GB/s when the pages are reused). A sort that allocates three
temporaries of the input's size on every call loses to that. Temporaries are therefore taken
from a per-thread pool that grows to the largest size seen and is kept; results handed to the
caller are always fresh arrays and never alias scratch space.

:func:`release` drops the pool (``colmz.release_scratch``), e.g. after a one-off huge job.

Results cannot come from the pool, so a large call still touches fresh memory for them (and
a first call in a process for everything). :func:`populate_async` has a helper thread fault
such arrays in while the caller computes (Linux ``madvise(MADV_POPULATE_WRITE)``, which maps
the pages without writing them, so it is safe beside a kernel already filling them); the
faults are then paid on the other core instead of inside the kernel's loops.
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

__all__ = ["populate_async", "release", "scratch", "scratch_bytes"]

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


_MADV_POPULATE_WRITE = 23
_PAGE = 4096
_madvise = None
if sys.platform.startswith("linux"):
    try:
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _madvise.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - no libc symbol
        _madvise = None


def _populate(arrays) -> None:
    for a in arrays:
        start = -(-a.ctypes.data // _PAGE) * _PAGE
        end = (a.ctypes.data + a.nbytes) // _PAGE * _PAGE
        if end > start and _madvise(start, end - start, _MADV_POPULATE_WRITE) != 0:
            return  # not supported (kernel before 5.14): the kernels fault the pages instead


def populate_async(*arrays: np.ndarray) -> threading.Thread | None:
    """Start faulting in the pages of freshly allocated ``arrays`` on a helper thread.

    Returns the thread (join it before the arrays may be freed) or ``None`` where the system
    offers no way (not Linux). The arrays' contents are not changed.

    >>> a = np.empty(1 << 20, np.uint8)
    >>> t = populate_async(a)
    >>> t is None or t.join() is None
    True
    """
    if _madvise is None:
        return None
    t = threading.Thread(target=_populate, args=(arrays,), daemon=True)
    t.start()
    return t
