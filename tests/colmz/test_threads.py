"""Process-wide thread pools (``colmz.threads``): one pool per name and size, kept between
calls, made again in a forked child; reads start no threads after the first."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pyarrow as pa
import pytest

import colmz
from colmz.threads import shared_pool


def test_one_pool_per_name_and_size():
    a = shared_pool("test-a", 2)
    assert shared_pool("test-a", 2) is a and shared_pool("test-a", 3) is not a
    assert shared_pool("test-b", 2) is not a
    assert [f.result() for f in [a.submit(pow, 2, i) for i in range(5)]] == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        shared_pool("test-a", 0)


def _child(q) -> None:
    # the parent's pool has no threads here: a new one must serve
    q.put(shared_pool("test-fork", 1).submit(sum, [1, 2, 3]).result(timeout=30))


def test_a_forked_child_gets_pools_of_its_own():
    shared_pool("test-fork", 1).submit(int).result()  # the parent's pool has a thread
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and q.get(timeout=5) == 6


def test_merged_reads_start_no_threads_after_the_first(tmp_path, monkeypatch):
    # Work counter: threads started during the second read of an arrangement of several
    # runs (the part readers and merge threads are the shared pools' from the first).
    import colmz.arrangement.read as read_mod

    monkeypatch.setattr(read_mod, "PARALLEL_ROWS", 4)
    arr = colmz.Arrangement.open(str(tmp_path / "a"), {"k": pa.int64()}, fan_in=16)
    for t in range(4):
        keys = np.random.default_rng(t).integers(0, 1 << 40, 500)
        arr.write(colmz.Updates({"k": keys}, time=[t] * 500, diff=[1] * 500))
        arr.seal(t + 1)
        if t < 3:
            arr.maintain()
    first = arr.read(3)
    started = []
    original = threading.Thread.start

    def counted(self):
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counted)
    assert arr.read(3) == first and len(first) == 2000
    assert started == []


def test_shutdown_stops_the_threads_and_pools_come_back():
    from colmz.threads import shutdown

    pool = shared_pool("test-shutdown", 2)
    assert [f.result() for f in [pool.submit(abs, -i) for i in range(4)]] == [0, 1, 2, 3]
    names = {t.name for t in threading.enumerate()}
    assert any(n.startswith("colmz-test-shutdown") for n in names)
    shutdown()
    assert not any(t.name.startswith("colmz-") for t in threading.enumerate())
    again = shared_pool("test-shutdown", 2)
    assert again is not pool and again.submit(abs, -5).result() == 5
