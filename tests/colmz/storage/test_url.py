"""open_location / open_consensus: URL forms, reopening, and the bad-input errors."""

from __future__ import annotations

import os
import re
import sys
import uuid

import pytest
from storage_servers import s3_url

import colmz
from colmz.storage import LocalBlob, MemBlob, SqliteConsensus, StateLog
from colmz.storage.url import open_consensus, open_location


def test_plain_path_is_one_directory_and_reopens(tmp_path):
    loc = open_location(str(tmp_path / "a" / "store"))
    assert isinstance(loc.blob, LocalBlob) and isinstance(loc.consensus, SqliteConsensus)
    loc.blob.set("p/1", b"x")
    StateLog(loc.consensus, "meta").commit(None, {"seal": 3})
    assert sorted(os.listdir(tmp_path / "a" / "store"))[:2] == ["blob", "consensus.sqlite"]
    again = open_location(f"file://{tmp_path}/a/store", create=False)
    assert again.blob.get("p/1") == b"x"
    assert StateLog(again.consensus, "meta").load() == (1, {"seal": 3})
    assert open_location(tmp_path / "a" / "store").url == str(tmp_path / "a" / "store")


def test_opening_to_read_creates_no_consensus_database(tmp_path):
    # Before: `colmz read --consensus sqlite:///new.sqlite` (create=False) created the file.
    store = tmp_path / "store"
    a = colmz.Arrangement.open(str(store))
    a.write(colmz.Updates({"k": [1]}, time=[0], diff=[1]))
    new = tmp_path / "new.sqlite"
    with pytest.raises(FileNotFoundError, match=r"consensus database '.*new.sqlite' does not exist.*create=False"):
        open_location(str(store), consensus=f"sqlite:///{new}", create=False)
    with pytest.raises(FileNotFoundError, match="nothing was created"):
        colmz.Arrangement.open(str(store), consensus=f"sqlite:///{new}", create=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_consensus(f"sqlite:///{new}", create=False)
    assert not new.exists() and sorted(os.listdir(tmp_path)) == ["store"]
    # a store directory without its consensus.sqlite, opened to read: nothing created either
    os.remove(store / "consensus.sqlite")
    with pytest.raises(FileNotFoundError, match="consensus.sqlite' does not exist"):
        colmz.Arrangement.open(str(store), create=False)
    assert not (store / "consensus.sqlite").exists()
    # creating opens still create it
    assert type(open_consensus(f"sqlite:///{new}")).__name__ == "SqliteConsensus" and new.exists()


def test_bad_local_paths(tmp_path, monkeypatch):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match=r"store path '.*file' .* is a file"):
        open_location(str(tmp_path / "file"))
    with pytest.raises(NotADirectoryError, match="lies under a file"):
        open_location(str(tmp_path / "file" / "sub"))
    with pytest.raises(FileNotFoundError, match=r"store path '.*missing' .* does not exist"):
        open_location(str(tmp_path / "missing"), create=False)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(ValueError, match="must be file:///absolute/path"):
        open_location("file://relative/path")
    with pytest.raises(ValueError, match="must not be empty"):
        open_location("")
    with pytest.raises(TypeError, match="store URL must be a str"):
        open_location(3)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_unwritable_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="is not writable"):
            open_location(str(ro))
    finally:
        ro.chmod(0o700)


def test_unwritable_directory_probe(tmp_path, monkeypatch):
    """The writability probe is a real file creation; its failure (a read-only mount, which
    even root cannot write) becomes a PermissionError naming the path."""
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(PermissionError, match=r"store path '.*' .* is not writable: .*Read-only"):
        open_location(str(tmp_path))


def test_mem_locations_are_shared_per_name():
    a = open_location("mem://test-url-a")
    assert isinstance(a.blob, MemBlob)
    assert open_location("mem://test-url-a").consensus is a.consensus
    assert open_location("mem://test-url-b").blob is not a.blob
    with pytest.raises(FileNotFoundError, match="'mem://never' does not exist"):
        open_location("mem://never", create=False)
    with pytest.raises(ValueError, match="has its own consensus"):
        open_location("mem://x", consensus="sqlite:///tmp/x.sqlite")


def test_unknown_schemes():
    with pytest.raises(ValueError, match="unknown store URL scheme 'gs' in 'gs://b/p'"):
        open_location("gs://b/p")
    with pytest.raises(ValueError, match="unknown consensus URL scheme 'mysql'"):
        open_consensus("mysql://x/y")
    with pytest.raises(ValueError, match="sqlite:///absolute/path"):
        open_consensus("sqlite://rel.sqlite")


def test_s3_needs_a_consensus():
    with pytest.raises(ValueError, match="s3:// store needs a consensus URL"):
        open_location("s3://bucket/prefix")


def test_missing_psycopg_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "colmz.storage.postgres", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'colmz\[postgres\]'"):
        open_consensus("postgresql://u@127.0.0.1:1/db")


def test_local_store_with_postgres_consensus(tmp_path, pg_url):
    from storage_servers import fresh_schema_url

    loc = open_location(str(tmp_path / "s"), consensus=fresh_schema_url(pg_url))
    assert type(loc.consensus).__name__ == "PostgresConsensus"
    assert "postgres@127.0.0.1" in repr(loc.consensus)


def test_s3_urls(s3_endpoint, tmp_path):
    url = s3_url(s3_endpoint, bucket="url-test")
    loc = open_location(url, consensus=f"sqlite:///{tmp_path}/c.sqlite")
    loc.blob.set("x/1", b"v")
    prefix = url.split("?")[0]
    assert loc.blob.url_of("x/1") == prefix + "/x/1"
    again = open_location(url, consensus=f"sqlite:///{tmp_path}/c.sqlite", create=False)
    assert again.blob.get("x/1") == b"v"
    with pytest.raises(FileNotFoundError, match="S3 bucket 'no-such-bucket'"):
        open_location(s3_url(s3_endpoint, bucket="no-such-bucket"), consensus=f"sqlite:///{tmp_path}/c.sqlite", create=False)
    with pytest.raises(ValueError, match="unknown S3 URL option 'colour'"):
        open_location(url + "&colour=red", consensus=f"sqlite:///{tmp_path}/c.sqlite")
    with pytest.raises(ValueError, match="holds credentials"):
        open_location("s3://key:secret@bucket/p", consensus=f"sqlite:///{tmp_path}/c.sqlite")
    with pytest.raises(ValueError, match="request_timeout='soon' is not a number"):
        open_location(url + "&request_timeout=soon", consensus=f"sqlite:///{tmp_path}/c.sqlite")


def test_parts_readable_by_pyarrow_dataset_on_both_blobs(s3_endpoint, tmp_path):
    """An outside reader opens parts by url_of (local) or path_of + filesystem (S3)."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    table = pa.table({"k": [1, 2, 3], "time": pa.array([0, 1, 2], pa.uint64()), "diff": [1, 1, -1]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    local = open_location(str(tmp_path / "s")).blob
    local.set("parts/a.parquet", sink.getvalue())
    assert ds.dataset([local.url_of("parts/a.parquet")], format="parquet").to_table().equals(table)
    s3 = open_location(s3_url(s3_endpoint), consensus=f"sqlite:///{tmp_path}/c.sqlite").blob
    s3.set("parts/a.parquet", sink.getvalue())
    got = ds.dataset([s3.path_of("parts/a.parquet")], format="parquet", filesystem=s3.filesystem).to_table()
    assert got.equals(table)


@pytest.mark.parametrize("bucket", ["..", ".", "..."])
def test_s3_dot_buckets_are_refused_before_any_request(tmp_path, monkeypatch, bucket):
    # Before: s3://.. was a bucket named '..' until the first request's raw S3 error.
    from pyarrow import fs as pafs

    def no_request(*a, **k):
        raise AssertionError("an S3 filesystem was made for a bad URL")

    monkeypatch.setattr(pafs, "S3FileSystem", no_request)
    url = f"s3://{bucket}/prefix"
    with pytest.raises(ValueError, match=re.escape(repr(url))):
        open_location(url, consensus=f"sqlite:///{tmp_path}/c.sqlite")
    with pytest.raises(ValueError, match="must be s3://bucket/prefix"):
        open_location("s3:///prefix", consensus=f"sqlite:///{tmp_path}/c.sqlite")
    from colmz.storage.s3 import S3Blob

    with pytest.raises(ValueError, match="only dots"):
        S3Blob(object(), bucket, "p")


def test_a_new_sqlite_file_in_the_filesystem_root_is_refused_by_the_library(tmp_path):
    # sqlite:///rel.sqlite names /rel.sqlite: the library refused nothing and created it there.
    name = f"colmz-test-{uuid.uuid4().hex}.sqlite"
    with pytest.raises(ValueError, match="filesystem root.*sqlite:///ABSOLUTE/PATH"):
        open_consensus(f"sqlite:///{name}")
    assert not os.path.exists(f"/{name}")
    with pytest.raises(ValueError, match="filesystem root"):
        colmz.Arrangement.open(str(tmp_path / "s"), consensus=f"sqlite:///{name}")
    assert not os.path.exists(f"/{name}")
    assert type(open_consensus(f"sqlite:///{tmp_path / 'c.sqlite'}")).__name__ == "SqliteConsensus"
