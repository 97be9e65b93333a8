"""SparkSessions that can run colmz on their executors.

Design
------
colmz runs inside Spark's Python workers (grouped and mapped Arrow UDFs), so a session must
give those workers three things, and two of them only count if they are in place *before the
JVM starts* -- in local mode the Python workers inherit the JVM's environment, and setting
``os.environ`` after ``getOrCreate()`` has no effect on them (pyspark 4):

* ``PYSPARK_PYTHON`` = the running interpreter. Otherwise workers start the system
  ``python3``, which has neither colmz nor pyarrow.
* ``NUMBA_CACHE_DIR`` = a writable directory. colmz's kernels are compiled with
  ``cache=True``; a cold Python worker then loads them instead of compiling them, and a
  read-only site-packages would otherwise disable the cache.
* ``NUMBA_NUM_THREADS=1``: Spark already runs one Python worker per core.

:func:`session` sets all three in ``os.environ`` (inherited in local mode) *and* as
``spark.executorEnv.*`` (what executors launched by a cluster manager get, including the
separate executor JVMs of ``local-cluster[...]``), and adds local defaults: loopback
binding, UTC, Arrow on, few shuffle partitions, no UI.

Cluster recipe
--------------
On a real cluster the executors need colmz itself and the same environment:

1. build a wheel (``python -m build --wheel``) and install it into the executors' Python,
   e.g. ship a packed virtualenv with ``spark.archives=colmz_env.tar.gz#env`` and set
   ``spark.pyspark.python=./env/bin/python`` (or install the wheel in the node image);
2. ``spark.executorEnv.NUMBA_CACHE_DIR=/local/disk/numba`` -- node-local and writable;
3. ``spark.executorEnv.NUMBA_NUM_THREADS=1``;
4. warm the cache once per node image (``python -c "import colmz; colmz.warmup()"``) or accept
   about one second of compile per Python worker.

``session(master="yarn", conf={...})`` applies the same executor environment; pass
``python=`` when the executors' interpreter path differs from the driver's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from colmz.kernels.decorators import default_cache_dir as kernel_cache_dir
from colmz.spark import class_archive

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

__all__ = [
    "QUICK_START_JVM_OPTIONS", "default_cache_dir", "executor_env", "session", "start_python_workers",
    "stop_tasks", "worker_pid_env",
]

#: JVM options of a ``quick_start`` session (a short local job, such as ``colmz sink`` on a
#: laptop): C1-only JIT compilation and the serial collector. A fresh Spark JVM spends its
#: first seconds loading and compiling its own classes; with two cores, C2 compiler threads
#: and G1's concurrent threads compete with that start-up and with the Python workers, while
#: the short job never runs long enough to profit from C2's code. Measured on this 2-core
#: machine: JVM start to first finished job about 11-14 s -> 8-11 s (same runs, alternating).
QUICK_START_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def default_cache_dir() -> str:
    """The Numba cache directory colmz uses when none is given: the one every entry point
    shares (``colmz.kernels.decorators.default_cache_dir``: ``$NUMBA_CACHE_DIR`` if set, else
    a per-user cache directory), so the driver and its Python workers load what any colmz
    process compiled before.

    >>> isinstance(default_cache_dir(), str)
    True
    """
    return kernel_cache_dir()


def executor_env(*, python: str | None = None, numba_cache_dir: str | None = None) -> dict[str, str]:
    """The environment colmz's Python workers need, as a plain mapping.

    Parameters
    ----------
    python : str, optional
        Interpreter for the Python workers (default: the running one, ``sys.executable``).
    numba_cache_dir : str, optional
        Writable directory for compiled kernels (default: :func:`default_cache_dir`).

    Examples
    --------
    >>> env = executor_env(python="/opt/py/bin/python", numba_cache_dir="/tmp/nb")
    >>> env["PYSPARK_PYTHON"], env["NUMBA_CACHE_DIR"], env["NUMBA_NUM_THREADS"]
    ('/opt/py/bin/python', '/tmp/nb', '1')
    """
    return {
        "PYSPARK_PYTHON": python or sys.executable,
        "NUMBA_CACHE_DIR": numba_cache_dir or default_cache_dir(),
        "NUMBA_NUM_THREADS": "1",
    }


def _jvm_running() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - pyspark is the [spark] extra
        return False
    return SparkContext._active_spark_context is not None


def session(
    master: str = "local[2]",
    app_name: str = "colmz",
    *,
    shuffle_partitions: int | None = None,
    numba_cache_dir: str | None = None,
    python: str | None = None,
    conf: Mapping[str, str] | None = None,
    warm: bool = True,
    quick_start: bool = False,
) -> SparkSession:
    """A SparkSession whose Python workers can run colmz.

    Sets ``PYSPARK_PYTHON``, ``NUMBA_CACHE_DIR`` and ``NUMBA_NUM_THREADS=1`` in the
    environment before the JVM starts and as ``spark.executorEnv.*``; binds to loopback for
    ``local`` masters; UTC session time zone; Arrow on; ``spark.sql.shuffle.partitions`` and
    ``spark.default.parallelism`` default to the number of local cores (Spark's 200 would
    make 200 tiny tasks of every small shuffle). If a session is already running, it is
    returned with its settings unchanged except ``conf`` entries Spark allows changing at
    runtime -- the environment can only be chosen before the first session.

    Parameters
    ----------
    master : str
        ``local[N]``, ``local-cluster[W,C,M]``, or a cluster URL (see the module's recipe).
    app_name : str
    shuffle_partitions : int, optional
        Shuffle partitions (default: cores of a ``local[N]`` master, else 8).
    numba_cache_dir : str, optional
        Writable directory for compiled kernels; created if missing.
    python : str, optional
        Interpreter for Python workers (default ``sys.executable``).
    conf : mapping, optional
        Further Spark settings; they win over the defaults above.
    warm : bool
        Compile colmz's kernels into the Numba cache in this process (default), so local
        Python workers load them (~0.4 s) instead of each compiling them (seconds). It runs
        before the JVM starts, not beside it: PySpark forks the JVM's launcher with Python code
        to run in the child, unsafe while another thread compiles.
    quick_start : bool
        For a short job. Python workers come from :mod:`colmz.spark.daemon`, which loads
        colmz, pyarrow and the kernels once before it forks them. On a ``local`` master,
        also start the driver JVM with :data:`QUICK_START_JVM_OPTIONS` (unless ``conf`` sets
        ``spark.driver.extraJavaOptions``) and turn adaptive query execution off (its
        re-planning costs more than it saves on a few small partitions). Off by default: a
        long-running local session profits from C2-compiled code.

    Examples
    --------
    >>> import colmz.spark
    >>> spark = colmz.spark.session("local[2]")  # doctest: +SKIP
    >>> spark.conf.get("spark.sql.session.timeZone")  # doctest: +SKIP
    'UTC'
    """
    from pyspark.sql import SparkSession

    if shuffle_partitions is not None and (not isinstance(shuffle_partitions, int) or shuffle_partitions < 1):
        raise ValueError(f"shuffle_partitions must be a positive int, got {shuffle_partitions!r}")
    if _jvm_running():
        spark = SparkSession.builder.getOrCreate()
        for k, v in (conf or {}).items():
            spark.conf.set(k, v)
        return spark

    env = executor_env(python=python, numba_cache_dir=numba_cache_dir)
    os.makedirs(env["NUMBA_CACHE_DIR"], exist_ok=True)
    # Before the JVM starts: local-mode Python workers inherit the JVM's environment.
    os.environ.update(env)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        # Silences "resolves to a loopback address" and keeps the driver off the network.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if shuffle_partitions is None:
        shuffle_partitions = _local_cores(master) or 8
    candidate = None
    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # colmz's kernels consolidate a million updates in tens of milliseconds, so the Arrow
        # hand-off dominates: 64 Ki-row batches cut it by about a third versus the 10k default.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": env["PYSPARK_PYTHON"],
    }
    if local:
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
        if quick_start:
            archive, candidate = _class_archive_options(env["NUMBA_CACHE_DIR"])
            settings["spark.driver.extraJavaOptions"] = f"{QUICK_START_JVM_OPTIONS} {archive}".strip()
            settings["spark.sql.adaptive.enabled"] = "false"
    if quick_start:
        # Python workers forked with colmz, pyarrow and the kernels already loaded.
        settings["spark.python.daemon.module"] = "colmz.spark.daemon"
    for k, v in env.items():
        settings[f"spark.executorEnv.{k}"] = v
    settings.update(conf or {})
    if "-XX:ArchiveClassesAtExit" not in settings.get("spark.driver.extraJavaOptions", ""):
        candidate = None  # the caller's options won: no archive is written
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    if not warm:
        return _started(builder, candidate)
    import colmz

    colmz.set_cache_dir(env["NUMBA_CACHE_DIR"])
    # The kernels are loaded (or compiled) before the JVM starts, not beside it in another
    # thread: PySpark launches the JVM with a ``preexec_fn`` (Python run in the forked child
    # before exec), which is unsafe while another thread of this process compiles -- the
    # child can crash on a lock the other thread held at the fork.
    colmz.warmup()
    return _started(builder, candidate)


def _started(builder, candidate) -> SparkSession:
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if candidate is not None:
        with contextlib.suppress(Exception):  # without the record the candidate is dropped later
            class_archive.record_dump(spark, candidate)
    return spark


def _class_archive_options(cache_dir: str):
    """``(JVM options, candidate or None)`` for Spark's class archive (:mod:`colmz.spark.class_archive`)."""
    try:
        return class_archive.jvm_options(cache_dir)
    except OSError:  # an unwritable cache directory: start without the archive
        return "", None


def _python_worker_ready(batches):
    yield from batches


def start_python_workers(spark) -> threading.Thread:
    """Have Spark start its Python worker daemon now, in the background; return the thread.

    Runs a one-task Python job in a daemon thread. Spark starts the daemon (with
    ``quick_start``, :mod:`colmz.spark.daemon`, which loads colmz and its kernels) the first
    time a task needs a Python worker; started early, that start-up overlaps the JVM's own
    work of the next job (planning, its first stages) instead of following it, and the
    worker stays idle for the next Python task to reuse (``spark.python.worker.reuse``, on by
    default). The job's outcome does not matter: a failure here shows again, with its
    cause, in the job that needs the workers.

    >>> start_python_workers(spark).join()  # doctest: +SKIP
    """

    def run() -> None:
        with contextlib.suppress(Exception):  # reported by the job that needs the workers
            # An Arrow UDF, as colmz's jobs run: Spark keeps a worker daemon per kind of worker
            # environment, and an RDD function's would not serve them.
            spark.range(1, numPartitions=1).mapInArrow(_python_worker_ready, "id long").collect()

    thread = threading.Thread(target=run, name="colmz-python-workers", daemon=True)
    thread.start()
    return thread


def stop_tasks(spark, timeout: float = 30.0) -> bool:
    """Cancel the session's jobs and wait until no task runs on any executor (at most
    ``timeout`` seconds); True when none runs.

    A job fails as soon as one task fails, but Spark does not wait for the job's other
    running tasks: they are killed in the background and may still write for a moment.
    A job that discards its output after a failure calls this first, so the discard sees
    what those tasks wrote (a Python worker can outlive its task for a moment still:
    ``colmz.arrangement.runs.discard_owned`` covers that).

    >>> stop_tasks(spark)  # doctest: +SKIP
    True
    """
    import time

    sc = spark.sparkContext
    sc.cancelAllJobs()
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        if sum(e.numRunningTasks() for e in tracker.getExecutorInfos()) == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _local_cores(master: str) -> int | None:
    """Task slots of a ``local[N]`` / ``local[N,F]`` / ``local-cluster[W,C,M]`` master."""
    if master == "local":
        return 1
    if master.startswith("local-cluster[") and master.endswith("]"):
        parts = master[len("local-cluster["):-1].split(",")
        try:
            return int(parts[0]) * int(parts[1])
        except (ValueError, IndexError):
            return None
    if master.startswith("local[") and master.endswith("]"):
        n = master[len("local["):-1].split(",")[0].strip()
        if n == "*":
            return os.cpu_count() or 1
        try:
            return int(n)
        except ValueError:
            return None
    return None


def worker_pid_env() -> dict[str, str | int]:
    """What a Python worker sees (pid, interpreter, Numba cache): used by tests and benchmarks.

    >>> sorted(worker_pid_env())
    ['NUMBA_CACHE_DIR', 'NUMBA_NUM_THREADS', 'PYSPARK_PYTHON', 'pid', 'python']
    """
    return {
        "pid": os.getpid(),
        "python": sys.executable,
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", ""),
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", ""),
        "NUMBA_NUM_THREADS": os.environ.get("NUMBA_NUM_THREADS", ""),
    }
