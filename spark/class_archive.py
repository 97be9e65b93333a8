"""A class-data-sharing archive of Spark's classes, so a local Spark JVM starts faster.

Design
------
A fresh Spark driver JVM loads and verifies about 17,000 classes from some 280 jars before
its first job is done; on a 2-core machine that is seconds of its start-up. HotSpot's
application class-data sharing (AppCDS) maps classes parsed by an earlier run from an
archive file instead. JDK 17 writes such a *dynamic* archive when a JVM started with
``-XX:ArchiveClassesAtExit=FILE`` exits, and a later JVM uses it with
``-XX:SharedArchiveFile=FILE`` (it checks the archive against its own class path, jar sizes
and times, and ignores an archive that does not match).

:func:`jvm_options` returns the options for the next driver JVM:

* an archive for this Java and this Spark exists -- use it;
* else -- have this JVM write a candidate at exit (unique name, a ``.tmp`` file) and record,
  once the JVM is up (:func:`record_dump`), its process id and class path beside it.

A candidate becomes the archive only when its JVM has exited and a test JVM has mapped it
(``-Xshare:on``) and exited cleanly (:func:`promote_candidates`, at the next start). Never
map an unchecked file: a candidate whose JVM was killed while writing it is truncated, and
HotSpot dies with SIGBUS when it maps a truncated archive (checked here with a cut copy).
The archive is renamed into place atomically, so concurrent starts see it whole or not at
all; a candidate that fails the test is deleted.

Ahead of time
-------------
:func:`build` makes the archive before the first real job (the README's ``scripts/main`` runs
it as a setup step, through :func:`main`): it runs a short *training* job
-- by default ``colmz sink`` on a small generated example, so the training JVM loads the
classes the real job loads (SQL planning, Parquet, Arrow and Python workers) -- in a child
process, waits until that job's JVM has exited (it writes the candidate on its way out), and
promotes the candidate as above. When the archive exists already it returns at once.

The archive is named by a hash of the Java binary (path, size, time) and of the Spark jars
(names, sizes), so upgrading either starts a new one. It takes about 150 MB. CDS log lines
are switched off (``-Xlog:cds*=off``): the JVM writes its log to standard output, which
carries the CLI's JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "ArchiveBuildError", "archive_dir", "archive_path", "build", "java_binary", "jvm_options", "main",
    "promote_candidates", "record_dump", "training_command",
]

#: Seconds after which a candidate nobody recorded is deleted (an archive is written in a few).
STALE = 600

#: Keeps CDS warnings (classes it skips, a mismatched archive) off the JVM's standard output.
QUIET = "-Xlog:cds*=off -Xlog:class+path*=off"


def java_binary() -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = Path(home) / "bin" / "java"
        return str(exe) if exe.is_file() else None
    return shutil.which("java")


def _spark_jars() -> Path | None:
    try:
        from pyspark.find_spark_home import _find_spark_home
    except ImportError:  # pragma: no cover - pyspark is the [spark] extra
        return None
    jars = Path(os.environ.get("SPARK_HOME") or _find_spark_home()) / "jars"
    return jars if jars.is_dir() else None


def archive_dir(cache_dir: str) -> Path:
    """Where archives and candidates live: ``<cache_dir>/spark-cds``."""
    return Path(cache_dir) / "spark-cds"


def archive_path(cache_dir: str) -> Path | None:
    """The archive's path for this Java and these Spark jars (None: no java or no jars)."""
    java, jars = java_binary(), _spark_jars()
    if java is None or jars is None:
        return None
    h = hashlib.sha256()
    real = Path(java).resolve()
    st = real.stat()
    h.update(f"{real}:{st.st_size}:{st.st_mtime_ns}".encode())
    for jar in sorted(jars.iterdir()):
        h.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return archive_dir(cache_dir) / f"spark-{h.hexdigest()[:20]}.jsa"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    # A driver JVM outlives the Python process that started it, so its parent becomes init;
    # where init does not reap (some containers) it stays a zombie: exited, its archive written.
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] not in "ZX"
    return True


def _maps_cleanly(java: str, candidate: Path, classpath: str, cwd: Path) -> bool:
    """A test JVM maps ``candidate`` (``-Xshare:on`` fails rather than falling back) and exits 0."""
    cmd = [java, "-Xshare:on", f"-XX:SharedArchiveFile={candidate}", "-XX:ErrorFile=/dev/null",
           "-XX:-CreateCoredumpOnCrash", *QUIET.split(), "-cp", classpath, "-version"]
    try:
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _markers(archive: Path) -> set[Path]:
    """The records (``<stem>.<id>.json``) of the candidates for ``archive``."""
    return set(archive.parent.glob(archive.stem + ".*.json"))


def promote_candidates(archive: Path) -> bool:
    """Make the archive out of a finished, tested candidate; return whether it exists now.

    Candidates whose JVM still runs are left alone; those that fail the test are deleted.
    """
    java = java_binary()
    if java is None:
        return archive.is_file()
    for marker in sorted(_markers(archive)):
        candidate = marker.with_suffix(".jsa.tmp")
        try:
            info = json.loads(marker.read_text())
            pid, classpath = int(info["pid"]), str(info["classpath"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours: left alone
        if _alive(pid):
            continue  # still running, or still writing the archive at exit
        if (not archive.is_file() and candidate.is_file()
                and _maps_cleanly(java, candidate, classpath, archive.parent)):
            os.replace(candidate, archive)
        candidate.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
    # A candidate without a record (its driver died before recording it) is dropped once old.
    now = time.time()
    for candidate in archive.parent.glob(archive.stem + ".*.jsa.tmp"):
        with contextlib.suppress(OSError):
            if not candidate.with_suffix("").with_suffix(".json").exists() and now - candidate.stat().st_mtime > STALE:
                candidate.unlink()
    return archive.is_file()


def jvm_options(cache_dir: str) -> tuple[str, Path | None]:
    """JVM options for the next local driver, and the candidate it will write (or None).

    ``("", None)`` when there is no ``java`` or no Spark jars to key the archive on.
    """
    archive = archive_path(cache_dir)
    if archive is None:
        return "", None
    archive.parent.mkdir(parents=True, exist_ok=True)
    if promote_candidates(archive):
        return f"-XX:SharedArchiveFile={archive} {QUIET}", None
    candidate = archive.parent / f"{archive.stem}.{uuid.uuid4().hex}.jsa.tmp"
    return f"-XX:ArchiveClassesAtExit={candidate} {QUIET}", candidate


def record_dump(spark, candidate: Path) -> None:
    """Record the running JVM's process id and class path beside ``candidate`` (see module)."""
    jvm = spark.sparkContext._jvm
    info = {"pid": int(jvm.ProcessHandle.current().pid()),
            "classpath": str(jvm.System.getProperty("java.class.path"))}
    marker = candidate.with_suffix("").with_suffix(".json")
    tmp = marker.with_name(marker.name + f".{os.getpid()}")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, marker)


class ArchiveBuildError(RuntimeError):
    """:func:`build` could not make the archive (the training job failed or wrote no candidate)."""


def training_command(store: str) -> list[str]:
    """The default training job of :func:`build`: ``colmz sink`` on a small example into ``store``.

    Small (2,000 events, 20 ticks) so it takes little more than the JVM's start, but the same
    kind of job as the real one, so its JVM loads the same classes.

    >>> training_command("/tmp/s")[-8:]
    ['sink', '--example-events', '2000', '--ticks', '20', '--store', '/tmp/s', '--quiet']
    """
    return [sys.executable, "-m", "colmz.spark.cli", "sink", "--example-events", "2000", "--ticks", "20",
            "--store", store, "--quiet"]


def _recorded_pid(marker: Path) -> int | None:
    try:
        return int(json.loads(marker.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # promoted (and deleted) meanwhile, or not ours


def build(cache_dir: str, command: Sequence[str] | None = None, *, timeout: float = 600.0,
          progress: Callable[[int, int, str], None] | None = None) -> Path | None:
    """Make the archive ahead of time, by running a training job; return its path.

    Returns at once when the archive exists (or a finished candidate passes the test).
    Otherwise runs ``command`` with ``NUMBA_CACHE_DIR=cache_dir`` in a scratch directory --
    it must start a local ``quick_start`` Spark session (:func:`colmz.spark.session`), whose
    JVM then writes a candidate when it exits -- waits for that JVM to exit, and promotes the
    candidate (:func:`promote_candidates`).

    Parameters
    ----------
    cache_dir : str
        The cache directory the jobs use (``$NUMBA_CACHE_DIR``); the archive goes in
        :func:`archive_dir` of it.
    command : sequence of str, optional
        The training job (default: :func:`training_command` with a scratch store).
    timeout : float
        Seconds the training job and its JVM's exit may take together.
    progress : callable, optional
        ``progress(done, total, label)`` over the 3 steps: training job, its JVM's exit
        (writing the candidate), test and promotion.

    Returns
    -------
    Path or None
        The archive; None when there is no ``java`` or no Spark jars (nothing to archive).

    Raises
    ------
    ArchiveBuildError
        The training job failed or timed out, or no candidate passed the test. Nothing is
        left behind but what :func:`promote_candidates` cleans up later.

    Examples
    --------
    >>> import colmz.spark.class_archive as ca
    >>> ca.build("/tmp/colmz-numba")  # doctest: +SKIP
    PosixPath('/tmp/colmz-numba/spark-cds/spark-8a2d3c8e9d7596b12c64.jsa')
    """
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    archive = archive_path(cache_dir)
    if archive is None:
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    if promote_candidates(archive):
        return archive
    deadline = time.monotonic() + timeout
    before = _markers(archive)
    if progress is not None:
        progress(0, 3, "training job")
    with tempfile.TemporaryDirectory(prefix="colmz-cds-") as scratch:
        cmd = list(command) if command is not None else training_command(str(Path(scratch) / "store"))
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
        try:
            # The scratch directory as working directory: whatever the job leaves there goes with it.
            r = subprocess.run(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ArchiveBuildError(f"the training job {cmd!r} took more than {timeout} s") from None
        except OSError as e:
            raise ArchiveBuildError(f"cannot run the training job {cmd!r}: {e}") from None
        if r.returncode != 0:
            tail = r.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise ArchiveBuildError(f"the training job {cmd!r} exited with status {r.returncode}: "
                                    + " | ".join(tail))
    if progress is not None:
        progress(1, 3, "writing the archive")
    # The job's JVM writes its candidate while it exits, after the Python process that ran it
    # is gone: wait for the JVMs this job recorded, and no others (another driver may run on).
    pids = {pid for m in _markers(archive) - before if (pid := _recorded_pid(m)) is not None}
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise ArchiveBuildError(f"the training job's JVM (pid {sorted(pids)}) did not exit within {timeout} s")
        time.sleep(0.1)
    if progress is not None:
        progress(2, 3, "testing the archive")
    if not promote_candidates(archive):
        raise ArchiveBuildError(f"the training job {cmd!r} left no archive that maps cleanly in {archive.parent}")
    if progress is not None:
        progress(3, 3, "archive ready")
    return archive


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build the archive now unless it exists (see :func:`build`).

    Run as ``python -c "import sys; from colmz.spark.class_archive import main; sys.exit(main())"``
    (``python -m`` would load this module twice: ``colmz.spark`` imports it already).

    Prints one line saying what it did and how long it took. Exit status 0 when the archive
    exists (or there is nothing to archive), 1 when it could not be built -- the jobs then
    start without it, slower.
    """
    parser = argparse.ArgumentParser(
        prog="colmz.spark.class_archive",
        description="Build Spark's class-data-sharing archive for quick-start sessions ahead of the first job, "
        "by running a small training job (colmz sink on a generated example). Returns at once when the "
        "archive exists.")
    parser.add_argument("--cache-dir", default=None,
                        help="the cache directory the jobs use (default: $NUMBA_CACHE_DIR, as colmz.spark.session)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds the training job may take")
    args = parser.parse_args(argv)
    if args.cache_dir is None:
        from colmz.spark.session import default_cache_dir

        args.cache_dir = default_cache_dir()
    t0 = time.perf_counter()
    archive = archive_path(args.cache_dir)
    if archive is None:
        print("Spark class archive: no java or no Spark jars, nothing to archive", flush=True)
        return 0
    with contextlib.suppress(OSError):
        if archive.parent.is_dir() and promote_candidates(archive):
            print(f"Spark class archive: ready ({archive})", flush=True)
            return 0
    print("Spark class archive: building it with a short training job (colmz sink, 2,000 events, 20 ticks), "
          "once ...", flush=True)
    try:
        build(args.cache_dir, timeout=args.timeout)
    except (ArchiveBuildError, OSError) as e:
        print(f"Spark class archive: not built ({e}); jobs start without it", file=sys.stderr, flush=True)
        return 1
    print(f"Spark class archive: built in {time.perf_counter() - t0:.1f} s ({archive})", flush=True)
    return 0

