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

The archive is named by a hash of the Java binary (path, size, time) and of the Spark jars
(names, sizes), so upgrading either starts a new one. It takes about 150 MB. CDS log lines
are switched off (``-Xlog:cds*=off``): the JVM writes its log to standard output, which
carries the CLI's JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

__all__ = ["archive_dir", "archive_path", "java_binary", "jvm_options", "promote_candidates", "record_dump"]

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


def promote_candidates(archive: Path) -> bool:
    """Make the archive out of a finished, tested candidate; return whether it exists now.

    Candidates whose JVM still runs are left alone; those that fail the test are deleted.
    """
    java = java_binary()
    if java is None:
        return archive.is_file()
    for marker in sorted(archive.parent.glob(archive.stem + ".*.json")):
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
