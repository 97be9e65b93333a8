"""``colmz.spark.class_archive``: a candidate becomes the archive only when its JVM is gone and
a test JVM maps it cleanly; truncated, running, unrecorded and surplus candidates are handled."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from colmz.spark import class_archive  # noqa: E402
from colmz.spark.class_archive import archive_path, java_binary, jvm_options, promote_candidates  # noqa: E402

pytestmark = pytest.mark.skipif(java_binary() is None, reason="no java")

DEAD_PID = 2**22 + 12345  # above the default pid_max: no such process


def _classpath() -> str:
    return str(next(class_archive._spark_jars().glob("spark-launcher*.jar")))


def _dump(target: Path, classpath: str) -> None:
    """A small dynamic archive, written the way a driver writes one: at JVM exit."""
    subprocess.run([java_binary(), f"-XX:ArchiveClassesAtExit={target}", *class_archive.QUIET.split(), "-cp",
                    classpath, "-version"], check=True, capture_output=True, timeout=120)


def _candidate(cache: Path, pid: int, classpath: str, dump: bool = True) -> tuple[Path, Path]:
    opts, cand = jvm_options(str(cache))
    assert cand is not None and f"-XX:ArchiveClassesAtExit={cand}" in opts and "-Xlog:cds*=off" in opts
    if dump:
        _dump(cand, classpath)
    marker = cand.with_suffix("").with_suffix(".json")
    marker.write_text(json.dumps({"pid": pid, "classpath": classpath}))
    return cand, marker


def test_a_finished_candidate_becomes_the_archive(tmp_path):
    cp = _classpath()
    cand, marker = _candidate(tmp_path, DEAD_PID, cp)
    archive = archive_path(str(tmp_path))
    opts, again = jvm_options(str(tmp_path))  # the next start promotes it and uses it
    assert again is None and opts.startswith(f"-XX:SharedArchiveFile={archive} ")
    assert archive.is_file() and not cand.exists() and not marker.exists()
    # a JVM runs with it
    r = subprocess.run([java_binary(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", cp, "-version"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0


def test_a_truncated_candidate_is_deleted_never_used(tmp_path):
    cp = _classpath()
    cand, marker = _candidate(tmp_path, DEAD_PID, cp)
    data = cand.read_bytes()
    os.chmod(cand, 0o644)
    cand.write_bytes(data[: len(data) // 2])  # the driver was killed while writing it
    archive = archive_path(str(tmp_path))
    assert not promote_candidates(archive)
    assert not archive.exists() and not cand.exists() and not marker.exists()
    assert not list(tmp_path.rglob("hs_err*"))  # the test JVM's crash leaves no report behind


def test_a_running_drivers_candidate_is_left_alone(tmp_path):
    cp = _classpath()
    cand, marker = _candidate(tmp_path, os.getpid(), cp)
    archive = archive_path(str(tmp_path))
    assert not promote_candidates(archive)
    assert cand.exists() and marker.exists() and not archive.exists()


def test_unrecorded_and_surplus_candidates_are_cleaned_up(tmp_path):
    cp = _classpath()
    archive = archive_path(str(tmp_path))
    archive.parent.mkdir(parents=True)
    made = []
    for name in ("a", "b"):  # two drivers that started before either archive existed
        cand = archive.parent / f"{archive.stem}.{name}.jsa.tmp"
        _dump(cand, cp)
        marker = cand.with_suffix("").with_suffix(".json")
        marker.write_text(json.dumps({"pid": DEAD_PID, "classpath": cp}))
        made += [cand, marker]
    assert promote_candidates(archive) and archive.is_file()
    assert not any(p.exists() for p in made)
    # a candidate whose driver died before recording it: kept while young, dropped when stale
    _, orphan = jvm_options(str(tmp_path))
    assert orphan is None  # the archive exists now: nothing more is written
    stray = archive.parent / f"{archive.stem}.0123.jsa.tmp"
    stray.write_bytes(b"partial")
    promote_candidates(archive)
    assert stray.exists()
    old = time.time() - class_archive.STALE - 5
    os.utime(stray, (old, old))
    promote_candidates(archive)
    assert not stray.exists()


def test_no_java_means_no_options(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "java_binary", lambda: None)
    assert jvm_options(str(tmp_path)) == ("", None)
