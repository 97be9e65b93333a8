"""SqliteConsensus: WAL + BEGIN IMMEDIATE compare-and-set, threads, errors."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time

import pytest

from colmz.storage import SqliteConsensus, VersionedData


def test_threads_race_one_winner_per_version(tmp_path):
    c = SqliteConsensus(tmp_path / "c.sqlite")
    wins: list[tuple[int, int]] = []
    lock = threading.Lock()

    def writer(wid: int) -> None:
        for _ in range(40):
            head = c.head("k")
            exp = None if head is None else head.seqno
            if c.compare_and_set("k", exp, VersionedData((exp or 0) + 1, f"{wid}".encode())):
                with lock:
                    wins.append(((exp or 0) + 1, wid))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = c.scan("k")
    assert [v.seqno for v in versions] == list(range(1, len(versions) + 1))
    assert sorted(s for s, _ in wins) == [v.seqno for v in versions]
    assert {s: str(w).encode() for s, w in wins} == {v.seqno: v.data for v in versions}


def test_wal_and_sync_settings(tmp_path):
    SqliteConsensus(tmp_path / "c.sqlite")
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_bad_paths(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        SqliteConsensus(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SqliteConsensus(tmp_path / "no" / "c.sqlite")


def test_not_a_database(tmp_path):
    from colmz.storage import Determinate

    (tmp_path / "c.sqlite").write_bytes(b"garbage" * 1000)
    with pytest.raises(Determinate, match="c.sqlite"):
        SqliteConsensus(tmp_path / "c.sqlite")


def _filled(path):
    c = SqliteConsensus(path)
    assert c.compare_and_set("s", None, VersionedData(1, b"a"))
    assert c.compare_and_set("s", 1, VersionedData(2, b"b"))
    return c


@pytest.mark.parametrize("wal_open", [False, True])
def test_read_only_reads_and_refuses_writes(tmp_path, wal_open):
    from colmz.storage.base import Determinate

    path = tmp_path / "c.sqlite"
    writer = _filled(path)
    if not wal_open:
        writer.close()  # the last connection checkpoints and removes the log
        assert not (tmp_path / "c.sqlite-wal").exists()
    else:
        assert (tmp_path / "c.sqlite-wal").stat().st_size  # committed data still in the log
    ro = SqliteConsensus(path, read_only=True)
    assert ro.read_only and "read_only=True" in repr(ro)
    assert ro.head("s") == VersionedData(2, b"b")
    assert [v.seqno for v in ro.scan("s")] == [1, 2]
    with pytest.raises(Determinate, match="opened read-only"):
        ro.compare_and_set("s", 2, VersionedData(3, b"c"))
    with pytest.raises(Determinate, match="opened read-only"):
        ro.truncate("s", 2)
    assert ro.head("s") == VersionedData(2, b"b")
    with pytest.raises(FileNotFoundError, match="cannot be created"):
        SqliteConsensus(tmp_path / "missing.sqlite", read_only=True)


def test_store_in_a_read_only_directory_opens_read_only(tmp_path, monkeypatch):
    # Before: the consensus of a store that may not be written could not even be read (WAL
    # mode wants its -wal/-shm files), and open_location refused the directory outright. A
    # read-only mount is what os.access reports (EROFS) and what a file creation fails
    # with; both are simulated for the store's directory (this test runs as root, which
    # plain permissions do not stop).
    import errno
    import tempfile as tempfile_mod

    import pyarrow as pa

    import colmz
    from colmz.arrangement import Arrangement
    from colmz.storage.base import Determinate

    d = tmp_path / "store"
    a = Arrangement.open(str(d), {"k": pa.int64()})
    a.write(colmz.Updates({"k": [1, 2]}, time=[0, 0], diff=[1, 1]))
    a.seal(1)
    a.maintain()
    a._log.consensus.close()
    assert not (d / "consensus.sqlite-wal").exists()
    real_access, real_mkstemp = os.access, tempfile_mod.mkstemp

    def access(path, mode, *args, **kwargs):
        inside = str(os.fspath(path)).startswith(str(d))
        return False if inside and mode & os.W_OK else real_access(path, mode, *args, **kwargs)

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and str(dir).startswith(str(d)):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(tempfile_mod, "mkstemp", mkstemp)
    with pytest.raises(PermissionError, match="create=False"):
        Arrangement.open(str(d))
    ro = Arrangement.open(str(d), create=False)
    assert ro._log.consensus.read_only
    assert sorted(ro.read().to_pylist()) == [(1, 0, 1), (2, 0, 1)]
    with pytest.raises(Determinate, match="read-only"):
        ro.seal(5)
    assert ro.get_seal() == 1
    assert not (d / "consensus.sqlite-wal").exists() and not (d / "consensus.sqlite-shm").exists()


def _open_at(path: str, start: float, out) -> None:
    # one process of test_processes_creating_one_database_at_once_all_open_it
    while time.time() < start:
        pass
    try:
        c = SqliteConsensus(path)
        c.compare_and_set("k", None, VersionedData(1, b"x"))
        out.put("ok")
    except Exception as e:  # noqa: BLE001 - reported to the parent, which asserts on it
        out.put(f"{type(e).__name__}: {e}")


def test_processes_creating_one_database_at_once_all_open_it(tmp_path):
    # Switching a new file to WAL mode while other processes do the same got "database is
    # locked" at once (no busy wait) a few times in a hundred: two `colmz stream` processes
    # creating one store then failed. Every process must open it; exactly one writes seqno 1.
    ctx = multiprocessing.get_context("fork")
    failures = []
    for trial in range(60):
        path = str(tmp_path / f"c{trial}.sqlite")
        out = ctx.Queue()
        start = time.time() + 0.02
        procs = [ctx.Process(target=_open_at, args=(path, start, out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        results = [out.get(timeout=10) for _ in procs]
        failures += [r for r in results if r != "ok"]
        assert SqliteConsensus(path).head("k").seqno == 1
    assert failures == []
