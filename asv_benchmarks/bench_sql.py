"""Per-statement cost of colmz's SQL front end, beside sqlglot and DuckDB's own parser.

What colmz does to a statement before DuckDB runs it: tokenize and parse it
(``colmz.sql.parse``), translate its query (``translate``: ``mz_now()``, type names) and bind
the relations it reads (``bind_relations``), then have DuckDB confirm one ``SELECT``
(``check_one_query``, DuckDB's ``extract_statements``). Translation reads each text's parse
tree (``colmz.sql.tree.parse_tree``): colmz's own reader of DuckDB's tokens
(``colmz.sql.grammar``) where it knows the text, else DuckDB's ``json_serialize_sql``. The
workload is :data:`STATEMENTS`: queries, writes and continual tasks of the kind colmz's tests
and examples run (a few hundred bytes each).

* ``ColmzFrontEnd.time_parse_translate_bind``: parse + translate + bind of every statement,
  caches cleared first (each text seen for the first time, as a new statement is).
* ``ColmzFrontEnd.time_parse_translate_bind_cached``: the same texts again (what a
  continual task or view re-run at every time pays: the token caches hit).
* ``ColmzFrontEnd.time_parse_translate_bind_known_shape``: texts never seen whose shapes
  are known (:data:`VARIANTS`: other numbers, another comment; what a workload resending a
  statement with new values pays). A text colmz's reader knows is read as on a first sight;
  for the others DuckDB's tree of each comes from its shape's (:mod:`colmz.sql.shapes`).
* ``ColmzFrontEnd.time_check_one_query``: DuckDB's ``extract_statements`` of every query colmz
  would run (its confirmation cache cleared).
* ``Sqlglot.time_parse_transpile``: ``sqlglot.transpile(q, read="postgres", write="duckdb")`` of
  the same queries -- only the queries: sqlglot has no continual tasks (it keeps them as an
  opaque ``Command``). Skipped when sqlglot is not installed; it is not a colmz dependency.
* ``DuckDBSerialize.time_json_serialize_sql``: DuckDB's ``json_serialize_sql`` of the same
  queries (DuckDB's parser to a JSON tree; it reads only ``SELECT`` in DuckDB's dialect).

``python asv_benchmarks/bench_sql.py`` times all of them in one process, side by side, and
prints microseconds per query (best of 20); with ``--before DIR`` it first runs the same
workload, in a child process, on the colmz package in DIR (an older tree, e.g.
``git archive 71916de colmz | tar -x -C DIR``), so a change is measured before and after in
one run. ``--before DIR --rounds N`` times only colmz's three paths, before and after
alternately in N pairs of child processes, in CPU time (``time.process_time``, best of 30
per child), and prints the median and range of each: on a shared machine wall time counts
other processes' turns, and one child against another spreads more than a change does.

One run on a quiet machine (``python asv_benchmarks/bench_sql.py --before DIR
--rounds 5``, DIR the tree before statements were remembered per text, tokens shared and
edited texts lexed again only where edited: ``git archive 7dc45dd colmz``; DuckDB 2.0.1, 2
cores; after main 5852547), 12 statements giving 14 queries, us of CPU per query:

==============================================  ==========  ==========
path                                            before      after
==============================================  ==========  ==========
colmz parse + translate + bind, first sight          237.9       196.7
colmz parse + translate + bind, cached                25.7         3.0
colmz ..., new text of a known shape                 248.7       199.5
==============================================  ==========  ==========

A statement seen before is no longer parsed: :func:`colmz.sql.parse` keeps each text's
statements and hands out copies, and translation and binding were already remembered per
text, so a re-run costs a few dictionary reads. A first sight is colmz's tokenizer (one
``finditer`` pass, each match a token with the whitespace before it; each query cut from its
statement sharing the statement's tokens, an edited text lexed again only near the edit),
colmz's reader of DuckDB's tokens (``colmz.sql.grammar``; every text of this workload is read
without ``json_serialize_sql``), and translation and binding (:mod:`colmz.sql.transforms`,
:mod:`colmz.sql.translate`). A known shape costs what a first sight
does: the reader is cheaper than finding and remapping a shape, which serves the texts it
gives up on.
"""

from __future__ import annotations

import time

from colmz.sql import (
    ContinualTaskStatement,
    CreateMaterializedView,
    DeleteStatement,
    InsertStatement,
    Query,
    UpdateStatement,
    bind_relations,
    check_one_query,
    clear_caches,
    connect,
    parse,
    select_where,
    translate,
    update_select,
)

NAMES = frozenset({"append_only", "upsert", "events", "users", "orders", "Orders", "t"})

STATEMENTS = [
    "SELECT key, max(val) FROM append_only GROUP BY key",
    "SELECT * FROM upsert WHERE key IN (SELECT key FROM append_only) ORDER BY key",
    "SELECT e.id, u.name, e.payload::JSONB ->> 'kind' AS kind FROM events e JOIN users u "
    "ON e.user_id = u.id WHERE e.ts + 30000 > mz_now() AND u.active",
    'SELECT o.region, count(*) AS n, sum(o.amount)::INT8 AS total FROM orders o JOIN "Orders" x '
    "USING (id) WHERE o.status <> 'cancelled' GROUP BY o.region HAVING count(*) > 2",
    "WITH recent AS (SELECT user_id, max(ts) AS last FROM events GROUP BY user_id) "
    "SELECT u.id, recent.last FROM users u LEFT JOIN recent ON recent.user_id = u.id",
    "INSERT INTO t VALUES (1, 'a;b', '2023-11-14 22:13:20+00'), (2, 'it''s', NULL)",
    "INSERT INTO orders SELECT id, region, amount * 2, status FROM orders WHERE amount < 10",
    "DELETE FROM t WHERE k IN (SELECT k FROM events WHERE kind = 'gone') AND v < 100",
    "UPDATE t SET v = v || '!', k = k + 1 WHERE k BETWEEN 3 AND 7",
    "CREATE MATERIALIZED VIEW totals AS SELECT region, sum(amount) AS s FROM orders GROUP BY region",
    """CREATE CONTINUAL TASK upsert (key INT, val INT) ON INPUT append_only AS (
        DELETE FROM upsert WHERE key IN (SELECT key FROM append_only);
        INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key)""",
    "CREATE CONTINUAL TASK retain FROM RETAIN events WHILE (ts + INTERVAL '2s' > mz_now())",
]


def queries(stmt) -> list[str]:
    """The query texts colmz would run for one parsed statement (before translation)."""
    if isinstance(stmt, Query):
        return [stmt.sql]
    if isinstance(stmt, InsertStatement):
        return [stmt.query]
    if isinstance(stmt, DeleteStatement):
        return [select_where(stmt.table, stmt.where)]
    if isinstance(stmt, UpdateStatement):
        return [update_select(stmt.table, ["k", "v"], dict(stmt.assignments), stmt.where)]
    if isinstance(stmt, CreateMaterializedView):
        return [stmt.query]
    if isinstance(stmt, ContinualTaskStatement):
        out = []
        for b in stmt.body:
            out += queries(b)
        return out
    return []


QUERIES = [q for s in STATEMENTS for st in parse(s) for q in queries(st)]


def front_end(statements=STATEMENTS) -> int:
    """parse + translate + bind of every statement; returns the queries produced."""
    n = 0
    for text in statements:
        for st in parse(text):
            for q in queries(st):
                bind_relations(translate(q), NAMES)
                n += 1
    return n


def variant(text: str, i: int) -> str:
    """``text`` as a workload resends it: its numbers outside strings moved by ``i`` and a
    comment of its own after each ``SELECT``, ``WHERE``, ``VALUES``, ``WHILE (`` and ``=``
    (so that each query and each checked expression of it is a new text) -- a new text of
    the same shape."""
    import re

    text = re.sub(r"(?<![\w'.-])\d+(?![\w'])", lambda m: str(int(m.group()) + i), text)
    return re.sub(r"(\bSELECT\b|\bWHERE\b|\bVALUES\b|\bWHILE \(| = )", rf"\1 /* {i} */ ", text)


#: Variants of the workload: two to learn each shape (parse, confirm), then one per timing.
VARIANTS = [[variant(s, i) for s in STATEMENTS] for i in range(1, 40)]


class ColmzFrontEnd:
    def setup(self):
        self.con = connect()
        front_end()
        self.variants = iter(VARIANTS)

    def setup_known_shape(self):
        clear_caches()
        self.variants = iter(VARIANTS)
        front_end(next(self.variants))
        front_end(next(self.variants))

    def time_parse_translate_bind_known_shape(self):
        # every text new, every shape known (asv: call setup_known_shape first)
        front_end(next(self.variants))

    def time_parse_translate_bind(self):
        clear_caches()
        front_end()

    def time_parse_translate_bind_cached(self):
        front_end()

    def time_check_one_query(self):
        clear_caches()  # DuckDB's confirmations are remembered per text too
        for q in QUERIES:
            check_one_query(self.con, q)


class Sqlglot:
    def setup(self):
        try:
            import sqlglot
        except ImportError:
            raise NotImplementedError("sqlglot is not installed (it is not a colmz dependency)") from None
        self.sqlglot = sqlglot

    def time_parse_transpile(self):
        for q in QUERIES:
            self.sqlglot.transpile(q, read="postgres", write="duckdb")


class DuckDBSerialize:
    def setup(self):
        import duckdb

        self.con = duckdb.connect(":memory:")

    def time_json_serialize_sql(self):
        for q in QUERIES:
            self.con.execute("SELECT json_serialize_sql(?)", [q]).fetchall()


def _per_statement_us(fn, count: int, repeat: int = 20, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best / count * 1e6


def _before(tree: str) -> None:
    # The same workload against the colmz package in ``tree`` (a directory holding an older
    # ``colmz/``), in a child process so that both import as ``colmz``.
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    print(f"== before: colmz from {tree}", flush=True)
    subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, check=True)
    print("== after: this colmz", flush=True)


_PATHS = ("first sight", "cached", "known shape")


def _colmz_cpu() -> None:
    # One child of ``--rounds``: the three colmz paths in CPU time (best of 30 each).
    c = ColmzFrontEnd()
    c.setup()
    nq = len(QUERIES)
    cpu = time.process_time
    figures = [_per_statement_us(c.time_parse_translate_bind, nq, 30, cpu),
               _per_statement_us(c.time_parse_translate_bind_cached, nq, 30, cpu)]
    c.setup_known_shape()
    figures.append(_per_statement_us(c.time_parse_translate_bind_known_shape, nq, 30, cpu))
    print("COLMZ_CPU", *(f"{f:.2f}" for f in figures))


def _rounds(tree: str, rounds: int) -> None:
    # Before (colmz from ``tree``) and after (this colmz) alternately, each in a child timing
    # CPU time (on a shared machine, wall time counts other processes' turns): the median and
    # range of each path over the rounds.
    import os
    import statistics
    import subprocess
    import sys

    got: dict[str, list[list[float]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for tag in ("before", "after"):
            env = dict(os.environ)
            if tag == "before":
                env["PYTHONPATH"] = os.path.abspath(tree)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--colmz-cpu"], env=env, check=True,
                                 capture_output=True, text=True).stdout
            got[tag].append([float(x) for x in out.split("COLMZ_CPU")[1].split()])
    print(f"colmz from {tree} (before) and this colmz (after): us of CPU per query, best of 30 per child, "
          f"median [range] of {rounds} alternating rounds")
    for k, name in enumerate(_PATHS):
        b = [r[k] for r in got["before"]]
        a = [r[k] for r in got["after"]]
        print(f"  {name:12s} before {statistics.median(b):7.1f} [{min(b):.1f}-{max(b):.1f}]"
              f"   after {statistics.median(a):7.1f} [{min(a):.1f}-{max(a):.1f}]")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--colmz-cpu"]:
        _colmz_cpu()
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--before" and sys.argv[3] == "--rounds":
        _rounds(sys.argv[2], int(sys.argv[4]))
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "--before":
        _before(sys.argv[2])
    c = ColmzFrontEnd()
    c.setup()
    d = DuckDBSerialize()
    d.setup()
    nq = len(QUERIES)
    rows = [
        ("colmz parse+translate+bind, first sight", _per_statement_us(c.time_parse_translate_bind, nq)),
        ("colmz parse+translate+bind, cached", _per_statement_us(c.time_parse_translate_bind_cached, nq)),
    ]
    if hasattr(c, "setup_known_shape"):
        c.setup_known_shape()
        rows.append(("colmz ..., new text of a known shape",
                     _per_statement_us(c.time_parse_translate_bind_known_shape, nq)))
    rows += [
        ("DuckDB extract_statements (check_one_query)", _per_statement_us(c.time_check_one_query, nq)),
        ("DuckDB json_serialize_sql", _per_statement_us(d.time_json_serialize_sql, nq)),
    ]
    try:
        g = Sqlglot()
        g.setup()
        rows.append((f"sqlglot {g.sqlglot.__version__} parse+transpile", _per_statement_us(g.time_parse_transpile, nq)))
    except NotImplementedError as e:
        rows.append((f"sqlglot: {e}", float("nan")))
    print(f"{len(STATEMENTS)} statements, {nq} queries; microseconds per query (best of 20)")
    for name, us in rows:
        print(f"  {name:48s} {us:9.1f}")
