"""SqliteConsensus: Consensus in one SQLite file (the embedded default; nothing to install).

Design
------
One table ``consensus(key TEXT, seqno INTEGER, data BLOB, PRIMARY KEY (key, seqno))`` holds
every version of every record. The database runs in WAL mode with ``synchronous=FULL``, so a
committed transaction survives power loss and readers never block the writer.

``compare_and_set`` is one ``BEGIN IMMEDIATE`` transaction: it takes SQLite's write lock
first, then reads the head seqno, compares it with ``expected`` and inserts the new version.
Because the write lock is held from the read to the insert, two writers -- threads or
processes -- cannot both see the same head and both insert: exactly one wins each version
(the primary key would reject a second row with the same seqno anyway).

**Group commit.** Compare-and-sets that threads of one process make at the same time (a
catalog applying a commit to each of its arrangements side by side) commit together: the
first to come leads, and runs every one waiting when its transaction begins -- its own
first, each compared and inserted in turn, as if one after the other -- in one transaction,
one ``COMMIT`` and so one fsync of the log; the others wait for it, then each returns its own
outcome. Those arriving meanwhile form the next group, led by the first of them. A failed
transaction fails each call of its group as that call alone would have failed (rolled back:
``Determinate``; at ``COMMIT``: ``Indeterminate``). A lone call is one transaction, as
before.

``compare_and_set_many`` (several keys, all or none) is one ``BEGIN IMMEDIATE``
transaction of its own: every head is read and compared under the write lock, and only
when all match are the versions inserted -- one ``COMMIT``, one fsync, whatever the number
of keys. It does not join a group: it is already the one transaction of its caller.

A database that cannot be written -- its file, or its directory (WAL mode needs to create
the ``-wal`` and ``-shm`` files beside it), is not writable -- is opened **read-only**:
with SQLite's ``mode=ro`` while a write-ahead log is present (its committed transactions are
read from it), else ``immutable=1`` (no lock and no ``-shm`` file needed: nothing can write
the database meanwhile without write access). Reads work; ``compare_and_set`` and
``truncate`` raise :class:`~colmz.storage.base.Determinate` saying the database is read-only.

Each thread of each process opens its own connection (SQLite connections must not cross
threads, and must not survive a ``fork``); a busy timeout makes a writer wait for the lock
instead of failing at once.

Invariants: those of :mod:`colmz.storage.base`. Errors: a failure before ``COMMIT`` rolls
back and raises :class:`~colmz.storage.base.Determinate`; a failure *at* ``COMMIT`` raises
:class:`~colmz.storage.base.Indeterminate`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import threading
import time

from colmz.storage.base import (
    Determinate,
    Indeterminate,
    VersionedData,
    check_cas_args,
    check_cas_many,
    check_key,
)

__all__ = ["SqliteConsensus"]

# Connections inherited over fork: kept referenced so the child never closes them (closing
# one could checkpoint and remove the write-ahead log the parent is still using).
_INHERITED: list[sqlite3.Connection] = []

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS consensus ("
    "key TEXT NOT NULL, seqno INTEGER NOT NULL, data BLOB NOT NULL, "
    "PRIMARY KEY (key, seqno)) WITHOUT ROWID"
)


class _Cas:
    """One compare-and-set waiting to run in a group (``SqliteConsensus.compare_and_set``)."""

    __slots__ = ("key", "expected", "seqno", "data", "done", "lead", "result", "error")

    def __init__(self, key: str, expected: int | None, seqno: int, data: bytes) -> None:
        self.key, self.expected, self.seqno, self.data = key, expected, seqno, data
        self.done = threading.Event()
        self.lead = False  # woken to lead the next group rather than with an outcome
        self.result: bool | None = None
        self.error: BaseException | None = None

    def outcome(self, own: bool = False) -> bool:
        """Its result, or its group's error raised (a copy of it in a thread that did not
        run the group: one exception object is not raised in two threads)."""
        e = self.error
        if e is not None:
            if own:
                raise e
            try:
                copy = type(e)(str(e))
            except Exception:  # noqa: BLE001 - an error type built otherwise: a storage error
                copy = (Indeterminate if isinstance(e, Indeterminate) else Determinate)(str(e))
            raise copy from e
        return bool(self.result)


class _Group:
    """The compare-and-sets of one process's threads on one database waiting to commit
    together: one leader runs all that wait in one transaction, the others wait for it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.lock = threading.Lock()
        self.pending: list[_Cas] = []
        self.leading = False


def _writable(path: pathlib.Path) -> bool:
    """Whether a WAL database at ``path`` can be written: the file (when present) and its
    directory (for the ``-wal``/``-shm`` files). ``os.access`` answers for permissions and
    for read-only mounts (EROFS) alike."""
    if path.exists() and not os.access(path, os.W_OK):
        return False
    return os.access(path.parent, os.W_OK | os.X_OK)


class SqliteConsensus:
    """Consensus records in the SQLite database file ``path`` (created when missing).

    Parameters
    ----------
    path : str or os.PathLike
        The database file; its directory must exist.
    busy_timeout : float
        Seconds a call waits for another writer's lock before failing (Determinate).
    read_only : bool, optional
        Open without writing anything (module docstring); by default, exactly when the file
        or its directory is not writable.
    create : bool
        Create the database when it is missing (the default); False refuses a missing file
        with ``FileNotFoundError`` and creates nothing (a store opened to read).

    Examples
    --------
    >>> import os, tempfile
    >>> c = SqliteConsensus(os.path.join(tempfile.mkdtemp(), "c.sqlite"))
    >>> c.compare_and_set("s", None, VersionedData(1, b"a")), c.compare_and_set("s", None, VersionedData(1, b"b"))
    (True, False)
    >>> c.head("s")
    VersionedData(seqno=1, data=b'a')
    """

    def __init__(self, path: str | os.PathLike, *, busy_timeout: float = 30.0,
                 read_only: bool | None = None, create: bool = True) -> None:
        p = pathlib.Path(path)
        if p.is_dir():
            raise IsADirectoryError(f"consensus database path {str(p)!r} is a directory")
        if not p.parent.is_dir():
            raise FileNotFoundError(f"directory of consensus database {str(p)!r} does not exist")
        self.path = p.resolve()
        if not create and not self.path.is_file():
            raise FileNotFoundError(
                f"consensus database {str(self.path)!r} does not exist; it was opened to read "
                "(create=False), so nothing was created: give the path of the store's existing "
                "consensus database")
        self.busy_timeout = float(busy_timeout)
        if read_only is None:
            read_only = not _writable(self.path)
        if read_only and not self.path.is_file():
            raise FileNotFoundError(
                f"consensus database {str(self.path)!r} does not exist and cannot be created "
                "(its directory is not writable)")
        self.read_only = bool(read_only)
        self._local = threading.local()
        self._groups: _Group | None = None
        #: ``commits``: write transactions committed (each one fsync of the log); several
        #: threads' compare-and-sets waiting together commit in one
        self.stats = {"commits": 0}
        self._stats_lock = threading.Lock()
        conn = self._conn()
        try:
            if self.read_only:
                self._has_table = bool(conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'consensus'").fetchall())
            else:
                conn.execute(_SCHEMA)
                self._has_table = True
        except sqlite3.Error as e:
            raise Determinate(f"consensus database {str(self.path)!r}: {e}") from e

    def __repr__(self) -> str:
        ro = ", read_only=True" if self.read_only else ""
        return f"SqliteConsensus({str(self.path)!r}{ro})"

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            if getattr(local, "conn", None) is not None:
                _INHERITED.append(local.conn)
            try:
                if self.read_only:
                    # A log beside the file holds committed transactions: read through it
                    # (mode=ro); without one the file is the whole database (immutable).
                    wal = self.path.with_name(self.path.name + "-wal")
                    opts = "mode=ro" if wal.exists() and wal.stat().st_size else "immutable=1"
                    conn = sqlite3.connect(
                        f"{self.path.as_uri()}?{opts}", uri=True, timeout=self.busy_timeout,
                        isolation_level=None, check_same_thread=True,
                    )
                    conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
                else:
                    conn = sqlite3.connect(
                        self.path, timeout=self.busy_timeout, isolation_level=None,
                        check_same_thread=True,
                    )
                    conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
                    mode = self._enable_wal(conn)
                    if mode.lower() != "wal":
                        raise sqlite3.OperationalError(f"could not enable WAL mode (got {mode})")
                    conn.execute("PRAGMA synchronous=FULL")
            except sqlite3.Error as e:
                raise Determinate(f"consensus database {str(self.path)!r}: {e}") from e
            local.conn, local.pid = conn, os.getpid()
        return local.conn

    def _enable_wal(self, conn: sqlite3.Connection) -> str:
        # The journal mode is recorded in the database file, so a connection only reads it
        # once anyone has set it. Setting it needs an exclusive lock, and while other
        # processes are creating or converting the same new file at that moment SQLite
        # answers "database is locked" at once instead of calling the busy handler (two
        # processes opening one new store together hit it a few times in a hundred): such
        # an answer is retried, with backoff, until the busy timeout has passed.
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if mode.lower() == "wal":
                    return mode
                return conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.05)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.__dict__.clear()

    def _read(self, sql: str, args: tuple) -> list[tuple]:
        if not self._has_table:  # a read-only database no record was ever written to
            return []
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise Determinate(f"consensus read from {str(self.path)!r}: {e}") from e

    def head(self, key: str) -> VersionedData | None:
        rows = self._read(
            "SELECT seqno, data FROM consensus WHERE key = ? ORDER BY seqno DESC LIMIT 1",
            (check_key(key),),
        )
        return VersionedData(rows[0][0], bytes(rows[0][1])) if rows else None

    def scan(self, key: str, from_seqno: int = 0, limit: int | None = None) -> list[VersionedData]:
        check_key(key)
        rows = self._read(
            "SELECT seqno, data FROM consensus WHERE key = ? AND seqno >= ? "
            "ORDER BY seqno LIMIT ?",
            (key, int(from_seqno), -1 if limit is None else int(limit)),
        )
        return [VersionedData(s, bytes(d)) for s, d in rows]

    def _write(self, key: str, what: str, body) -> object:
        if self.read_only:
            raise Determinate(
                f"consensus {what} {key!r}: the database {str(self.path)!r} is opened read-only "
                "(it or its directory is not writable); nothing was written")
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise Determinate(f"consensus {what} {key!r} in {str(self.path)!r}: {e}") from e
        try:
            result, changed = body(conn)
        except BaseException as e:
            conn.execute("ROLLBACK")
            if isinstance(e, sqlite3.Error):
                raise Determinate(f"consensus {what} {key!r} in {str(self.path)!r}: {e}") from e
            raise
        if not changed:
            conn.execute("ROLLBACK")
            return result
        try:
            conn.execute("COMMIT")
            with self._stats_lock:
                self.stats["commits"] += 1
        except sqlite3.Error as e:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise Indeterminate(
                f"consensus {what} {key!r} in {str(self.path)!r}: COMMIT failed: {e}"
            ) from e
        return result

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_key(key)
        check_cas_args(expected, new)
        req = _Cas(key, expected, new.seqno, bytes(new.data))
        group = self._group()
        with group.lock:
            group.pending.append(req)
            lead = not group.leading
            group.leading = True
        if not lead:
            req.done.wait()  # the leader runs it in its transaction, or hands it the lead
            if not req.lead:
                return req.outcome()
        # The leader: every compare-and-set waiting now (its own first) in one transaction.
        with group.lock:
            batch, group.pending = group.pending, []
        try:
            self._run_group(batch)
        finally:
            with group.lock:
                if group.pending:  # arrived meanwhile: the first of them leads the next group
                    nxt = group.pending[0]
                    nxt.lead = True
                    nxt.done.set()
                else:
                    group.leading = False
            for r in batch:
                if r is not req:
                    r.done.set()
        return req.outcome(own=True)

    def _group(self) -> _Group:
        # One group per process (a fork's child starts with none of its parent's threads).
        group = self._groups
        if group is None or group.pid != os.getpid():
            group = self._groups = _Group(os.getpid())
        return group

    def _run_group(self, batch: list[_Cas]) -> None:
        """Run ``batch``'s compare-and-sets in order in one transaction (one ``COMMIT``, one
        fsync of the log); each one's outcome, or the error of the transaction, is set on it."""
        keys = ", ".join(sorted({r.key for r in batch}))

        def body(conn: sqlite3.Connection) -> tuple[None, bool]:
            changed = False
            for r in batch:
                current = conn.execute(
                    "SELECT max(seqno) FROM consensus WHERE key = ?", (r.key,)
                ).fetchone()[0]
                r.result = current == r.expected
                if r.result:
                    conn.execute(
                        "INSERT INTO consensus (key, seqno, data) VALUES (?, ?, ?)",
                        (r.key, r.seqno, r.data),
                    )
                    changed = True
            return None, changed

        try:
            self._write(keys, "compare_and_set", body)
        except BaseException as e:
            for r in batch:
                # each waiting thread raises an error of its own; the leader interrupted
                # (not an Exception) may or may not have committed the others
                r.error = e if isinstance(e, Exception) else Indeterminate(
                    f"consensus compare_and_set {r.key!r} in {str(self.path)!r}: the thread "
                    f"committing it in a group was interrupted ({type(e).__name__})")
            if len(batch) == 1 or not isinstance(e, Exception):
                raise

    def compare_and_set_many(self, ops) -> bool:
        """All of ``ops`` -- ``(key, expected, new)`` of distinct keys -- or none, in one
        transaction (module docstring; ``colmz.storage.base``, invariant 5).

        >>> import os, tempfile
        >>> c = SqliteConsensus(os.path.join(tempfile.mkdtemp(), "c.sqlite"))
        >>> c.compare_and_set_many([("a", None, VersionedData(1, b"x")), ("b", None, VersionedData(1, b"y"))])
        True
        >>> c.compare_and_set_many([("a", 1, VersionedData(2, b"x")), ("b", 5, VersionedData(6, b"y"))])
        False
        >>> c.head("a").seqno, c.head("b").seqno
        (1, 1)
        """
        ops = check_cas_many(ops)
        if not ops:
            return True
        rows = [(key, expected, new.seqno, bytes(new.data)) for key, expected, new in ops]

        def body(conn: sqlite3.Connection) -> tuple[bool, bool]:
            for key, expected, _, _ in rows:
                current = conn.execute(
                    "SELECT max(seqno) FROM consensus WHERE key = ?", (key,)
                ).fetchone()[0]
                if current != expected:
                    return False, False
            conn.executemany(
                "INSERT INTO consensus (key, seqno, data) VALUES (?, ?, ?)",
                [(key, seqno, data) for key, _, seqno, data in rows],
            )
            return True, True

        return bool(self._write(", ".join(sorted(k for k, *_ in rows)), "compare_and_set_many", body))

    def truncate(self, key: str, seqno: int) -> int:
        check_key(key)

        def body(conn: sqlite3.Connection) -> tuple[int, bool]:
            cur = conn.execute(
                "DELETE FROM consensus WHERE key = ? AND seqno < ? AND seqno < "
                "(SELECT max(seqno) FROM consensus WHERE key = ?)",
                (key, int(seqno), key),
            )
            return cur.rowcount, cur.rowcount > 0

        return int(self._write(key, "truncate", body))

    def keys(self) -> list[str]:
        """Every key with at least one version, sorted."""
        return [r[0] for r in self._read("SELECT DISTINCT key FROM consensus ORDER BY key", ())]
