"""PostgreSQL 15 as the oracle of ``colmz.Catalog.sql``: one query run in both and compared.

Shared by the dialect corpus (``tests/colmz/test_sql_dialect.py``) and the generated queries
(``tests/colmz/test_sql_generated.py``). :func:`open_both` makes a PostgreSQL connection
(a fresh schema of the process's one test server, ``storage_servers.postgres_url``) and an
in-memory catalog holding the same rows (``sql_corpus.SETUP``); :func:`outcome` runs a
query in both and classifies it:

* **match** -- the same output column names and the same values (in order when a top-level
  ``ORDER BY`` fixes it, else as multisets; floats within 1e-9 relative, PostgreSQL
  ``numeric`` read as a float, intervals as ``psycopg`` reads them: a year is 365 days, a month 30);
* **refused** -- colmz raises ``UnsupportedSQL`` (an honest "not supported", never an answer);
* **both fail** -- PostgreSQL raises, and so does colmz;
* **wrong** -- a different answer (or PostgreSQL raises and colmz answers);
  **raw** -- an error that is not ``UnsupportedSQL`` while PostgreSQL answers.

The oracle never skips silently in CI: when the ``CI`` environment variable is set
(``.ci/run`` sets it), a missing ``psycopg`` or a server that cannot start fails the test.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os

import pytest
import storage_servers

#: In CI the oracle must run: what would skip it elsewhere fails it there.
IN_CI = bool(os.environ.get("CI"))


def require(module: str, reason: str):
    """``module`` imported; outside CI a missing one skips the calling test module."""
    if IN_CI:
        try:
            return __import__(module)
        except ImportError as e:
            raise RuntimeError(f"CI is set, so the PostgreSQL oracle must run: {reason} ({e})") from e
    return pytest.importorskip(module, reason=reason)


def oracle_url() -> str:
    """The process's PostgreSQL test server (started on first use); with ``CI`` set, a
    server that cannot start fails the calling test instead of skipping it."""
    try:
        return storage_servers.postgres_url()
    except pytest.skip.Exception as e:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the PostgreSQL oracle must run, but: {e.msg}", pytrace=False)
        raise


def jsonb_text_connection():
    """A PostgreSQL connection (autocommit, its own fresh schema) reading jsonb as the text
    PostgreSQL prints (the canonical text colmz keeps)."""
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    conn = psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True)
    conn.adapters.register_loader("jsonb", psycopg.types.string.TextLoader)
    return conn


def fresh_connection():
    """A PostgreSQL connection (autocommit) on its own fresh schema of the oracle server."""
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    return psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True)


@pytest.fixture(scope="module")
def pg():
    """A PostgreSQL 15 connection (autocommit) on its own fresh schema, for one test module
    (a fixture of the whole tree: tests/conftest.py imports it)."""
    conn = fresh_connection()
    yield conn
    conn.close()


def catalog_beside(conn, setup, drop=()):
    """``(conn, cat)``: a new ``colmz.Catalog`` and the PostgreSQL connection ``conn``, the
    tables ``drop`` dropped there first (a module's earlier run), then ``setup``'s statements
    run in both."""
    import colmz

    if drop:
        conn.execute(f"DROP TABLE IF EXISTS {', '.join(drop)}")
    cat = colmz.Catalog()
    for s in setup:
        conn.execute(s)
        cat.execute(s)
    return conn, cat


def views_equal_postgres(conn, tables, bodies, script) -> int:
    """Create ``tables`` and each of ``bodies`` as a view in PostgreSQL (``conn``) and as a
    materialized view of a colmz catalog kept incrementally, then, after creation and after
    each step of ``script`` (statements joined by ``"; "``), assert every view holds the same
    rows (as multisets, numerics as floats) under the same column names. Returns the number
    of comparisons made."""
    import colmz

    conn.execute("DROP TABLE IF EXISTS t, u, r CASCADE")
    cat = colmz.Catalog(views="incremental")
    for s in tables:
        conn.execute(s)
        cat.execute(s)
    names = [f"n{i}" for i in range(len(bodies))]
    for n, b in zip(names, bodies):
        conn.execute(f"CREATE VIEW {n} AS {b}")
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    compared = 0
    for step in ["creation", *script]:
        if step != "creation":
            for s in step.split("; "):
                conn.execute(s)
            cat.execute(step)
        for n, b in zip(names, bodies):
            got = cat.sql(f"SELECT * FROM {n}")
            cur = conn.execute(f"SELECT * FROM {n}")
            want = _view_rows([d.name for d in cur.description], cur.fetchall())
            assert _view_rows(got.column_names, zip(*(c.to_pylist() for c in got.columns))) == want, (b, step)
            compared += 1
    return compared


def _view_rows(names, rows):
    # numerics as floats; an aware timestamp in one zone class (psycopg's timezone.utc,
    # Arrow's ZoneInfo("UTC"): the same instant, another repr)
    def plain(x):
        if hasattr(x, "as_integer_ratio") and not isinstance(x, (int, bool)):
            return float(x)
        return x.astimezone(datetime.UTC) if isinstance(x, datetime.datetime) and x.tzinfo else x

    return list(names), sorted(repr(tuple(plain(x) for x in r)) for r in rows)


def both_fixture(extra_setup=()):
    """A module-scoped fixture of :func:`open_both` with ``extra_setup``: ``(conn, cat)``,
    the connection closed after the module; assign it to the module's ``both``."""
    @pytest.fixture(scope="module")
    def both():
        require("psycopg", "the PostgreSQL oracle needs psycopg")
        conn, cat = open_both(extra_setup)
        yield conn, cat
        conn.close()

    return both


def open_both(extra_setup=()):
    """``(conn, cat)``: a PostgreSQL connection (autocommit, its own fresh schema) and a
    ``colmz.Catalog``, both holding :data:`sql_corpus.SETUP`'s tables and rows, then
    ``extra_setup``'s statements run in both."""
    import psycopg
    from sql_corpus import SETUP
    from storage_servers import fresh_schema_url

    import colmz

    conn = psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True)
    # jsonb is compared as the text PostgreSQL prints (key order, spacing, quoted strings).
    for name in ("json", "jsonb"):
        conn.adapters.register_loader(name, psycopg.types.string.TextLoader)
    conn.adapters.register_loader("float4", _float4_loader())
    cat = colmz.Catalog()
    for stmt in (*SETUP, *extra_setup):
        conn.execute(stmt)
        cat.execute(stmt)
    return conn, cat


def _float4_loader():
    import numpy as np
    import psycopg

    class Float4Loader(psycopg.adapt.Loader):
        """A real as the float32 it is (PostgreSQL prints its shortest digits, which read
        as a double are another value than the float32's: 26.083334 for 26.08333396911621)."""

        def load(self, data):
            return float(np.float32(bytes(data).decode()))

    return Float4Loader


def norm(v):
    """A value as compared: numeric as float, NaN as a string, Arrow's interval as psycopg's."""
    if isinstance(v, decimal.Decimal):
        return norm(float(v))  # (numeric NaN as a float's)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if type(v).__name__ == "MonthDayNano":  # Arrow's interval: read as psycopg reads one
        # (a year is 365 days, a month 30)
        days = v.months // 12 * 365 + v.months % 12 * 30 + v.days if v.months >= 0 \
            else -(-v.months // 12 * 365 + -v.months % 12 * 30) + v.days
        return datetime.timedelta(days=days, microseconds=v.nanoseconds // 1000)
    if isinstance(v, (list, tuple)):
        return tuple(norm(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def same(a, b) -> bool:
    """Equal values: numbers within 1e-9 relative, booleans only to booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def bag(rows) -> list[tuple]:
    """Rows as a sorted list of normalized tuples: a bag to compare with :func:`bags_equal`."""
    return sorted((tuple(norm(x) for x in r) for r in rows), key=repr)


def bags_equal(a: list[tuple], b: list[tuple]) -> bool:
    """Equal bags of rows, values compared by :func:`same`."""
    rest = list(b)
    for x in a:
        i = next((i for i, y in enumerate(rest) if same(x, y)), None)
        if i is None:
            return False
        del rest[i]
    return not rest


def ordered(sql: str) -> bool:
    """Whether a top-level ORDER BY (after the last closing parenthesis) fixes the row order."""
    return " ORDER BY " in sql.upper().rsplit(")", 1)[-1]


def run_pg(conn, sql):
    """``(names, rows)`` of ``sql`` in PostgreSQL, ``None`` when it raises."""
    import psycopg

    try:
        cur = conn.execute(sql)
    except psycopg.Error:
        return None
    return [d.name for d in cur.description], [tuple(norm(x) for x in r) for r in cur.fetchall()]


def run_colmz(cat, sql):
    """``(names, rows)`` of ``sql`` in colmz (raises what colmz raises)."""
    table = cat.sql(sql)
    rows = [tuple(norm(x) for x in r) for r in zip(*(c.to_pylist() for c in table.columns))]
    return table.column_names, rows


def outcome(conn, cat, sql) -> tuple[str, str]:
    """``(kind, detail)``: ``match``, ``refused``, ``both fail``, ``wrong`` or ``raw``."""
    from colmz.sql import UnsupportedSQL

    expected = run_pg(conn, sql)
    try:
        got = run_colmz(cat, sql)
    except UnsupportedSQL as e:
        return "refused", str(e)
    except Exception as e:  # noqa: BLE001 - classified below
        return ("both fail" if expected is None else "raw"), f"{type(e).__name__}: {e}"
    if expected is None:
        return "wrong", f"PostgreSQL raises, colmz answers {got}"
    (pnames, prows), (cnames, crows) = expected, got
    if pnames != cnames:
        return "wrong", f"columns {cnames}, PostgreSQL {pnames}"
    if not ordered(sql):
        prows, crows = sorted(prows, key=repr), sorted(crows, key=repr)
    if len(prows) != len(crows) or not all(same(a, b) for a, b in zip(prows, crows)):
        return "wrong", f"rows {crows[:5]}, PostgreSQL {prows[:5]}"
    return "match", ""
