"""``colmz.kernels.pool``: the scratch pool and fresh result arrays populated ahead."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from colmz.kernels import pool


def test_scratch_slots_grow_and_are_reused():
    pool.release()
    a = pool.scratch("test_a", 100, np.int64)
    b = pool.scratch("test_a", 50, np.uint64)
    assert a.shape == (100,) and b.shape == (50,) and b.dtype == np.uint64
    assert np.shares_memory(a, b)  # the smaller request reuses the slot
    assert not np.shares_memory(a, pool.scratch("test_b", 100, np.int64))
    assert pool.scratch_bytes() >= 200 * 8
    pool.release()
    assert pool.scratch_bytes() == 0


def test_small_result_arrays_are_plain(monkeypatch):
    monkeypatch.setattr(pool, "_high_water", 0)
    arrays, helper = pool.result_arrays(1000, (np.uint64, np.int64))
    assert helper is None
    assert [a.dtype for a in arrays] == [np.uint64, np.int64] and all(len(a) == 1000 for a in arrays)


def _thread_minflt() -> int:
    # Minor faults of the calling thread (field 10 of /proc/thread-self/stat).
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise populate is Linux")
def test_result_arrays_beyond_the_high_water_mark_are_populated(monkeypatch):
    monkeypatch.setattr(pool, "FRESH_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(pool, "_high_water", 0)
    n = 1 << 19  # 4 MiB per array
    (a, b), helper = pool.result_arrays(n, (np.uint64, np.int64))
    assert isinstance(helper, threading.Thread)
    # Writing while the helper populates is safe: populating never changes mapped pages.
    a[:] = np.arange(n, dtype=np.uint64)
    helper.join()
    b[:] = -1
    np.testing.assert_array_equal(a, np.arange(n, dtype=np.uint64))
    assert (b == -1).all()
    # Within the mark (the same total again) the arrays are plain.
    again, helper2 = pool.result_arrays(n, (np.uint64, np.int64))
    assert helper2 is None
    # Beyond it, populated: after the join this thread writes them with (almost) no faults.
    (c,), helper3 = pool.result_arrays(3 * n, (np.uint64,))
    assert helper3 is not None
    helper3.join()
    before = _thread_minflt()
    c[:] = 7
    faults = _thread_minflt() - before
    pages = c.nbytes // 4096
    if faults > pages // 4:
        pytest.skip(f"MADV_POPULATE_WRITE not supported here ({faults} faults for {pages} pages)")
    assert faults < pages // 4
