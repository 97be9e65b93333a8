"""LocalBlob: atomic writes, key confinement (incl. symlinks), temp files hidden."""

from __future__ import annotations

import os

import pytest

from colmz.storage import Determinate, LocalBlob
from colmz.storage.local import TEMP_MARKER


def test_roundtrip_nested_and_url(tmp_path):
    b = LocalBlob(tmp_path / "blob")
    b.set("a/b/c.parquet", b"123")
    b.set("a/d", memoryview(b"xyz"))
    b.set("top", b"")
    assert b.get("a/b/c.parquet") == b"123" and b.get("a/d") == b"xyz" and b.get("top") == b""
    assert b.url_of("a/b/c.parquet") == str(tmp_path / "blob" / "a" / "b" / "c.parquet")
    assert b.path_of("a/d").read_bytes() == b"xyz"
    assert b.list_keys() == ["a/b/c.parquet", "a/d", "top"]
    assert b.list_keys("a/") == ["a/b/c.parquet", "a/d"]
    assert b.list_keys("a/b") == ["a/b/c.parquet"]
    assert b.list_keys("zz/") == [] and b.list_keys("t") == ["top"]
    b.set("a/d", b"new")  # overwrite is atomic too
    assert b.get("a/d") == b"new"
    b.delete("a/d")
    b.delete("a/d")
    b.delete("never/was")
    assert b.get("a/d") is None and b.get("a") is None and b.get("no/such") is None


def test_temp_files_are_hidden_and_cleaned_on_failure(tmp_path, monkeypatch):
    b = LocalBlob(tmp_path)
    (tmp_path / f"x{TEMP_MARKER}abc").write_bytes(b"partial")
    assert b.list_keys() == []
    with pytest.raises(ValueError, match="reserved marker"):
        b.set(f"y{TEMP_MARKER}1", b"")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(Determinate, match="No space left"):
        b.set("k", b"v")
    monkeypatch.undo()
    assert b.get("k") is None
    assert [p.name for p in tmp_path.iterdir() if TEMP_MARKER in p.name] == [f"x{TEMP_MARKER}abc"]


def test_keys_confined_to_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    b = LocalBlob(tmp_path / "root")
    for bad in ["../outside/secret", "/etc/passwd", "a/../../x", "a//b", "./a", "c:x", "a\\b"]:
        with pytest.raises(ValueError, match="storage key"):
            b.get(bad)
    os.symlink(outside, tmp_path / "root" / "link")
    with pytest.raises(ValueError, match=r"key 'link/secret' resolves to .* outside the blob root"):
        b.get("link/secret")
    with pytest.raises(ValueError, match="outside the blob root"):
        b.set("link/new", b"x")
    assert not (outside / "new").exists()
    with pytest.raises(ValueError, match="outside the blob root"):
        b.delete("link/secret")
    assert (outside / "secret").exists()
    assert b.list_keys() == []  # the symlinked directory is not walked


def test_root_is_a_file(tmp_path):
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="'.*f' is a file"):
        LocalBlob(tmp_path / "f")


def test_directory_key_conflict(tmp_path):
    b = LocalBlob(tmp_path)
    b.set("a/b", b"1")
    with pytest.raises(ValueError, match="names a directory"):
        b.set("a", b"2")
    assert b.get("a/b") == b"1"
    b.set("a/c/d", b"3")
    b.delete("a/b")
    b.delete("a/c/d")  # leaves the directories a/ and a/c/ empty: they no longer block "a"
    b.set("a", b"2")
    assert b.get("a") == b"2" and b.list_keys() == ["a"]


def test_set_streamed_writes_durably_and_returns_the_size(tmp_path):
    b = LocalBlob(tmp_path)
    calls = []

    def fill(out, writeback):
        out.write(b"abc")
        writeback()  # a hint: the value is complete only after the final fsync anyway
        out.write(b"defg")
        calls.append(True)

    assert b.set_streamed("p/q.parquet", fill) == 7 and calls == [True]
    assert b.get("p/q.parquet") == b"abcdefg"
    assert b.list_keys() == ["p/q.parquet"]
    assert b.set_streamed("empty", lambda out, writeback: None) == 0 and b.get("empty") == b""


def test_set_streamed_failure_stores_nothing(tmp_path):
    b = LocalBlob(tmp_path)
    b.set("k", b"old")

    class Stop(Exception):
        pass

    def fill(out, writeback):
        out.write(b"partial")
        raise Stop("the producer failed")

    with pytest.raises(Stop, match="producer failed"):
        b.set_streamed("k", fill)
    with pytest.raises(Stop):
        b.set_streamed("new", fill)
    assert b.get("k") == b"old" and b.get("new") is None
    assert not [p.name for p in tmp_path.iterdir() if TEMP_MARKER in p.name]

    def full(out, writeback):
        raise OSError(28, "No space left on device")

    with pytest.raises(Determinate, match="No space left"):
        b.set_streamed("k", full)
    assert b.get("k") == b"old" and not [p for p in tmp_path.iterdir() if TEMP_MARKER in p.name]


def test_background_syncs_share_one_thread_and_report_their_error(tmp_path, monkeypatch):
    # Every writeback() of a streamed value asks one helper thread for a sync (started once,
    # ended before the rename), and a failed background sync is raised, nothing stored.
    import threading

    import colmz.storage.local as local

    started = []
    synced = []

    class Counted(threading.Thread):
        def start(self):
            started.append(self.name)
            super().start()

    monkeypatch.setattr(local.threading, "Thread", Counted)
    monkeypatch.setattr(local, "_FDATASYNC", lambda fd: synced.append(fd))
    b = LocalBlob(tmp_path)

    def fill(out, writeback):
        for _ in range(20):
            out.write(b"x" * 1000)
            writeback()

    assert b.set_streamed("p", fill) == 20_000 and b.get("p") == b"x" * 20_000
    assert started == ["colmz-writeback"] and 1 <= len(synced) <= 20

    def failing(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(local, "_FDATASYNC", failing)
    with pytest.raises(Determinate, match="Input/output error"):
        b.set_streamed("q", fill)
    assert b.get("q") is None and b.get("p") == b"x" * 20_000
