"""SqliteConsensus: WAL + BEGIN IMMEDIATE compare-and-set, threads, errors."""

from __future__ import annotations

import sqlite3
import threading

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
