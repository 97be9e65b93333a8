"""PostgresConsensus: Consensus in a PostgreSQL table (many writers, many machines).

Design
------
One table ``colmz_consensus(key TEXT, seqno BIGINT, data BYTEA, PRIMARY KEY (key, seqno))``
holds every version of every record, as persist's ``src/persist/src/postgres.rs`` keeps its
``consensus`` table.

``compare_and_set`` is one transaction: it takes a transaction-scoped advisory lock on the
key (``pg_advisory_xact_lock`` of the key's 64-bit hash), reads the head seqno, compares it
with ``expected`` and inserts the new version. Under the default READ COMMITTED isolation
each statement sees every transaction committed before it started, and the advisory lock
makes the writers of one key take turns from the read to the commit, so of two writers that
both expect version ``v`` exactly one inserts -- whatever seqnos they propose (the primary
key alone would only catch two writers proposing the *same* seqno). Keys whose hashes
collide merely take turns too. ``truncate`` takes the same lock.

``compare_and_set_many`` (several keys, all or none) is one transaction too: it takes the
advisory lock of every key, in increasing order of the lock ids (so two of them, or one
and a single-key call, never wait for each other in a cycle), reads and compares every
head, and inserts all the versions only when all match -- one commit.

Each thread of each process uses its own connection; a connection inherited across ``fork``
is left untouched (closing it in the child would end the parent's session) and a new one is
opened.

Errors: a failure before ``COMMIT`` is sent raises :class:`~colmz.storage.base.Determinate`
(the transaction is rolled back); a connection failure while committing raises :class:`~colmz.storage.base.Indeterminate`, since the server may have committed. A
broken connection is discarded and the next call reconnects.

Invariants: those of :mod:`colmz.storage.base`.
"""

from __future__ import annotations

import contextlib
import os
import threading

import psycopg

from colmz.storage.base import (
    Determinate,
    Indeterminate,
    VersionedData,
    check_cas_args,
    check_cas_many,
    check_key,
)

__all__ = ["TABLE", "PostgresConsensus"]

#: The table every PostgresConsensus uses.
TABLE = "colmz_consensus"

_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    "key TEXT NOT NULL, seqno BIGINT NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (key, seqno))"
)
# Serialises schema creation across processes (CREATE TABLE IF NOT EXISTS can still race).
_SCHEMA_LOCK = 0x636F6C6D7A  # "colmz"
_LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"

# Connections inherited over fork: kept referenced so the child never closes (and thereby
# terminates) the parent's sessions.
_INHERITED: list[psycopg.Connection] = []


class PostgresConsensus:
    """Consensus records in the PostgreSQL database at ``url`` (``postgresql://...``).

    Parameters
    ----------
    url : str
        A libpq connection URL, e.g. ``postgresql://colmz@127.0.0.1:5432/colmz``.
    connect_timeout : float
        Seconds to wait for a connection (a timeout is a Determinate error).

    Examples
    --------
    With a server (``tests/storage_servers.py`` starts one on loopback):

    >>> c = PostgresConsensus("postgresql://postgres@127.0.0.1:5432/colmz")  # doctest: +SKIP
    >>> c.compare_and_set("s", None, VersionedData(1, b"a"))  # doctest: +SKIP
    True

    A wrong URL needs none:

    >>> PostgresConsensus("mysql://db")
    Traceback (most recent call last):
    ...
    ValueError: PostgreSQL consensus URL must start with postgresql://, got 'mysql://db'
    """

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"PostgreSQL consensus URL must start with postgresql://, got {url!r}")
        self.url = url
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        conn = self._conn()
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute(_SCHEMA)
        except psycopg.Error as e:
            self._discard()
            raise Determinate(f"consensus database {self._where()}: {e}") from e

    def _where(self) -> str:
        # The URL without a password.
        try:
            info = psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.Error:
            return "(unparseable URL)"
        return f"{info.get('user', '')}@{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"

    def __repr__(self) -> str:
        return f"PostgresConsensus({self._where()!r})"

    def _conn(self) -> psycopg.Connection:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid != os.getpid():
            _INHERITED.append(conn)
            conn = None
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout))
                )
            except psycopg.Error as e:
                raise Determinate(f"cannot connect to consensus database {self._where()}: {e}") from e
            local.conn, local.pid = conn, os.getpid()
        return conn

    def _discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            with contextlib.suppress(psycopg.Error):
                conn.close()
        self._local.__dict__.clear()

    def close(self) -> None:
        """Close this thread's connection."""
        self._discard()

    def _read(self, sql: str, args: tuple) -> list[tuple]:
        conn = self._conn()
        try:
            return conn.execute(sql, args).fetchall()
        except psycopg.Error as e:
            if conn.broken:
                self._discard()
            raise Determinate(f"consensus read from {self._where()}: {e}") from e

    def head(self, key: str) -> VersionedData | None:
        rows = self._read(
            f"SELECT seqno, data FROM {TABLE} WHERE key = %s ORDER BY seqno DESC LIMIT 1",
            (check_key(key),),
        )
        return VersionedData(rows[0][0], bytes(rows[0][1])) if rows else None

    def scan(self, key: str, from_seqno: int = 0, limit: int | None = None) -> list[VersionedData]:
        check_key(key)
        rows = self._read(
            f"SELECT seqno, data FROM {TABLE} WHERE key = %s AND seqno >= %s "
            "ORDER BY seqno LIMIT %s",
            (key, int(from_seqno), limit),
        )
        return [VersionedData(s, bytes(d)) for s, d in rows]

    def _write(self, key: str, what: str, body, *, keys: list[str] | None = None):
        """Run ``body(conn)`` in a transaction holding the advisory lock of ``key`` (or of
        every one of ``keys``, taken in increasing order of lock id)."""
        conn = self._conn()
        committing = False
        try:
            conn.execute("BEGIN")
            try:
                if keys is None:
                    conn.execute(_LOCK_KEY, (key,))
                else:
                    ids = conn.execute(
                        "SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest(%s::text[]) AS k ORDER BY h",
                        (keys,),
                    ).fetchall()
                    for (lock_id,) in ids:
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id,))
                result = body(conn)
            except BaseException:
                if not conn.broken:
                    conn.execute("ROLLBACK")
                raise
            committing = True
            conn.execute("COMMIT")
            return result
        except psycopg.Error as e:
            broken = conn.broken
            if broken:
                self._discard()
            if committing and (broken or isinstance(e, psycopg.OperationalError)):
                # The server may have committed before the connection failed.
                raise Indeterminate(
                    f"consensus {what} {key!r} in {self._where()}: COMMIT failed: {e}"
                ) from e
            raise Determinate(f"consensus {what} {key!r} in {self._where()}: {e}") from e

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_key(key)
        check_cas_args(expected, new)
        data = bytes(new.data)

        def body(conn: psycopg.Connection) -> bool:
            current = conn.execute(
                f"SELECT max(seqno) FROM {TABLE} WHERE key = %s", (key,)
            ).fetchone()[0]
            if current != expected:
                return False
            conn.execute(
                f"INSERT INTO {TABLE} (key, seqno, data) VALUES (%s, %s, %s)",
                (key, new.seqno, data),
            )
            return True

        return bool(self._write(key, "compare_and_set", body))

    def compare_and_set_many(self, ops) -> bool:
        """All of ``ops`` -- ``(key, expected, new)`` of distinct keys -- or none, in one
        transaction (module docstring; ``colmz.storage.base``, invariant 5)."""
        ops = check_cas_many(ops)
        if not ops:
            return True
        keys = [key for key, _, _ in ops]

        def body(conn: psycopg.Connection) -> bool:
            heads = dict(conn.execute(
                f"SELECT key, max(seqno) FROM {TABLE} WHERE key = ANY(%s) GROUP BY key", (keys,)
            ).fetchall())
            if any(heads.get(key) != expected for key, expected, _ in ops):
                return False
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {TABLE} (key, seqno, data) VALUES (%s, %s, %s)",
                    [(key, new.seqno, bytes(new.data)) for key, _, new in ops],
                )
            return True

        return bool(self._write(", ".join(sorted(keys)), "compare_and_set_many", body, keys=keys))

    def truncate(self, key: str, seqno: int) -> int:
        check_key(key)

        def body(conn: psycopg.Connection) -> int:
            cur = conn.execute(
                f"DELETE FROM {TABLE} WHERE key = %s AND seqno < %s AND seqno < "
                f"(SELECT max(seqno) FROM {TABLE} WHERE key = %s)",
                (key, int(seqno), key),
            )
            return cur.rowcount

        return int(self._write(key, "truncate", body))

    def keys(self) -> list[str]:
        """Every key with at least one version, sorted."""
        return [r[0] for r in self._read(f"SELECT DISTINCT key FROM {TABLE} ORDER BY key", ())]
