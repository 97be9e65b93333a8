"""PostgreSQL 15 as a second oracle of maintained views.

The same tables live in a ``colmz.Catalog`` (views kept by their operators, the default)
and in a fresh schema of the process's PostgreSQL test server
(``storage_servers.postgres_url``), where each view body is a plain ``VIEW`` -- so a view over
a view is the composition there too. After every commit of a random change script (inserts
with duplicates and NULLs, deletes, updates, multi-statement commits, empty commits; for a
durable catalog also failed commits, DDL in a commit and reopens after any step) every
view's contents in colmz equal what PostgreSQL answers for it: bags of rows, the same
column names, floats within 1e-9 relative (``sql_oracle.same``; sums of floats accumulate in a
different order), PostgreSQL's ``numeric`` read as a float.

View bodies cover filters, 2- and 3-table joins, outer joins, every aggregate kind
(accumulable, min/max, basic; the arrays of ``array_agg`` too), ``DISTINCT``, ``HAVING``,
``UNION ALL``, ``EXCEPT``, ``INTERSECT``, window functions, ``ORDER BY ... LIMIT`` (ordered
by whole rows: ties would make either answer right) and views over views.

Like the other PostgreSQL oracles (``tests/sql_oracle.py``), the test fails rather than
skips when ``CI`` is set and the server or ``psycopg`` is missing.
"""

from __future__ import annotations

from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import norm, require, same

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")
require("psycopg", "the PostgreSQL oracle needs psycopg")

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLES = ["CREATE TABLE t (k BIGINT, v BIGINT, s TEXT)", "CREATE TABLE u (k BIGINT, w TEXT)",
          "CREATE TABLE r (k BIGINT, b BOOLEAN, x DOUBLE PRECISION)"]
COLUMNS = {"t": ("k", "v", "s"), "u": ("k", "w"), "r": ("k", "b", "x")}
POOLS = {
    "t": [(None, 4, "a"), (1, None, "b"), (1, -2, None), (2, 7, "a"), (3, 7, "c"), (2, 0, ""), (1, 4, "a"),
          (None, 9, "b"), (2, 7, "a"), (4, 1000000000000, "d")],
    "u": [(k, w) for k in (None, 1, 2, 4) for w in ("x", None, "y")],
    "r": [(None, True, 1.0), (1, False, 0.1), (1, True, -0.0), (2, None, 0.75), (2, True, None),
          (4, False, 0.25), (1, True, 2.5), (3, False, 1e15), (3, True, -3.3)],
}

#: (name, body): created in this order (later ones may read earlier ones).
VIEWS = [
    # filters and projections
    ("f1", "SELECT k, v FROM t WHERE v >= 0"),
    ("f2", "SELECT k AS key, s FROM t WHERE s = 'a' AND k IS NOT NULL"),
    ("f3", "SELECT k + 1 AS j, upper(s) AS us, v * 2 AS d FROM t WHERE v > 1 OR k = 2"),
    ("f4", "SELECT k, x FROM r WHERE b AND x < 1"),
    # joins: inner, 3-table, outer
    ("j1", "SELECT t.k, t.s, u.w FROM t JOIN u ON t.k = u.k"),
    ("j2", "SELECT t.k, u.w, r.b FROM t JOIN u ON t.k = u.k JOIN r ON r.k = u.k"),
    ("j3", "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k"),
    ("j4", "SELECT t.s, u.k, u.w FROM t RIGHT JOIN u ON u.k = t.k"),
    ("j5", "SELECT t.k AS tk, t.v, u.k AS uk, u.w FROM t FULL JOIN u ON t.k = u.k"),
    ("j6", "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k WHERE t.v > length(u.w) - 5"),
    # two keys paired in another order than either side's columns (outer.py's key orders)
    ("j7", "SELECT u.k, u.w, q.v FROM u LEFT JOIN (SELECT DISTINCT s, v FROM t) q ON u.w = q.s AND u.k = q.v"),
    # aggregates: accumulable, hierarchical, basic
    ("a1", "SELECT k, sum(v) AS s, count(*) AS c, avg(v) AS a FROM t GROUP BY k"),
    ("a2", "SELECT s, min(v) AS lo, max(k) AS hi FROM t GROUP BY s"),
    ("a3", "SELECT count(*) AS n, sum(v) AS s, count(s) AS c FROM t"),
    ("a4", "SELECT k, bool_and(b) AS a, bool_or(b) AS o, count(b) AS n FROM r GROUP BY k"),
    ("a5", "SELECT k, sum(x) AS s, avg(x) AS a, min(x) AS lo, max(x) AS hi FROM r GROUP BY k"),
    ("a6", "SELECT k, var_pop(v) AS vp, stddev_samp(v) AS sd, var_samp(v) AS vs FROM t GROUP BY k"),
    ("a7", "SELECT k, string_agg(s, ',' ORDER BY s) AS ss FROM t GROUP BY k"),
    ("a8", "SELECT count(DISTINCT s) AS n, count(DISTINCT k) AS nk FROM t"),
    ("a9", "SELECT k, min(s) AS lo, max(s) AS hi FROM t GROUP BY k"),
    ("a10", "SELECT u.w, count(*) AS n, sum(t.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY u.w"),
    ("a11", "SELECT k, sum(x) AS s, stddev_pop(x) AS sd FROM r GROUP BY k"),
    ("a12", "SELECT k, array_agg(v ORDER BY v) AS vs, array_agg(s ORDER BY s) AS ss FROM t GROUP BY k"),
    # HAVING, DISTINCT
    ("h1", "SELECT k, count(v) AS n FROM t GROUP BY k HAVING count(*) > 1"),
    ("h2", "SELECT max(v) AS hi, k, sum(v) AS s FROM t GROUP BY k HAVING min(v) < 7"),
    ("d1", "SELECT DISTINCT k, s FROM t"),
    ("d2", "SELECT DISTINCT coalesce(k, -1) AS k, x > 0.5 AS big FROM r"),
    # set operations
    ("s1", "SELECT k, s FROM t UNION ALL SELECT k, w FROM u"),
    ("s2", "SELECT k FROM t EXCEPT SELECT k FROM r"),
    ("s3", "SELECT k FROM t EXCEPT ALL SELECT k FROM u"),
    ("s4", "SELECT k FROM t INTERSECT SELECT k FROM u"),
    ("s5", "SELECT k FROM u UNION SELECT k FROM r"),
    # subqueries
    ("q1", "SELECT k, v FROM t WHERE k IN (SELECT k FROM u)"),
    ("q2", "SELECT k, w FROM u WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.k = u.k)"),
    # correlated other than by equalities: decorrelated on the distinct outer keys
    ("q3", "SELECT k, v FROM t WHERE v IN (SELECT t2.v FROM t t2 WHERE t2.k <> t.k)"),
    ("q4", "SELECT k, (SELECT count(*) FROM u WHERE u.k > t.k) AS n FROM t"),
    ("q5", "SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w = "
           "(SELECT max(w) FROM u u2 WHERE u2.k = t.k))"),
    ("q6", "SELECT k, w FROM u WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.x < u.k AND r.b)"),
    # a row IN as a value: PostgreSQL's NULLs of row comparisons
    ("q7", "SELECT k, w, (k, w) IN (SELECT k, s FROM t) AS x FROM u"),
    # window functions
    ("w1", "SELECT k, v, s, rank() OVER (PARTITION BY k ORDER BY v) AS rk FROM t"),
    ("w2", "SELECT k, v, s, sum(v) OVER (PARTITION BY k) AS total, count(*) OVER (PARTITION BY s) AS ns FROM t"),
    ("w3", "SELECT k, x, dense_rank() OVER (ORDER BY x) AS dr FROM r"),
    # ORDER BY ... LIMIT (whole rows ordered: ties are identical rows)
    ("l1", "SELECT k, v, s FROM t ORDER BY v DESC, k, s LIMIT 3"),
    ("l2", "SELECT k, w FROM u ORDER BY k NULLS FIRST, w LIMIT 2 OFFSET 1"),
    ("l3", "SELECT DISTINCT ON (k) k, v, s FROM t ORDER BY k, v, s"),
    # views over views
    ("o1", "SELECT k, s FROM a1 WHERE c > 1"),
    ("o2", "SELECT a1.k, a1.s, u.w FROM a1 JOIN u ON a1.k = u.k"),
    ("o3", "SELECT count(*) AS n, sum(c) AS total FROM a1"),
    ("o4", "SELECT key, count(*) AS n FROM f2 GROUP BY key"),
    ("o5", "SELECT vs, count(*) AS n FROM a12 GROUP BY vs"),
]
NAMES = [n for n, _ in VIEWS]
#: Views over which other views read (always created when a reader is).
NEEDS = {"o1": "a1", "o2": "a1", "o3": "a1", "o4": "f2", "o5": "a12"}

#: Disagreements with PostgreSQL found by this test and not fixed yet: none today.
KNOWN_WRONG: dict[str, str] = {}


def literal(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"'{v!r}'::double precision"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


def where(table: str, row: tuple) -> str:
    return " AND ".join(f"{c} IS NULL" if v is None else f"{c} = {literal(v)}" for c, v in zip(COLUMNS[table], row))


def insert(table: str, rows) -> str:
    return f"INSERT INTO {table} VALUES " + ", ".join("(" + ", ".join(map(literal, r)) + ")" for r in rows)


@st.composite
def statement(draw):
    table = draw(st.sampled_from(sorted(POOLS)))
    pool = POOLS[table]
    kind = draw(st.sampled_from(["insert", "insert", "insert", "delete", "delete_key", "update", "empty"]))
    if kind == "insert":
        return insert(table, draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4)))
    if kind == "delete":
        return f"DELETE FROM {table} WHERE {where(table, draw(st.sampled_from(pool)))}"
    k = draw(st.sampled_from([None, 1, 2, 3, 4]))
    cond = "k IS NULL" if k is None else f"k = {k}"
    if kind == "delete_key":
        return f"DELETE FROM {table} WHERE {cond}"
    if kind == "update":
        sets = {"t": "v = v + 1", "u": "w = 'y'", "r": "b = NOT b"}[table]
        return f"UPDATE {table} SET {sets} WHERE {cond}"
    return f"DELETE FROM {table} WHERE k = 99"  # an empty commit


commits = st.lists(st.lists(statement(), min_size=1, max_size=3), min_size=1, max_size=6)


def setup_bodies(conn, views) -> colmz.Catalog:
    """:func:`setup` of the views ``(name, body)`` given, in their order."""
    conn.execute("DROP TABLE IF EXISTS t, u, r CASCADE")  # and every view over them
    cat = colmz.Catalog()
    first = [insert("t", POOLS["t"][:4]), insert("u", POOLS["u"][:5]), insert("r", POOLS["r"][:4])]
    for stmt in TABLES + first:
        conn.execute(stmt)
        cat.execute(stmt)
    for n, b in views:
        conn.execute(f"CREATE VIEW {n} AS {b}")
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    return cat


def setup(conn, names, cat: colmz.Catalog | None = None):
    """A new catalog (or ``cat``, empty) and fresh PostgreSQL tables, both holding the same
    first rows, with the views ``names`` (and those they read) in both."""
    conn.execute("DROP VIEW IF EXISTS " + ", ".join(reversed(NAMES)) + " CASCADE")
    conn.execute("DROP TABLE IF EXISTS t, u, r CASCADE")
    cat = colmz.Catalog() if cat is None else cat
    first = [insert("t", POOLS["t"][:4]), insert("u", POOLS["u"][:5]), insert("r", POOLS["r"][:4])]
    for stmt in TABLES + first:
        conn.execute(stmt)
        cat.execute(stmt)
    wanted = set(names) | {NEEDS[n] for n in names if n in NEEDS}
    chosen = [(n, b) for n, b in VIEWS if n in wanted]
    for n, b in chosen:
        conn.execute(f"CREATE VIEW {n} AS {b}")
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    return cat, [n for n, _ in chosen]


def rows_of(names, rows) -> tuple[list[str], list[tuple]]:
    return names, sorted((tuple(norm(x) for x in r) for r in rows), key=repr)


def disagreement(conn, cat, name: str) -> str | None:
    """Why view ``name`` differs between colmz and PostgreSQL (``None``: they agree)."""
    table = cat.sql(f"SELECT * FROM {name}")
    cnames, crows = rows_of(table.column_names, zip(*(c.to_pylist() for c in table.columns)))
    cur = conn.execute(f"SELECT * FROM {name}")
    pnames, prows = rows_of([d.name for d in cur.description], cur.fetchall())
    if cnames != pnames:
        return f"columns {cnames}, PostgreSQL {pnames}"
    if len(crows) != len(prows) or not all(same(a, b) for a, b in zip(crows, prows)):
        # sorted by repr: floats that differ in the last digits may sort apart -- match as bags
        left = Counter(crows)
        for p in prows:
            hit = next((c for c in left if left[c] and same(c, p)), None)
            if hit is None:
                return f"rows {crows[:6]}, PostgreSQL {prows[:6]}"
            left[hit] -= 1
        if any(left.values()):
            return f"rows {crows[:6]}, PostgreSQL {prows[:6]}"
    return None


def check(conn, cat, names, after: str, counts: Counter) -> None:
    wrong = {}
    for n in names:
        why = disagreement(conn, cat, n)
        counts["compared"] += 1
        if why is not None and n not in KNOWN_WRONG:
            wrong[n] = why
    assert not wrong, f"after {after!r}: views differ from PostgreSQL: {wrong}"


def commit_each(script, after, *targets) -> None:
    """Run each commit of ``script`` (lists of statements) in every target -- a PostgreSQL
    connection statement by statement, a colmz catalog as one commit -- then ``after(text)``
    with the commit's text."""
    for stmts in script:
        text = "; ".join(stmts)
        for t in targets:
            if isinstance(t, colmz.Catalog):
                t.execute(text)
            else:
                for s in stmts:
                    t.execute(s)
        after(text)


def run_script(conn, names, script, counts: Counter):
    cat, names = setup(conn, names)
    check(conn, cat, names, "creation", counts)
    counts["commits"] += len(script)
    commit_each(script, lambda text: check(conn, cat, names, text, counts), conn, cat)
    return cat


def _property(conn, examples: int, max_commits: int) -> Counter:
    counts: Counter = Counter()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.sampled_from(NAMES), min_size=2, max_size=8, unique=True),
           st.lists(st.lists(statement(), min_size=1, max_size=3), min_size=1, max_size=max_commits))
    def prop(names, script):
        counts["examples"] += 1
        run_script(conn, names, script, counts)

    prop()
    return counts


def test_every_view_kind_equals_postgres_after_a_fixed_script(pg):
    counts: Counter = Counter()
    script = [[insert("t", POOLS["t"][4:]), insert("u", POOLS["u"][5:9])],
              ["DELETE FROM t WHERE k = 1", insert("r", POOLS["r"][4:])],
              ["UPDATE t SET v = v + 1 WHERE k = 2", "UPDATE r SET b = NOT b WHERE k = 1"],
              ["DELETE FROM u WHERE w IS NULL", insert("t", POOLS["t"][:3])],
              ["DELETE FROM t WHERE k = 99"],
              ["DELETE FROM t WHERE k IS NULL", "DELETE FROM r WHERE k = 3", insert("u", POOLS["u"][:2])],
              ["DELETE FROM t", "DELETE FROM u", "DELETE FROM r"]]
    cat = run_script(pg, NAMES, script, counts)
    recomputed = sorted(n for n in NAMES if not cat.object(n).maintained.incremental)
    print(f"\nmaintained views against PostgreSQL (fixed script): {dict(counts)}; recomputed: {recomputed}")
    assert len(recomputed) <= 2, recomputed  # the operators are what is compared
    assert counts["compared"] == len(NAMES) * (len(script) + 1)


def test_random_scripts_equal_postgres(pg):
    counts = _property(pg, us.examples(20), 5)
    print(f"\nmaintained views against PostgreSQL (random scripts): {dict(counts)}")
    assert counts["examples"] > 0 and counts["compared"] >= counts["commits"] * 2


def _generated_property(conn, examples: int, max_commits: int) -> Counter:
    from test_maintained import generated_view, over_views

    # the same names hold other bodies from example to example: no statement prepared
    # (psycopg prepares one run 5 times, and PostgreSQL refuses it once its view's type changed)
    conn.prepare_threshold = None
    counts: Counter = Counter()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(generated_view(), min_size=1, max_size=4).flatmap(
               lambda b: st.tuples(st.just(b), over_views(len(b)))),
           st.lists(st.lists(statement(), min_size=1, max_size=3), min_size=1, max_size=max_commits))
    def prop(bodies_over, script):
        bodies, over = bodies_over
        views = [(f"v{i}", b) for i, b in enumerate(bodies)] + list(over)
        names = [n for n, _ in views]
        counts["examples"] += 1
        cat = setup_bodies(conn, views)
        check(conn, cat, names, "creation", counts)
        for stmts in script:
            for s in stmts:
                conn.execute(s)
            cat.execute("; ".join(stmts))
            counts["commits"] += 1
            check(conn, cat, names, "; ".join(stmts), counts)

    prop()
    return counts


def test_generated_views_equal_postgres(pg):
    """The generated views of ``test_maintained`` (filters, 2-3-table and outer joins, every
    aggregate kind, ``HAVING``, ``DISTINCT``, ``UNION ALL``, ``EXCEPT``, windows, ``ORDER BY
    ... LIMIT``, views over views) against PostgreSQL."""
    counts = _generated_property(pg, us.examples(12), 5)
    print(f"\ngenerated views against PostgreSQL: {dict(counts)}")
    assert counts["examples"] > 0 and counts["compared"] >= counts["commits"]


@pytest.mark.slow
def test_generated_views_equal_postgres_long(pg):
    counts = _generated_property(pg, us.examples(150), 8)
    print(f"\ngenerated views against PostgreSQL (long): {dict(counts)}")
    assert counts["examples"] >= 100


@st.composite
def step(draw):
    """One step of a durable catalog's life: a commit, a commit that fails (its statements
    then a write into a missing table: nothing of it stays), DDL with the commit, or a reopen."""
    kind = draw(st.sampled_from(["commit", "commit", "commit", "fail", "ddl", "reopen"]))
    return kind, ([] if kind == "reopen" else draw(st.lists(statement(), min_size=1, max_size=3)))


def _durable_property(conn, examples: int, max_steps: int) -> Counter:
    import uuid

    counts: Counter = Counter()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.sampled_from(NAMES), min_size=2, max_size=6, unique=True),
           st.lists(step(), min_size=1, max_size=max_steps))
    def prop(names, steps):
        counts["examples"] += 1
        url = f"mem://views-pg-{uuid.uuid4().hex}"
        cat, names = setup(conn, names, colmz.Catalog(url))
        check(conn, cat, names, "creation", counts)
        for kind, stmts in steps:
            text = "; ".join(stmts)
            if kind == "reopen":
                cat = colmz.Catalog(url)  # restored from its durable operator state
                counts["reopens"] += 1
            elif kind == "fail":
                before = cat.now
                with pytest.raises(colmz.sql.SQLError, match="nowhere"):
                    cat.execute(text + "; INSERT INTO nowhere VALUES (1)")
                assert cat.now == before  # rolled back, operators too: PostgreSQL ran nothing
                counts["failed"] += 1
            else:
                for s in stmts:
                    conn.execute(s)
                if kind == "ddl":  # DDL in the same commit, then a view created and dropped
                    text += "; CREATE TABLE extra (a INT); DROP TABLE extra"
                cat.execute(text)
                if kind == "ddl":
                    cat.execute(f"CREATE MATERIALIZED VIEW late AS {VIEWS[0][1]}; DROP MATERIALIZED VIEW late")
                counts["commits"] += 1
            check(conn, cat, names, f"{kind}: {text}", counts)

    prop()
    return counts


def test_random_durable_scripts_with_failures_ddl_and_reopens_equal_postgres(pg):
    counts = _durable_property(pg, us.examples(10), 6)
    print(f"\nmaintained durable views against PostgreSQL (failures, DDL, reopens): {dict(counts)}")
    assert counts["examples"] > 0 and counts["compared"] >= counts["commits"] * 2


@pytest.mark.slow
def test_random_durable_scripts_with_failures_ddl_and_reopens_equal_postgres_long(pg):
    counts = _durable_property(pg, us.examples(60), 12)
    print(f"\nmaintained durable views against PostgreSQL (failures, DDL, reopens, long): {dict(counts)}")
    assert counts["examples"] >= 50 and counts["reopens"] > 0 and counts["failed"] > 0


@pytest.mark.slow
def test_random_scripts_equal_postgres_long(pg):
    counts = _property(pg, us.examples(120), 10)
    print(f"\nmaintained views against PostgreSQL (random scripts, long): {dict(counts)}")
    assert counts["examples"] >= 100

