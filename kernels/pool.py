"""Reusable scratch buffers for kernel temporaries.

On the virtual machines colmz is measured on, memory returned to the system goes back to the
host, and the first touch of a fresh page costs far more than a memory copy (0.4 GB/s measured
for a fresh 80 MB array against 7 GB/s when the pages are reused). A sort that allocates three
temporaries of the input's size on every call loses to that. Temporaries are therefore taken
from a per-thread pool that grows to the largest size seen and is kept; results handed to the
caller are always fresh arrays and never alias scratch space.

:func:`release` drops the pool (``colmz.release_scratch``), e.g. after a one-off huge job.

Fresh result memory. Results cannot come from the pool, and a process's first large call has
no pool yet either. Memory a process has never used comes from the system, and on these
virtual machines that is the slow case: the host backs it on first touch. Measured for 240 MB
taken after the system had been idle a few seconds (so its free memory was handed back to the
host): 0.25-0.32 s as transparent huge pages (numpy asks for them on large arrays), 0.14 s
as 4 KiB pages touched by a loop, 0.11 s as 4 KiB pages populated by one
``madvise(MADV_POPULATE_WRITE)``. Memory the process freed a moment ago is the fast case
for huge pages (0.03 s for the same 240 MB; 4 KiB pages stay at about 0.11 s).

:func:`result_arrays` therefore treats memory beyond the most this process has asked it for
(a high-water mark) as fresh from the system: those arrays get 4 KiB pages (``MADV_NOHUGEPAGE``)
populated by a helper thread while the caller does other work -- loading its kernels in a
fresh process, measuring key ranges. ``MADV_POPULATE_WRITE`` maps zeroed pages where none are
mapped and leaves mapped pages alone, so it is safe beside a kernel already writing the
arrays. Within the mark, arrays are plain ``np.empty``: huge pages the process recycles.
Measured on the first consolidate of 1e7 updates in fresh processes (six each, the Rust
anchor run between them): 0.44 s median against 0.65 s with huge pages, 0.46 s populating on
the calling thread.
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

__all__ = ["FRESH_MIN_BYTES", "release", "result_arrays", "scratch", "scratch_bytes"]

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


#: Arrays smaller than this are never populated ahead: their faults cost little, and glibc
#: may carve them from its heap, where a page-size advice would outlive the array.
FRESH_MIN_BYTES = 32 << 20

_MADV_NOHUGEPAGE = 15
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

# Bytes of the largest set of result arrays requested so far in this process.
_high_water = 0
_high_water_lock = threading.Lock()


def _page_range(a: np.ndarray) -> tuple[int, int]:
    # The whole pages inside ``a``'s buffer: (start address, length).
    start = -(-a.ctypes.data // _PAGE) * _PAGE
    end = (a.ctypes.data + a.nbytes) // _PAGE * _PAGE
    return start, max(end - start, 0)


def _populate(arrays) -> None:
    # Runs on the helper thread; ctypes releases the GIL around each call.
    for a in arrays:
        start, size = _page_range(a)
        if size and _madvise(start, size, _MADV_POPULATE_WRITE) != 0:
            return  # not supported (Linux before 5.14): the kernels fault the pages instead


def _above_high_water(total: int) -> bool:
    global _high_water
    with _high_water_lock:
        if total <= _high_water:
            return False
        _high_water = total
        return True


def result_arrays(n: int, dtypes) -> tuple[list[np.ndarray], threading.Thread | None]:
    """New arrays of ``n`` entries, one per dtype (contents undefined), for a kernel's results.

    Returns ``(arrays, helper)``. When the arrays are large and take the process beyond the
    most memory it has asked this function for, their pages are populated on ``helper``, a
    thread holding references to them (see the module docstring); otherwise ``helper`` is
    ``None``. Join the helper before resizing the arrays; dropping them is safe at any time.

    >>> (a, b), helper = result_arrays(4, (np.uint64, np.int64))
    >>> a.shape, b.dtype, helper is None
    ((4,), dtype('int64'), True)
    """
    arrays = [np.empty(n, dt) for dt in dtypes]
    if _madvise is None or any(a.nbytes < FRESH_MIN_BYTES for a in arrays):
        return arrays, None
    if not _above_high_water(sum(a.nbytes for a in arrays)):
        return arrays, None
    for a in arrays:
        start, size = _page_range(a)
        if size:
            _madvise(start, size, _MADV_NOHUGEPAGE)
    helper = threading.Thread(target=_populate, args=(tuple(arrays),), daemon=True,
                              name="colmz-populate")
    helper.start()
    return arrays, helper
