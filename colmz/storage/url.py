"""Open a store (a Blob and a Consensus) from a URL.

Design
------
A *location* is where one durable structure keeps its parts (Blob) and its versioned
metadata (Consensus). The URL forms:

* a plain path, or ``file:///abs/path``: one local directory holding ``blob/`` (a
  :class:`~colmz.storage.local.LocalBlob`) and ``consensus.sqlite`` (a
  :class:`~colmz.storage.sqlite.SqliteConsensus`): nothing to install, nothing to run;
* ``mem://name``: a process-global in-memory pair per name (tests, notebooks);
* ``s3://bucket/prefix?endpoint_override=http://host:port&region=...``: an S3 blob
  (:class:`~colmz.storage.s3.S3Blob`) with a *required* consensus URL, because an object
  store offers no compare-and-set: ``sqlite:///abs/path.sqlite`` or
  ``postgresql://user@host:port/db``.

``consensus=`` overrides the consensus of a local directory too (e.g. PostgreSQL for many
writers that share a network filesystem).

Errors name the offending value: an unknown scheme is ``ValueError``; a store path that is a
file ``NotADirectoryError``; an unwritable one ``PermissionError`` (with ``create=False`` an
unwritable store opens read-only: reads work, commits fail saying so); a missing one with
``create=False`` ``FileNotFoundError``, and so is a missing SQLite consensus database (opening
to read creates no file); a backend whose optional dependency is missing
``ImportError`` naming the extra to install.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass

from colmz.storage.base import Blob, Consensus, MemBlob, MemConsensus

__all__ = ["Location", "local_path", "open_blob", "open_consensus", "open_location", "sqlite_path"]


@dataclass(frozen=True)
class Location:
    """A store opened from ``url``: its ``blob`` and its ``consensus``."""

    blob: Blob
    consensus: Consensus
    url: str


_MEM: dict[str, tuple[MemBlob, MemConsensus]] = {}
_MEM_LOCK = threading.Lock()


def _check_dir(path: pathlib.Path, url: str, create: bool) -> pathlib.Path:
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"store path {str(path)!r} (from {url!r}) is a file, not a directory")
    if not path.exists():
        if not create:
            raise FileNotFoundError(f"store path {str(path)!r} (from {url!r}) does not exist")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except NotADirectoryError:
            raise NotADirectoryError(
                f"store path {str(path)!r} (from {url!r}) lies under a file"
            ) from None
        except PermissionError:
            raise PermissionError(
                f"store path {str(path)!r} (from {url!r}) cannot be created: permission denied"
            ) from None
    # os.access is not enough (root passes it on a read-only mount): probe with a real file.
    try:
        fd, probe = tempfile.mkstemp(prefix=".colmz-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        if not create:
            # Opening an existing store to read it: its consensus opens read-only
            # (colmz.storage.sqlite) and a write fails saying so.
            return path
        raise PermissionError(f"store path {str(path)!r} (from {url!r}) is not writable: {e} "
                              "(open it with create=False to read it)") from None
    return path


def _path_of_file_url(url: str) -> pathlib.Path:
    parsed = urllib.parse.urlsplit(url)
    if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
        raise ValueError(f"file URL {url!r} must be file:///absolute/path")
    return pathlib.Path(urllib.parse.unquote(parsed.path))


def local_path(url: str | os.PathLike) -> pathlib.Path | None:
    """The absolute directory of a local store URL (a plain path or ``file:///...``), or None
    for other schemes.

    >>> str(local_path("file:///data/store")), local_path("s3://bucket/x")
    ('/data/store', None)
    """
    url = os.fspath(url)
    scheme = urllib.parse.urlsplit(url).scheme if "://" in url else ""
    if scheme == "":
        return pathlib.Path(url).absolute()
    if scheme == "file":
        return _path_of_file_url(url)
    return None


def _need(extra: str, module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{what} needs an optional dependency ({e.name or e}): pip install 'colmz[{extra}]'"
        ) from e


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:///absolute/path`` consensus URL names.

    ``sqlite:///name.sqlite`` names a file in the filesystem root -- almost always a relative
    path was meant -- so a file there that does not exist yet is refused (with the absolute
    spelling) rather than created in ``/``.

    >>> sqlite_path("sqlite:///tmp/c.sqlite")
    '/tmp/c.sqlite'
    >>> sqlite_path("sqlite:///c.sqlite")
    Traceback (most recent call last):
    ...
    ValueError: 'sqlite:///c.sqlite' names '/c.sqlite', a file in the filesystem root; for a path relative to here write sqlite:///ABSOLUTE/PATH, e.g. sqlite:///$PWD/c.sqlite
    """
    parsed = urllib.parse.urlsplit(url)
    path = urllib.parse.unquote(parsed.path)
    if parsed.scheme != "sqlite" or parsed.netloc or not path.startswith("/"):
        raise ValueError(f"sqlite consensus URL {url!r} must be sqlite:///absolute/path")
    if pathlib.Path(path).parent == pathlib.Path("/") and not pathlib.Path(path).exists():
        raise ValueError(
            f"{url!r} names {path!r}, a file in the filesystem root; for a path relative to here "
            f"write sqlite:///ABSOLUTE/PATH, e.g. sqlite:///$PWD/{path[1:]}")
    return path


def open_consensus(url: str, *, create: bool = True) -> Consensus:
    """A Consensus from ``sqlite:///abs/path.sqlite`` or ``postgresql://user@host:port/db``.

    With ``create=False`` a missing SQLite database is ``FileNotFoundError`` and nothing is
    created (a store opened to read must not leave a new empty database behind).

    >>> import tempfile
    >>> c = open_consensus("sqlite:///" + tempfile.mkdtemp() + "/c.sqlite")
    >>> type(c).__name__
    'SqliteConsensus'
    >>> open_consensus("redis://x")
    Traceback (most recent call last):
    ...
    ValueError: unknown consensus URL scheme 'redis' in 'redis://x' (expected sqlite:/// or postgresql://)
    """
    if not isinstance(url, str):
        raise TypeError(f"consensus URL must be a str, got {url!r}")
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "sqlite":
        path = sqlite_path(url)
        from colmz.storage.sqlite import SqliteConsensus

        return SqliteConsensus(path, create=create)
    if scheme in ("postgresql", "postgres"):
        _need("postgres", "psycopg", "a postgresql:// consensus")
        from colmz.storage.postgres import PostgresConsensus

        return PostgresConsensus(url)
    raise ValueError(
        f"unknown consensus URL scheme {scheme!r} in {url!r} (expected sqlite:/// or postgresql://)"
    )


def open_location(url: str, *, consensus: str | None = None, create: bool = True) -> Location:
    """Open (and with ``create``, make) the store at ``url``; see the module docstring.

    Examples
    --------
    >>> import tempfile
    >>> loc = open_location(tempfile.mkdtemp() + "/store")
    >>> type(loc.blob).__name__, type(loc.consensus).__name__
    ('LocalBlob', 'SqliteConsensus')
    >>> open_location("mem://doc").blob is open_location("mem://doc").blob
    True
    >>> open_location("ftp://host/x")
    Traceback (most recent call last):
    ...
    ValueError: unknown store URL scheme 'ftp' in 'ftp://host/x' (expected a path, file://, mem:// or s3://)
    """
    if not isinstance(url, (str, os.PathLike)):
        raise TypeError(f"store URL must be a str or path, got {url!r}")
    url = os.fspath(url)
    if not url:
        raise ValueError("store URL must not be empty")
    scheme = urllib.parse.urlsplit(url).scheme if "://" in url else ""
    if scheme in ("", "file"):
        from colmz.storage.local import LocalBlob
        from colmz.storage.sqlite import SqliteConsensus

        path = _path_of_file_url(url) if scheme == "file" else pathlib.Path(url)
        root = _check_dir(path.absolute(), url, create)
        blob = LocalBlob(root / "blob")
        cons = open_consensus(consensus, create=create) if consensus is not None else SqliteConsensus(
            root / "consensus.sqlite", create=create
        )
        return Location(blob, cons, url)
    if scheme == "mem":
        if consensus is not None:
            raise ValueError(f"a mem:// store has its own consensus; got consensus={consensus!r}")
        name = url[len("mem://") :]
        with _MEM_LOCK:
            if name not in _MEM:
                if not create:
                    raise FileNotFoundError(f"in-memory store {url!r} does not exist")
                _MEM[name] = (MemBlob(name), MemConsensus())
            blob, cons = _MEM[name]
        return Location(blob, cons, url)
    if scheme == "s3":
        if consensus is None:
            raise ValueError(
                f"an s3:// store needs a consensus URL (an object store has no compare-and-set): "
                f"open_location({url!r}, consensus='sqlite:///abs/path.sqlite' or "
                f"'postgresql://user@host:port/db')"
            )
        # pyarrow (a core dependency) is the S3 client: nothing extra to install, unless
        # the pyarrow build lacks S3 (colmz.storage.s3 then says so).
        from colmz.storage.s3 import S3Blob

        blob = S3Blob.from_url(url, create=create)
        return Location(blob, open_consensus(consensus, create=create), url)
    raise ValueError(
        f"unknown store URL scheme {scheme!r} in {url!r} (expected a path, file://, mem:// or s3://)"
    )


def open_blob(url: str) -> Blob:
    """Only the Blob of the existing store at ``url`` (no consensus is opened).

    For processes that write or read parts but never commit metadata -- e.g. Spark executors,
    while the driver commits.

    >>> import tempfile
    >>> d = tempfile.mkdtemp() + "/store"
    >>> _ = open_location(d)
    >>> type(open_blob(d)).__name__
    'LocalBlob'
    """
    if not isinstance(url, (str, os.PathLike)):
        raise TypeError(f"store URL must be a str or path, got {url!r}")
    url = os.fspath(url)
    scheme = urllib.parse.urlsplit(url).scheme if "://" in url else ""
    if scheme in ("", "file"):
        from colmz.storage.local import LocalBlob

        path = _path_of_file_url(url) if scheme == "file" else pathlib.Path(url)
        return LocalBlob(_check_dir(path.absolute(), url, create=False) / "blob")
    if scheme == "s3":
        from colmz.storage.s3 import S3Blob

        return S3Blob.from_url(url, create=False)
    # mem:// and anything else: the full opener knows (and reports) them.
    return open_location(url, create=False).blob
