"""``colmz.spark.class_archive``: a candidate becomes the archive only when its JVM is gone and
a test JVM maps it cleanly; truncated, running, unrecorded and surplus candidates are handled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from colmz.spark import class_archive  # noqa: E402
from colmz.spark.class_archive import (  # noqa: E402
    ArchiveBuildError,
    archive_path,
    build,
    java_binary,
    jvm_options,
    promote_candidates,
)

# A JVM of its own per test: run beside no Spark session (the spark group runs serially on one worker).
pytestmark = [pytest.mark.skipif(java_binary() is None, reason="no java"), pytest.mark.spark]

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


# A stand-in for a training job, as a driver does it: take the options from jvm_options (in the
# cache named by NUMBA_CACHE_DIR, which build sets), start a JVM that writes its candidate at
# exit, record its pid and class path, and exit while that JVM still runs (as the Python driver
# of a Spark job exits before its JVM).
FAKE_DRIVER = """
import json, os, subprocess, sys
from colmz.spark.class_archive import java_binary, jvm_options
opts, cand = jvm_options(os.environ["NUMBA_CACHE_DIR"])
jvm = subprocess.Popen([java_binary(), *opts.split(), "-cp", sys.argv[1], "-version"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
cand.with_suffix("").with_suffix(".json").write_text(json.dumps({"pid": jvm.pid, "classpath": sys.argv[1]}))
"""


def test_build_runs_a_training_job_and_waits_for_its_jvm(tmp_path):
    cp = _classpath()
    steps = []
    archive = build(str(tmp_path), [sys.executable, "-c", FAKE_DRIVER, cp],
                    progress=lambda done, total, label: steps.append((done, total)))
    assert archive == archive_path(str(tmp_path)) and archive.is_file()
    assert steps == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]  # no candidate or record left
    r = subprocess.run([java_binary(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", cp, "-version"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0
    # Built: the next call returns it without running its job (this one would fail).
    assert build(str(tmp_path), [sys.executable, "-c", "raise SystemExit(3)"]) == archive
    assert jvm_options(str(tmp_path))[0].startswith(f"-XX:SharedArchiveFile={archive} ")


def test_build_reports_a_failed_training_job(tmp_path):
    job = [sys.executable, "-c", "import sys; sys.stderr.write('no Spark today\\n'); sys.exit(3)"]
    with pytest.raises(ArchiveBuildError, match=r"exited with status 3: no Spark today"):
        build(str(tmp_path), job)
    assert not archive_path(str(tmp_path)).exists()


def test_build_reports_a_job_that_leaves_no_candidate(tmp_path):
    with pytest.raises(ArchiveBuildError, match="left no archive"):
        build(str(tmp_path), [sys.executable, "-c", "pass"])  # a job that never started a JVM
    with pytest.raises(ArchiveBuildError, match="took more than 0.5 s"):
        build(str(tmp_path), [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert not archive_path(str(tmp_path)).exists()


@pytest.mark.parametrize("timeout", [0, -1.0, "10", True, float("nan")])
def test_build_rejects_a_bad_timeout(tmp_path, timeout):
    with pytest.raises(ValueError, match=r"timeout must be a positive number of seconds, got"):
        build(str(tmp_path), [sys.executable, "-c", "pass"], timeout=timeout)
    assert not (tmp_path / "spark-cds").exists()


def test_build_without_java_builds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "java_binary", lambda: None)
    assert build(str(tmp_path), [sys.executable, "-c", "raise SystemExit(3)"]) is None


def test_main_says_what_it_did(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(class_archive, "build", lambda *a, **k: (_ for _ in ()).throw(ArchiveBuildError("boom")))
    assert class_archive.main(["--cache-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "building it" in out and "not built (boom); jobs start without it" in err
    monkeypatch.undo()
    cand, _ = _candidate(tmp_path, DEAD_PID, _classpath())  # a finished candidate: promoted, ready
    assert class_archive.main(["--cache-dir", str(tmp_path)]) == 0
    assert f"ready ({archive_path(str(tmp_path))})" in capsys.readouterr().out
    monkeypatch.setattr(class_archive, "java_binary", lambda: None)
    assert class_archive.main(["--cache-dir", str(tmp_path)]) == 0
    assert "nothing to archive" in capsys.readouterr().out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="zombies are told apart through /proc")
def test_a_zombie_driver_counts_as_exited():
    # A child that has exited and is not reaped yet: a zombie, as an orphaned JVM stays where
    # init does not reap.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while class_archive._alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not class_archive._alive(child.pid)
    child.wait()
    assert class_archive._alive(os.getpid())


@pytest.mark.slow
def test_build_with_the_default_training_job(tmp_path):
    archive = build(str(tmp_path), timeout=600)
    assert archive is not None and archive.is_file()
    assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]
