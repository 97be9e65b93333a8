"""Process-wide thread pools, kept between calls.

Reads and writes of an arrangement hand work to threads: part reads side by side
(``colmz.arrangement.read.read_runs``), the two halves of each merge step, the gathers of a
write's row groups, the parts of a large write encoded side by side
(``colmz.arrangement.part_writer.PartWriter``), half the buckets of a large sort
(``colmz.first_column.sort_keys``). A pool made for each call starts its threads in that call, and
``Thread.start`` returns only once the new thread has run -- which, while other threads
decode Parquet and gather columns, means waiting for the GIL: a merged read of 14 runs
(up to 8 part readers, 2 merge threads) would spend a noticeable share of its time starting
threads.
:func:`shared_pool` instead keeps one pool per name and size for the life of the process.

Rules for callers, which keep shared pools free of deadlock and leaks:

* a task never waits on another task of the same pool (no nested submissions);
* a caller that stops early cancels what it submitted and has not started (pending tasks of
  one caller never hold up another's, but they would run for nothing).

After ``fork`` the child has none of the parent's threads: the pools are forgotten in the
child (``os.register_at_fork``) and made again on first use.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["shared_pool", "shutdown"]

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` of ``workers`` threads (made on first use; threads start
    as work arrives and then stay).

    >>> shared_pool("doc", 2) is shared_pool("doc", 2)
    True
    >>> shared_pool("doc", 2).submit(sum, [1, 2]).result()
    3
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers!r}")
    key = (name, workers)
    pool = _pools.get(key)
    if pool is None:
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = ThreadPoolExecutor(workers, thread_name_prefix=f"colmz-{name}")
    return pool


def shutdown() -> None:
    """Stop every pool's threads (after the work they hold) and forget the pools; the next
    :func:`shared_pool` call makes a new one. Call it while no colmz call runs (a read then
    in progress could not submit its next task). For a process about to fork children -- the
    Spark worker daemon after loading the kernels (``colmz.spark.daemon.preload``): a thread
    running at the fork may hold a lock the child then never sees released.

    >>> pool = shared_pool("doc-shutdown", 1)
    >>> shutdown()
    >>> shared_pool("doc-shutdown", 1) is pool
    False
    """
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=True)


def _forget_in_child() -> None:
    # The child of a fork has no threads but the forking one: the pools' queues and worker
    # records describe threads that do not exist there.
    global _lock
    _pools.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
