"""Maintained views under random commit sequences that retract what deltas rely on, against
the recompute path after every commit and against PostgreSQL 15 (``CI=1``).

The commits are drawn to hit the transitions a delta rule gets wrong, not to be typical:

* a group deleted whole and re-inserted in the same commit or later (``min``/``max`` and
  top-k retracting their current extreme, ``count`` to zero and back, ``HAVING`` crossed both
  ways);
* updates moving rows between groups, and two groups swapping their rows in one commit;
* duplicate rows (inserted again by ``INSERT ... SELECT``, deleted together): multiset
  semantics of joins, ``UNION ALL``, ``EXCEPT ALL``, ``INTERSECT ALL``, ``DISTINCT``;
* NULL keys in joins, ``GROUP BY``, ``IN``/``NOT IN`` and correlated subqueries, and the
  matching side of outer joins and ``[NOT] EXISTS`` appearing and disappearing;
* bulk commits of hundreds of rows, in and out (arrangements merging their runs);
* floats of very different magnitudes (``0.1``, ``1e15``) inserted and deleted: a float
  ``sum``/``avg`` must equal a recompute over the rows held, not a running total.

Views over views (``CHAIN``) see their inputs' retractions as deltas of their own: an
emptied group of an aggregate, a top-k's row replaced, an outer join's padding flipping.

Each view body is planned without a Fallback (``reference_models.catalogs`` asserts it), so
the maintained side is the operators. The recompute oracle is a catalog running each view's
query whole at every commit (``views="recompute"``); the PostgreSQL oracle is a plain
``VIEW`` of the same body (bags of rows, numbers within 1e-9 relative: ``sql_oracle.same``).

Bodies whose answer depends on an order PostgreSQL leaves open (a top-k or ``DISTINCT ON``
ordered by a non-unique key that outputs other columns, ``string_agg`` without ``ORDER BY``)
are not here: either answer would be right.
"""

from __future__ import annotations

import pytest
import updates_strategies as us
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from reference_models import catalogs
from sql_oracle import bag, bags_equal, jsonb_text_connection, require
from test_maintained import TABLES, check_equal, contents, insert, run

import colmz
from colmz.sql import SQLError

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

#: Rows drawn for each table (``test_maintained.TABLES``): few keys, NULL keys, repeated
#: rows, ties on the ordered columns, floats that cancel.
POOLS = {
    "t": [(1, 1, "a"), (1, 2, "b"), (1, 2, "b"), (2, 5, "a"), (2, None, None), (None, 3, "c"),
          (3, 5, "a"), (None, None, "a"), (2, 2, "b")],
    "u": [(1, "x"), (2, "y"), (None, "x"), (2, None), (3, "a"), (1, "b")],
    "r": [(1, True, 0.1), (1, False, 0.2), (2, True, 1e15), (2, None, -0.1), (None, True, 0.1), (3, False, None)],
}

#: View bodies, one per transition the commits stress.
BODIES = [
    # min/max and count to zero and back; HAVING crossed both ways
    "SELECT k, min(v) AS lo, max(v) AS hi, count(*) AS c, count(v) AS cv FROM t GROUP BY k",
    "SELECT count(*) AS c, min(s) AS lo, max(v) AS hi, sum(v) AS sv FROM t",
    "SELECT k, sum(v) AS sv FROM t GROUP BY k HAVING count(*) >= 2 AND coalesce(sum(v), 0) < 6",
    "SELECT s, max(v) - min(v) AS spread FROM t GROUP BY s HAVING min(v) <> max(v)",
    # float sums and averages under cancellation; avg's numeric of integers
    "SELECT k, sum(x) AS sx, avg(x) AS ax, count(x) AS cx FROM r GROUP BY k",
    "SELECT sum(x) AS sx, avg(v) AS av FROM r JOIN t USING (k)",
    # ordered aggregates of the retracted rows
    "SELECT k, string_agg(s, ',' ORDER BY s, v) AS ss, array_agg(v ORDER BY v NULLS FIRST, s) AS av FROM t GROUP BY k",
    "SELECT k, count(DISTINCT v) AS dv, string_agg(DISTINCT s, '' ORDER BY s) AS ds FROM t GROUP BY k",
    # top-k and DISTINCT ON with ties at the boundary (tied rows output alike)
    "SELECT v FROM t ORDER BY v NULLS FIRST LIMIT 2 OFFSET 1",
    "SELECT k, v FROM t ORDER BY v DESC NULLS LAST, k NULLS FIRST LIMIT 3",
    "SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v DESC NULLS LAST",
    "SELECT k, v FROM (SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) AS r FROM t) q WHERE r <= 1",
    # window functions
    "SELECT k, v, s, count(*) OVER (PARTITION BY k ORDER BY v) AS c, dense_rank() OVER (ORDER BY s) AS d FROM t",
    # joins: NULL keys, the matching side appearing and disappearing
    "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    "SELECT t.k AS tk, t.v, u.k AS uk, u.w FROM t FULL JOIN u ON t.k = u.k",
    "SELECT u.k, u.w, count(t.v) AS c FROM u LEFT JOIN t ON t.k = u.k AND t.s = u.w GROUP BY u.k, u.w",
    # EXISTS / IN / NOT IN with NULLs, correlated and not; scalar subqueries
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w IS NOT NULL)",
    "SELECT k, w FROM u WHERE k NOT IN (SELECT k FROM t)",
    "SELECT k, w, k IN (SELECT k FROM t WHERE v > 1) AS i FROM u",
    "SELECT k, w, (SELECT max(v) FROM t WHERE t.k = u.k) AS m, (SELECT count(*) FROM t WHERE t.k = u.k) AS c FROM u",
    "SELECT k, v FROM t WHERE v >= (SELECT avg(v) FROM t)",
    # set operations with duplicates
    "SELECT k FROM t EXCEPT ALL SELECT k FROM u",
    "SELECT k FROM t INTERSECT ALL SELECT k FROM u",
    "SELECT k, s FROM t UNION SELECT k, w FROM u EXCEPT SELECT k, 'a' FROM r",
    # WITH RECURSIVE
    "WITH RECURSIVE c(x) AS (SELECT k FROM u UNION SELECT t.v FROM c JOIN t ON t.k = c.x) SELECT x FROM c",
]


@st.composite
def statement(draw) -> str:
    """One statement (or two, one commit) of the transitions the module docstring lists."""
    table = draw(st.sampled_from(["t", "t", "u", "r"]))
    pool = POOLS[table]
    kind = draw(st.sampled_from(["insert", "insert", "delete_key", "refill", "move", "swap", "duplicate",
                                 "delete_all", "update", "bulk"]))
    k = draw(st.sampled_from([None, 1, 2, 3]))
    cond = "k IS NULL" if k is None else f"k = {k}"
    if kind == "insert":
        return insert(table, draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3)))
    if kind == "delete_key":
        return f"DELETE FROM {table} WHERE {cond}"
    if kind == "refill":  # a group emptied and refilled, part of it, in one commit
        rows = [r for r in pool if r[0] == k] or pool[:1]
        back = draw(st.lists(st.sampled_from(rows), min_size=1, max_size=3))
        return f"DELETE FROM {table} WHERE {cond}; {insert(table, back)}"
    if kind == "move":
        to = draw(st.sampled_from(["NULL", "1", "2", "3"]))
        return f"UPDATE {table} SET k = {to} WHERE {cond}"
    if kind == "swap":
        return f"UPDATE {table} SET k = CASE WHEN k = 1 THEN 2 WHEN k = 2 THEN 1 END WHERE k IN (1, 2)"
    if kind == "duplicate":
        return f"INSERT INTO {table} SELECT * FROM {table} WHERE {cond}"
    if kind == "delete_all":
        return f"DELETE FROM {table}"
    if kind == "bulk":  # hundreds of rows in and out: arrangements merge runs, groups change wholesale
        n, m = draw(st.sampled_from([(300, 4), (2000, 3), (300, 50)]))
        return (f"INSERT INTO t SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE i % {m} END, i % 11, "
                f"substr('abc', i % 3 + 1, 1) FROM generate_series(1, {n}) g(i); DELETE FROM t WHERE v % 3 = {k or 0}")
    sets = {"t": "v = v + 1", "u": "w = 'x'", "r": "x = x * 10"}[table]
    return f"UPDATE {table} SET {sets} WHERE {cond}"


commits = st.lists(st.lists(statement(), min_size=1, max_size=2).map("; ".join), min_size=1, max_size=8)


def check_sequence(bodies: list[str], sequence: list[str]) -> None:
    """The views of ``bodies`` equal in both catalogs after every commit of ``sequence``."""
    cats = catalogs(bodies)
    check_equal(cats, "creation")
    for text in sequence:
        assert run(cats, text) == [None, None], text
        check_equal(cats, text)


@settings(max_examples=us.examples(15), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.sampled_from(BODIES), min_size=1, max_size=4, unique=True), commits)
def test_views_equal_the_recompute_after_every_commit(bodies, sequence):
    check_sequence(bodies, sequence)


@pytest.mark.slow
@settings(max_examples=us.examples(150), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(commits)
def test_every_body_equals_the_recompute_after_every_commit(sequence):
    check_sequence(BODIES, sequence)


#: The deterministic core of the random sequences: one group (k = 1) emptied, refilled, its
#: extreme retracted, moved away and back, duplicated and deleted together; every table
#: emptied, then a row of NULLs in each.
REFILL = [
    insert("t", POOLS["t"]) + "; " + insert("u", POOLS["u"]) + "; " + insert("r", POOLS["r"]),
    "DELETE FROM t WHERE k = 1; DELETE FROM r WHERE k = 1",
    insert("t", [(1, 2, "b"), (1, 2, "b")]) + "; " + insert("r", [(1, True, 0.1)]),
    "DELETE FROM t WHERE k = 1 AND v = 2; DELETE FROM u WHERE k = 1",
    insert("t", [(1, 9, "z")]) + "; " + insert("u", [(1, "z")]),
    "UPDATE t SET k = 2 WHERE k = 1; UPDATE r SET k = NULL WHERE k = 1",
    "UPDATE t SET k = CASE WHEN k = 1 THEN 2 WHEN k = 2 THEN 1 END WHERE k IN (1, 2)",
    "INSERT INTO t SELECT * FROM t WHERE k = 1; INSERT INTO u SELECT * FROM u WHERE k IS NULL",
    "DELETE FROM t WHERE k = 1; DELETE FROM r WHERE x = 1e15",
    "DELETE FROM t; DELETE FROM u; DELETE FROM r",
    insert("t", [(None, None, None)]) + "; " + insert("u", [(None, None)]) + "; " + insert("r", [(None, None, None)]),
]


@pytest.mark.parametrize("body", BODIES)
def test_each_body_through_a_group_emptied_and_refilled(body):
    check_sequence([body], REFILL)


def test_min_max_where_only_some_groups_re_reduce_and_the_null_key_is_not_among_them():
    # a delta holding a NULL key whose groups split between reduced in place and re-reduced
    # by sorting, none of the latter the NULL group: the re-reduced rows' groups are found
    # in the groups' own encoding (with its NULL word), not in the subset's encoded again
    bulk = ("INSERT INTO t SELECT CASE WHEN i % 7 = 0 THEN NULL ELSE i % {m} END, i % 11, "
            "substr('abc', i % 3 + 1, 1) FROM generate_series(1, 300) g(i)")
    check_sequence([BODIES[0], BODIES[19]], [
        bulk.format(m=50) + "; DELETE FROM t WHERE v % 3 = 0; DELETE FROM t WHERE k IS NULL",
        "DELETE FROM t WHERE k IS NULL",
        bulk.format(m=4) + "; DELETE FROM t WHERE v % 3 = 3",
        "INSERT INTO t VALUES (1, 1, 'a')",
    ])


#: Views over views, created in this order (each may read those before it).
CHAIN = [
    ("a", "SELECT k, min(v) AS lo, max(v) AS hi, count(*) AS c FROM t GROUP BY k"),
    ("b", "SELECT lo, count(*) AS n, sum(c) AS sc FROM a GROUP BY lo"),
    ("c", "SELECT DISTINCT ON (k) k, v, s FROM t ORDER BY k, v DESC NULLS LAST, s"),
    ("d", "SELECT c.k, c.v, u.w FROM c LEFT JOIN u ON c.k = u.k"),
    ("e", "SELECT k, v, s FROM t ORDER BY v DESC NULLS LAST, k, s LIMIT 3"),
    ("f", "SELECT sum(v) AS s, count(*) AS n FROM e"),
    ("g", "SELECT k FROM t UNION SELECT k FROM u"),
    ("h", "SELECT g.k, a.c FROM g LEFT JOIN a ON a.k = g.k WHERE a.c IS NULL OR a.c > 1"),
    ("i", "SELECT k, rank() OVER (ORDER BY hi DESC NULLS LAST) AS r FROM a"),
    ("j", "SELECT k, count(*) AS n FROM d GROUP BY k HAVING count(*) > 1"),
    ("l", "SELECT k FROM h EXCEPT ALL SELECT k FROM d"),
    ("m", "SELECT a.k, b.n FROM a JOIN b ON a.lo = b.lo"),
]


def chain_catalogs() -> list[colmz.Catalog]:
    """An incremental catalog and a recompute one, each with the views of ``CHAIN``; every
    view of the first planned without a Fallback."""
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        cat.execute(";\n".join(f"CREATE MATERIALIZED VIEW {n} AS {b}" for n, b in CHAIN))
    for n, b in CHAIN:
        mv = cats[0].object(n).maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    return cats


@settings(max_examples=us.examples(6), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(commits)
def test_views_over_views_equal_the_recompute_after_every_commit(sequence):
    cats = chain_catalogs()
    for text in ["creation", *sequence]:
        if text != "creation":
            assert run(cats, text) == [None, None], text
        check_equal(cats, text)


def test_views_over_views_through_a_group_emptied_and_refilled():
    cats = chain_catalogs()
    for text in REFILL:
        assert run(cats, text) == [None, None], text
        check_equal(cats, text)


#: Scalar subqueries not one row by their shape: an error of the view while a commit leaves
#: one with more than one row (``colmz.dataflow.guard``), the view and a view over it.
GUARDED = [
    ("g0", "SELECT t.k, t.v, (SELECT w FROM u WHERE u.k = 2) AS w2 FROM t"),
    ("g1", "SELECT k, s FROM t WHERE v > (SELECT k FROM u WHERE w = 'x')"),
    ("g2", "SELECT k, (SELECT x FROM r WHERE r.k = 1 AND r.b) AS x1 FROM u"),
    ("g3", "SELECT count(*) AS n, max(w2) AS m FROM g0"),
]


def read_or_error(cat: colmz.Catalog, name: str):
    """The view's contents, or the error reading it raises (its message)."""
    try:
        cat.sql(f"SELECT * FROM {name}")
    except SQLError as e:
        return str(e)
    return contents(cat, name)


@settings(max_examples=us.examples(10), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(commits)
def test_guarded_views_err_and_answer_as_the_recompute_after_every_commit(sequence):
    # every commit lands; each view errs exactly when the recompute's does, else equals it
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        cat.execute(";\n".join(f"CREATE MATERIALIZED VIEW {n} AS {b}" for n, b in GUARDED))
    # each subquery one row short of the error: a random commit tips it either way
    first = insert("t", POOLS["t"][:4]) + "; " + insert("u", [(2, "y"), (1, "x")]) + "; " + insert("r", [(1, True, 0.1)])
    for text in ["creation", first, *sequence]:
        if text != "creation":
            assert run(cats, text) == [None, None], text
        for n, _ in GUARDED:
            got = read_or_error(cats[0], n)
            assert got == read_or_error(cats[1], n), (n, text)
            if isinstance(got, str):
                event(f"{n} held the error")


# ---------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def pg():
    """A PostgreSQL connection (its own fresh schema)."""
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    conn = jsonb_text_connection()
    yield conn
    conn.close()


def check_postgres(conn, bodies: list[str], sequence: list[str]) -> None:
    """The views of ``bodies`` kept by a catalog equal PostgreSQL's plain views of them after
    every commit of ``sequence``."""
    conn.execute("DROP TABLE IF EXISTS t, u, r CASCADE")
    cat = catalogs(bodies)[0]
    for s in TABLES:
        conn.execute(s)
    for i, b in enumerate(bodies):
        conn.execute(f"CREATE VIEW v{i} AS {b}")
    for text in ["creation", *sequence]:
        if text != "creation":
            with conn.transaction():
                for s in text.split("; "):
                    conn.execute(s)
            cat.execute(text)
        for i, b in enumerate(bodies):
            got = cat.sql(f"SELECT * FROM v{i}")
            cur = conn.execute(f"SELECT * FROM v{i}")
            assert got.column_names == [d.name for d in cur.description], b
            want = bag(cur.fetchall())
            assert bags_equal(bag(zip(*(c.to_pylist() for c in got.columns))), want), (b, text, want)


@settings(max_examples=us.examples(8), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(commits)
def test_views_equal_postgresql_after_every_commit(pg, sequence):
    check_postgres(pg, BODIES, sequence)


def test_views_equal_postgresql_through_a_group_emptied_and_refilled(pg):
    check_postgres(pg, BODIES, REFILL)
