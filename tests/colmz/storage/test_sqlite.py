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


# ----------------------------------------------------------------------------- group commit


def _held_leader(c, waiting: int, fail=None):
    """Make ``c``'s next write transaction wait until ``waiting`` compare-and-sets queue up
    behind it (then raise ``fail`` instead of running, when given)."""
    real = c._write  # noqa: SLF001 - white-box: hold the first group's transaction
    calls = [0]

    def held(key, what, body):
        calls[0] += 1
        if calls[0] == 1:
            deadline = time.monotonic() + 30
            while len(c._groups.pending) < waiting:  # noqa: SLF001
                assert time.monotonic() < deadline, "the other compare-and-sets never queued"
                time.sleep(0.001)
        elif calls[0] == 2 and fail is not None:
            raise fail
        return real(key, what, body)

    c._write = held  # noqa: SLF001


def test_concurrent_compare_and_sets_commit_in_one_transaction(tmp_path):
    """Eight threads' compare-and-sets made while another's transaction runs commit in one
    transaction after it (two in all, not nine); each gets its own outcome -- of two on one
    key expecting the same version exactly one wins -- and the records are as if run one
    after the other."""
    c = SqliteConsensus(tmp_path / "c.sqlite")
    base = c.stats["commits"]
    _held_leader(c, 8)
    results = {}

    def cas(name, key, expected, seqno):
        results[name] = c.compare_and_set(key, expected, VersionedData(seqno, name.encode()))

    lead = threading.Thread(target=cas, args=("lead", "a", None, 1))
    lead.start()
    while c._groups is None or not c._groups.leading:  # noqa: SLF001
        time.sleep(0.001)
    others = [threading.Thread(target=cas, args=(f"k{i}", f"k{i}", None, 1)) for i in range(6)]
    others += [threading.Thread(target=cas, args=(f"dup{i}", "dup", None, 1)) for i in range(2)]
    for t in others:
        t.start()
    for t in [lead, *others]:
        t.join(60)
    assert c.stats["commits"] - base == 2
    assert results["lead"] and all(results[f"k{i}"] for i in range(6))
    assert sorted([results["dup0"], results["dup1"]]) == [False, True]
    assert c.head("dup").data in (b"dup0", b"dup1") and c.head("k3") == VersionedData(1, b"k3")
    assert c._groups.pending == [] and not c._groups.leading  # noqa: SLF001


def test_a_failed_group_fails_each_call_and_writes_nothing(tmp_path):
    from colmz.storage.base import Determinate

    c = SqliteConsensus(tmp_path / "c.sqlite")
    _held_leader(c, 3, fail=Determinate("injected: the group's transaction failed"))
    errors, results = {}, {}

    def cas(key):
        try:
            results[key] = c.compare_and_set(key, None, VersionedData(1, b"x"))
        except Determinate as e:
            errors[key] = e

    lead = threading.Thread(target=cas, args=("lead",))
    lead.start()
    while c._groups is None or not c._groups.leading:  # noqa: SLF001
        time.sleep(0.001)
    others = [threading.Thread(target=cas, args=(f"k{i}",)) for i in range(3)]
    for t in others:
        t.start()
    for t in [lead, *others]:
        t.join(60)
    assert results == {"lead": True}  # the first group ran alone, before the failure
    assert sorted(errors) == ["k0", "k1", "k2"] and len({id(e) for e in errors.values()}) == 3
    assert all(c.head(f"k{i}") is None for i in range(3))
    assert c.compare_and_set("k0", None, VersionedData(1, b"y"))  # the next group works
