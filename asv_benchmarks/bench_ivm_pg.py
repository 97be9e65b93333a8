"""colmz's views kept by delta rules beside PostgreSQL's pg_ivm (``create_immv``), in one run.

The tables, views and changes are :mod:`bench_ivm`'s: ``t(k bigint, v bigint)`` of ``n`` rows
in ``n / 10`` groups, ``u(uk bigint, w bigint)`` one row per key (:func:`bench_ivm.tables`);
the changes of :func:`bench_ivm.all_batches` -- one row inserted, one row of the initial table
deleted, one updated, 1 % of ``n`` rows inserted -- each committed alone, the same rows given
to colmz and to PostgreSQL. Per view, change kind and size:

* colmz in memory and durable: commit with the view minus commit without
  (:func:`bench_ivm.measure_catalog`, lower quartiles of interleaved commits);
* pg_ivm: the same difference on one PostgreSQL server -- a schema ``plain`` holding ``t`` and
  ``u`` and a schema ``ivm`` holding the same tables and the view made by
  ``pgivm.create_immv('mv', query)``; each change is one autocommit statement sent from this
  process, timed here (so the figure includes the client round trip, on both sides of the
  difference), the two schemas' statements interleaved; lower quartiles
  (:data:`bench_ivm.QUANTILE`);
* ``pg ok`` -- 1 when, after the changes of every kind, the view pg_ivm kept holds exactly the
  rows PostgreSQL computes from its query (``EXCEPT ALL`` both ways); ``ok`` -- colmz's view
  equals DuckDB's answer after the changes of that kind (:func:`bench_ivm.matches`).

PostgreSQL gets what pg_ivm needs to do its best: ``u(uk)`` is a primary key and ``t(k)``
indexed (in both schemas, so the difference holds only the view's work), the view made by
``create_immv`` gets pg_ivm's own unique index where it makes one (GROUP BY, DISTINCT) and an
index on ``k`` otherwise (pg_ivm finds the view's rows to delete by its columns), and every
table is analysed before the timed commits. A delete or update finds one row of ``t`` equal
to the changed one (``ctid`` of the first match), as a client holding no row id would. A view
that pg_ivm refuses (``DISTINCT ON``, window functions, an outer join whose condition is more
than one equality) is reported as refused, with its message, never timed. The server is
:class:`storage_servers.PostgresServer` (the tests' throwaway cluster on loopback, with
``fsync=off``; ``--pg-fsync`` turns it back on), with ``shared_preload_libraries = 'pg_ivm'``
(pg_ivm's own instruction) and :data:`PG_SETTINGS`.

Installing pg_ivm (it is not part of colmz, nor built by it). From pg_ivm's own release
(``https://github.com/sraoss/pg_ivm/releases``, 1.15 for the figures of this file) and the
server headers of the installed PostgreSQL (Debian: ``apt-get install postgresql-15
postgresql-server-dev-15``)::

    cd pg_ivm-1.15
    make USE_PGXS=1 PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
    make USE_PGXS=1 PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config install

When it is not installed (:func:`pg_ivm_missing` names what is missing: ``initdb`` or
``pg_ctl``, psycopg, or ``pg_ivm.control`` under ``pg_config --sharedir``), the pg_ivm
columns are not measured: the hand run prints why and leaves them out, ``IvmPg`` skips.

By hand (heavy from 1 M rows: run it under ``flock /tmp/colmz_heavy.lock``)::

    python asv_benchmarks/bench_ivm_pg.py N [view ...] [--changes insert,delete]
        [--no-colmz] [--no-durable] [--pg-fsync]

with asv: ``asv run --python=same --bench bench_ivm_pg``.
"""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ivm import CHANGE_KINDS, QUANTILE, VIEWS, all_batches, measure_catalog, tables  # noqa: E402

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")

#: Server settings beside the test server's defaults: pg_ivm preloaded (as its instructions
#: ask), and memory for a 10 M-row table, its copy, its index and a view of as many rows.
PG_SETTINGS = {"shared_preload_libraries": "pg_ivm", "shared_buffers": "2GB", "work_mem": "64MB",
               "maintenance_work_mem": "512MB", "max_wal_size": "8GB"}
#: ``--pg-fsync``: PostgreSQL's own durability defaults back (the tests' server turns them off).
PG_FSYNC = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
#: The statement of each change kind, run in both schemas (``%s``: from :func:`parameters`).
STATEMENTS = {
    "insert": "INSERT INTO t VALUES (%s, %s)",
    "bulk": "INSERT INTO t SELECT * FROM unnest(%s::bigint[], %s::bigint[])",
    "delete": "DELETE FROM t WHERE ctid = (SELECT ctid FROM t WHERE k = %s AND v = %s LIMIT 1)",
    "update": "UPDATE t SET v = %s WHERE ctid = (SELECT ctid FROM t WHERE k = %s AND v = %s LIMIT 1)",
}


def tests_helpers():
    """The tests' ``storage_servers`` module (its throwaway PostgreSQL cluster)."""
    # colmz first: with tests/ on sys.path, its folder tests/colmz would pass for a namespace
    # package colmz (tests/conftest.py says the same).
    import colmz  # noqa: F401

    if _TESTS not in sys.path:
        sys.path.append(_TESTS)
    import storage_servers

    return storage_servers


def pg_ivm_missing() -> str | None:
    """Why pg_ivm cannot be measured here, or None when it can: PostgreSQL's ``initdb``,
    ``pg_ctl`` and ``pg_config``, psycopg, and pg_ivm's control file must all be found."""
    servers = tests_helpers()
    for tool in ("initdb", "pg_ctl", "pg_config"):
        if servers.pg_bin(tool) is None:
            return f"PostgreSQL's {tool} is not installed"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'colmz[postgres]')"
    share = subprocess.run([servers.pg_bin("pg_config"), "--sharedir"], capture_output=True, text=True,
                           check=True).stdout.strip()
    if not (pathlib.Path(share) / "extension" / "pg_ivm.control").exists():
        return f"pg_ivm is not installed ({share}/extension/pg_ivm.control is missing; see this file's docstring)"
    return None


def parameters(kind: str, batch) -> tuple:
    """The parameters of :data:`STATEMENTS`'s statement of ``kind`` for one batch of
    :func:`bench_ivm.change_batches` (columns ``k``, ``v``, ``diff``)."""
    k, v, d = (batch.column(c).to_pylist() for c in ("k", "v", "diff"))
    if kind == "bulk":
        return (k, v)
    if kind == "update":  # the old row (diff -1) and the new one: set v, find the old row
        old, new = d.index(-1), d.index(1)
        return (v[new], k[old], v[old])
    return (k[0], v[0])


class PgIvm:
    """A throwaway PostgreSQL server with pg_ivm, holding ``t`` and ``u`` of ``n`` rows
    (:func:`bench_ivm.tables`) in schema ``base``; :meth:`reset` copies them into schemas
    ``plain`` and ``ivm``, each read through its own autocommit connection."""

    def __init__(self, n: int, fsync: bool = False):
        import psycopg

        servers = tests_helpers()
        self.plain = self.ivm = None
        self.server = servers.PostgresServer({**PG_SETTINGS, **(PG_FSYNC if fsync else {})})
        try:
            self.server.start()
            self.url = self.server.url()
            self.admin = psycopg.connect(self.url, autocommit=True)
            self.admin.execute("CREATE EXTENSION pg_ivm")
            self.load(n)
        except BaseException:
            self.close()
            raise

    def load(self, n: int) -> None:
        """``t`` and ``u`` copied into schema ``base``."""
        import pyarrow.csv

        t, u = tables(n)
        c = self.admin
        c.execute("CREATE SCHEMA base; CREATE TABLE base.t (k bigint, v bigint); "
                  "CREATE TABLE base.u (uk bigint, w bigint)")
        for name, rows in (("t", t), ("u", u)):
            buf = io.BytesIO()
            pyarrow.csv.write_csv(rows, buf, pyarrow.csv.WriteOptions(include_header=False))
            data = buf.getbuffer()
            with c.cursor().copy(f"COPY base.{name} FROM STDIN (FORMAT csv)") as cp:
                for i in range(0, len(data), 1 << 23):
                    cp.write(data[i:i + (1 << 23)])

    def reset(self) -> None:
        """Schemas ``plain`` and ``ivm`` anew, each holding ``base``'s tables (``u(uk)`` a
        primary key, ``t(k)`` indexed, both analysed), and a connection to each."""
        import psycopg

        for conn in (self.plain, self.ivm):
            if conn is not None:
                conn.close()
        for schema in ("plain", "ivm"):
            self.admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")
            self.admin.execute(f"CREATE TABLE {schema}.t AS TABLE base.t; CREATE TABLE {schema}.u AS TABLE base.u; "
                               f"ALTER TABLE {schema}.u ADD PRIMARY KEY (uk); CREATE INDEX ON {schema}.t (k)")
            self.admin.execute(f"VACUUM ANALYZE {schema}.t")
            self.admin.execute(f"VACUUM ANALYZE {schema}.u")
        self.plain = psycopg.connect(self.url + "?options=-csearch_path%3Dplain", autocommit=True)
        self.ivm = psycopg.connect(self.url + "?options=-csearch_path%3Divm", autocommit=True)

    def create_view(self, view: str) -> None:
        """``mv`` made by ``create_immv`` over :data:`bench_ivm.VIEWS`'s query ``view`` in
        schema ``ivm`` (raises psycopg's error when pg_ivm refuses the query)."""
        self.ivm.execute("SELECT pgivm.create_immv('mv', %s)", (VIEWS[view],))
        indexed = self.ivm.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'ivm' "
                                   "AND tablename = 'mv'").fetchone()[0]
        if not indexed:
            self.ivm.execute("CREATE INDEX ON mv (k)")
        self.ivm.execute("ANALYZE mv")

    def timed(self, kind: str, batches: list) -> tuple[list[float], list[float]]:
        """Each batch's statement run in ``plain`` then in ``ivm``: the seconds of each."""
        sql = STATEMENTS[kind]
        without, with_ = [], []
        for b in batches:
            p = parameters(kind, b)
            for conn, out in ((self.plain, without), (self.ivm, with_)):
                a = time.perf_counter()
                done = conn.execute(sql, p, prepare=kind != "bulk").rowcount
                out.append(time.perf_counter() - a)
                if done != b.num_rows - (kind == "update"):
                    raise RuntimeError(f"{kind} changed {done} rows of t, not {b.num_rows}")
        return without, with_

    def matches(self, view: str) -> int:
        """1 when ``mv`` holds exactly the rows of its query over ``ivm``'s tables now."""
        query = VIEWS[view]
        cur = self.ivm.execute(f"SELECT * FROM ({query}) q LIMIT 0")
        cols = ", ".join(d.name for d in cur.description)
        differ = self.ivm.execute(f"SELECT count(*) FROM ((SELECT {cols} FROM mv EXCEPT ALL {query}) "
                                  f"UNION ALL ({query} EXCEPT ALL SELECT {cols} FROM mv)) d").fetchone()[0]
        return int(differ == 0)

    def close(self) -> None:
        for conn in (self.plain, self.ivm, getattr(self, "admin", None)):
            if conn is not None:
                conn.close()
        self.server.stop()


def measure_pg(n: int, views, kinds=CHANGE_KINDS, fsync: bool = False) -> dict:
    """pg_ivm's figures per view and change kind at ``n`` rows (module docstring): a dict
    ``{view: {kind: figures}}``, or ``{view: {"refused": message}}`` for a view pg_ivm
    refuses. The changes are :func:`bench_ivm.all_batches`'s, in that order, as colmz's."""
    import psycopg

    batches = all_batches(n, kinds)
    out: dict = {}
    pg = PgIvm(n, fsync=fsync)
    try:
        for view in views:
            pg.reset()
            try:
                pg.create_view(view)
            except psycopg.Error as e:
                out[view] = {"refused": str(e).splitlines()[0]}
                continue
            figures = out[view] = {}
            for k in kinds:
                without, with_ = pg.timed(k, batches[k])
                f = figures[k] = {}
                f["pg_without_ms"] = 1e3 * float(np.percentile(without, QUANTILE))
                f["pg_commit_ms"] = 1e3 * float(np.percentile(with_, QUANTILE))
                f["pg_view_ms"] = f["pg_commit_ms"] - f["pg_without_ms"]
            # Checked once, after every kind of change: at 10 M rows each check takes minutes.
            ok = pg.matches(view)
            for f in figures.values():
                f["pg_matches"] = ok
    finally:
        pg.close()
    return out


def measure(n: int, views, kinds=CHANGE_KINDS, colmz: bool = True, durable: bool = True,
            fsync: bool = False) -> tuple[dict, str | None]:
    """``({(view, kind): figures}, why pg_ivm was not measured or None)``: colmz's figures
    (``colmz``: in memory and, ``durable``, durable) and pg_ivm's, on the same changes."""
    figures: dict = {(v, k): {} for v in views for k in kinds}
    if colmz:
        for v in views:
            for k, f in measure_catalog(v, n, durable=durable, kinds=kinds, recompute=False).items():
                figures[(v, k)].update(f)
    missing = pg_ivm_missing()
    if missing is None:
        for v, per in measure_pg(n, views, kinds, fsync=fsync).items():
            for k in kinds:
                figures[(v, k)].update(per.get(k, {"pg_refused": per.get("refused")}))
    return figures, missing


COLUMNS = [("colmz view", "view_ms"), ("colmz durable view", "durable_view_ms"), ("pg_ivm view", "pg_view_ms"),
           ("pg commit", "pg_commit_ms"), ("pg without", "pg_without_ms"), ("ok", "matches"),
           ("pg ok", "pg_matches")]


def table(n: int, figures: dict, pg: bool = True) -> str:
    """The figures as a Markdown table (milliseconds), one row per (view, change); without
    ``pg`` the pg_ivm columns are left out."""
    cols = [c for c in COLUMNS if pg or not c[1].startswith("pg_")]
    out = ["| view | n | change | " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * (3 + len(cols))]
    for (view, kind), f in figures.items():
        cells = []
        for _, key in cols:
            x = f.get(key)
            if x is None and key.startswith("pg_") and f.get("pg_refused"):
                cells.append("refused")
            else:
                cells.append("-" if x is None else f"{x:d}" if isinstance(x, int) else f"{x:.3f}")
        out.append(f"| {view} | {n:,} | {kind} | " + " | ".join(cells) + " |")
    refused = {v: f["pg_refused"] for (v, _), f in figures.items() if f.get("pg_refused")}
    out += [f"\npg_ivm refused {v}: {msg}" for v, msg in refused.items()]
    return "\n".join(out)


#: The views of the asv matrix: those pg_ivm maintains (it refuses the others).
PG_VIEWS = ["sum", "join", "minmax", "distinct"]


class IvmPg:
    """colmz beside pg_ivm (``setup_cache`` measures every cell once; skipped, by
    ``NotImplementedError`` in ``setup``, when pg_ivm is not installed)."""

    params = [PG_VIEWS, [10_000, 100_000, 1_000_000], list(CHANGE_KINDS)]
    param_names = ["view", "n", "change"]
    number = 1
    repeat = 1
    timeout = 4 * 3600

    def setup_cache(self):
        if pg_ivm_missing() is not None:
            return {"missing": pg_ivm_missing()}
        return {n: measure(n, PG_VIEWS)[0] for n in self.params[1]}

    def setup(self, figures, view, n, change):
        if "missing" in figures:
            raise NotImplementedError(figures["missing"])

    def track_colmz_view_ms(self, figures, view, n, change):
        return figures[n][(view, change)].get("view_ms", float("nan"))

    track_colmz_view_ms.unit = "ms"

    def track_colmz_durable_view_ms(self, figures, view, n, change):
        return figures[n][(view, change)].get("durable_view_ms", float("nan"))

    track_colmz_durable_view_ms.unit = "ms"

    def track_pg_ivm_view_ms(self, figures, view, n, change):
        return figures[n][(view, change)].get("pg_view_ms", float("nan"))

    track_pg_ivm_view_ms.unit = "ms"

    def track_pg_ivm_matches(self, figures, view, n, change):
        return figures[n][(view, change)].get("pg_matches", float("nan"))


def main(argv: list[str]) -> None:
    """The hand-run entry point (module docstring)."""
    import argparse

    ap = argparse.ArgumentParser(prog="bench_ivm_pg.py", description="colmz view maintenance beside pg_ivm")
    ap.add_argument("n", type=int, nargs="?", default=100_000)
    ap.add_argument("views", nargs="*", default=[], help=f"any of {list(VIEWS)} (default: {PG_VIEWS})")
    ap.add_argument("--changes", default=",".join(CHANGE_KINDS))
    ap.add_argument("--no-colmz", action="store_true", help="pg_ivm alone")
    ap.add_argument("--no-durable", action="store_true", help="colmz in memory only")
    ap.add_argument("--pg-fsync", action="store_true", help="PostgreSQL with fsync on (as installed)")
    a = ap.parse_args(argv)
    kinds = tuple(k for k in a.changes.split(",") if k)
    if bad := [k for k in kinds if k not in CHANGE_KINDS]:
        ap.error(f"--changes takes {list(CHANGE_KINDS)}, got {bad}")
    if unknown := [v for v in a.views if v not in VIEWS]:
        ap.error(f"views are {list(VIEWS)}, got {unknown}")
    missing = None
    for i, v in enumerate(a.views or PG_VIEWS):  # one view at a time: rows print as they are measured
        figures, missing = measure(a.n, [v], kinds, colmz=not a.no_colmz, durable=not a.no_durable,
                                   fsync=a.pg_fsync)
        if missing and i == 0:
            print(f"pg_ivm not measured: {missing}")
        lines = table(a.n, figures, pg=missing is None).splitlines()
        print("\n".join(lines if i == 0 else lines[2:]), flush=True)

if __name__ == "__main__":
    main(sys.argv[1:])
