"""A PySpark worker daemon that loads colmz before it forks its Python workers.

Design
------
Spark starts one *daemon* per executor (``python -m pyspark.daemon``) and asks it for a
Python worker per task slot; the daemon forks one, which then imports PySpark's worker
machinery, pyarrow and pandas for Arrow UDFs, and, when it unpickles a colmz UDF, colmz with
numba and the kernels it loads from the on-disk cache. Each forked worker pays all of that
(about 1.5-3 s on this 2-core machine, the two workers competing for the cores with the JVM).

Pointed at by ``spark.python.daemon.module`` (``colmz.spark.session(quick_start=True)`` sets
it), this module does the imports and loads colmz's kernels (``colmz.warmup``) once, in the
daemon, and then runs PySpark's own daemon loop; every worker forked afterwards starts with
them in memory.

Fork safety: PySpark imports the worker modules after the fork because a library that starts
threads at import would leave a child with locks held by threads that do not exist in it.
Here nothing runs threads before the fork: the daemon sets the BLAS and numba thread counts
to one (a Spark worker uses one core; PySpark already sets ``NUMBA_NUM_THREADS=1`` through
the session), loads the kernels with ``warmup(jobs=1)`` (no helper process, no threads), and
pyarrow creates its thread pools lazily, on first use, and re-creates them in a forked child.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["main", "preload"]

#: Thread-count variables set before numpy is imported (``setdefault``: the user's win).
SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def preload() -> None:
    """Import what every colmz Arrow UDF worker needs and load colmz's kernels.

    >>> preload()  # doctest: +SKIP
    """
    for name in SINGLE_THREADED:
        os.environ.setdefault(name, "1")
    import pyarrow  # noqa: F401
    import pyspark.worker  # noqa: F401 - the worker loop the daemon runs after each fork
    from pyspark.sql.pandas import serializers  # noqa: F401 - Arrow batches in and out (pandas)

    import colmz
    import colmz.spark.arrangement_io  # noqa: F401 - part reads and writes on the executors
    import colmz.spark.sink  # noqa: F401

    # A worker loads kernels on first use anyway: whatever fails here, the daemon must start.
    with contextlib.suppress(Exception):
        colmz.warmup(jobs=1)
    # The warm-up's merged reads started colmz's thread pools; the daemon forks its workers
    # next, with no other thread running (each worker makes its own pools).
    import colmz.threads

    colmz.threads.shutdown()


def main() -> None:
    """Preload, then run PySpark's daemon loop (``pyspark.daemon.manager``)."""
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":  # pragma: no cover - started by Spark as a module
    main()
