"""PostgreSQL 15's float overflow in aggregates and over them, run in colmz and PostgreSQL.

``sum`` of doubles adds with ``float8pl`` and ``avg``, ``var_*``, ``stddev*`` accumulate with
``float8_accum`` (``src/backend/utils/adt/float.c``): both raise "value out of range:
overflow" where finite inputs overflow (the running sum; float8_accum's sum of squared
deviations, ``avg`` of 1e300 beside another value); a NaN or an infinity read first makes
the result NaN (or infinite) from there on, and a variance of one is NaN. Arithmetic over an
aggregate of a float column (``sum(f) * 1e10``, in HAVING, over a window) raises as a float
column's does. colmz's rule (``colmz.sql.floatcols``) does not depend on the order the rows
are read in; PostgreSQL's answer does when a NaN or an infinity comes among finite values
that overflow, or when finite values overflow only in some orders (1e308, 1e308, -1e308):
there colmz refuses by name, and elsewhere it answers what PostgreSQL answers in every order.

Checked: fixed queries (each outcome as :func:`sql_oracle.outcome` classifies it, colmz's
error PostgreSQL's words), Hypothesis-drawn groups of edge values under every aggregate
(grouped, global, with a FILTER, over cumulative and sliding windows, and arithmetic over
them), every order of drawn multisets of {1e308, -1e308, inf, -inf, NaN, 1, 0} in
PostgreSQL against colmz's plain, grouped, window and maintained-view answers (slow), and a
maintained view over such aggregates: a commit raises exactly when PostgreSQL's query over
the new rows raises, leaving the table and the view unchanged, and the view equals
PostgreSQL's answer otherwise.
"""

from __future__ import annotations

import itertools
import math

import pytest

pytest.importorskip("duckdb")
import sql_oracle  # noqa: E402 - tests/ is on sys.path
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import colmz  # noqa: E402
from colmz.sql import SQLError  # noqa: E402

sql_oracle.require("psycopg", "the PostgreSQL oracle needs psycopg")

OVERFLOW = "value out of range: overflow"

#: A table of edge values, the non-finite rows first (PostgreSQL reads them first).
EXTRA_SETUP = [
    "CREATE TABLE fl (id INT, k INT, f DOUBLE PRECISION)",
    "INSERT INTO fl VALUES (1, 1, 'NaN'), (2, 2, 'Infinity'), (3, 1, 0.5), (4, 1, 1e300), (5, 2, 2.5), "
    "(6, 3, 1e308), (7, 3, 1e308), (8, 4, 1e200), (9, 4, -1e200), (10, 5, 1e200), (11, 5, 1e200), (12, 6, NULL)",
]

CASES = [
    # sum (float8pl): finite + finite overflowing raises; 1e200 + -1e200 is 0; a NaN or an
    # infinity beside finite values that overflow: PostgreSQL's answer hangs on the order it
    # reads them in (NaN first: NaN; last: its error), which colmz refuses by name
    ("sum_overflows", "SELECT k, sum(f) AS s FROM fl GROUP BY k", "both fail"),
    ("sum_fits", "SELECT k, sum(f) AS s FROM fl WHERE k <> 3 GROUP BY k", "match"),
    ("sum_global_nan_first", "SELECT sum(f) AS s FROM fl", "refused"),
    ("sum_filtered", "SELECT sum(f) FILTER (WHERE id > 2) AS s FROM fl", "both fail"),
    ("sum_distinct", "SELECT sum(DISTINCT f) AS s FROM fl WHERE k = 3", "match"),
    # avg and the variances (float8_accum): 1e300 beside 0.5 overflows the sum of squares
    ("avg_overflows", "SELECT k, avg(f) AS a FROM fl WHERE k <> 3 GROUP BY k", "both fail"),
    ("avg_fits", "SELECT k, avg(f) AS a FROM fl WHERE k IN (2, 5, 6) GROUP BY k", "match"),
    ("avg_where_drops_it", "SELECT k, avg(f) AS a FROM fl WHERE f < 1e250 GROUP BY k", "both fail"),
    ("avg_where_drops_all", "SELECT k, avg(f) AS a FROM fl WHERE f < 1e150 AND k <> 4 GROUP BY k", "match"),
    ("avg_nan_first", "SELECT avg(f) AS a, var_pop(f) AS v FROM fl WHERE k = 1", "refused"),
    ("avg_of_equal_huge", "SELECT avg(f) AS a, var_pop(f) AS v FROM fl WHERE k = 5", "match"),
    ("var_of_opposite_huge", "SELECT var_samp(f) AS v FROM fl WHERE k = 4", "both fail"),
    ("stddev_overflows", "SELECT k, stddev(f) AS s FROM fl WHERE k IN (1, 3) AND id > 1 GROUP BY k", "both fail"),
    ("variances_of_one_nan", "SELECT var_pop(f) AS a, var_samp(f) AS b, stddev_pop(f) AS c, stddev(f) AS d "
     "FROM fl WHERE id IN (1, 2)", "match"),
    ("variance_of_a_nan_each", "SELECT k, var_pop(f) AS v, stddev_pop(f) AS s FROM fl WHERE k IN (1, 2) "
     "AND id <= 2 GROUP BY k", "match"),
    ("avg_filter", "SELECT k, avg(f) FILTER (WHERE id > 1) AS a FROM fl WHERE k = 1 GROUP BY k", "both fail"),
    ("avg_distinct_equal", "SELECT avg(DISTINCT f) AS a FROM fl WHERE k = 5", "match"),
    ("having_avg", "SELECT k FROM fl GROUP BY k HAVING avg(f) > 0", "both fail"),
    ("avg_of_a_real", "SELECT avg(f::real) AS a FROM fl WHERE k = 2", "match"),
    # arithmetic over aggregates of a float column
    ("sum_times_numeric", "SELECT k, sum(f) * 1e10 AS s FROM fl WHERE id > 1 AND k IN (1, 2) GROUP BY k", "both fail"),
    ("sum_times_numeric_fits", "SELECT k, sum(f) * 1e10 AS s FROM fl WHERE k = 2 GROUP BY k", "match"),
    ("max_times_float", "SELECT max(f) * 1e110::float8 AS m FROM fl WHERE k = 4", "both fail"),
    ("min_times_underflow", "SELECT min(f) * 1e-300::float8 * 1e-30::float8 AS m FROM fl WHERE k = 2", "both fail"),
    ("having_sum_times", "SELECT k FROM fl GROUP BY k HAVING sum(f) * 1e10 > 0", "both fail"),
    ("having_sum_times_fits", "SELECT k FROM fl WHERE k IN (2, 5) GROUP BY k HAVING max(f) * 10 > 0", "match"),
    ("order_by_aggregate", "SELECT k, sum(f) AS s FROM fl WHERE k IN (2, 4) GROUP BY k ORDER BY sum(f) * 2, k",
     "match"),
    # windows: each frame accumulated, arithmetic over a window call
    ("window_cumulative_avg", "SELECT id, avg(f) OVER (ORDER BY id) AS a FROM fl WHERE k IN (2, 4) AND id > 2", "both fail"),
    ("window_cumulative_nan_first", "SELECT id, avg(f) OVER (ORDER BY id) AS a FROM fl WHERE k IN (2, 4)", "refused"),
    ("window_sliding_avg", "SELECT id, avg(f) OVER (ORDER BY id ROWS 1 PRECEDING) AS a FROM fl WHERE k = 4",
     "both fail"),
    ("window_sliding_sum", "SELECT id, sum(f) OVER (ORDER BY id ROWS 1 PRECEDING) AS a FROM fl WHERE k IN (3, 4)",
     "both fail"),
    ("window_partitioned_sum", "SELECT id, sum(f) OVER (PARTITION BY k) AS a FROM fl WHERE k IN (4, 5)", "match"),
    ("window_sum_times", "SELECT id, sum(f) OVER (PARTITION BY k) * 1e110 AS a FROM fl WHERE k IN (2, 5)",
     "both fail"),
    ("window_products", "SELECT id, max(f * f) OVER () AS a FROM fl WHERE k = 5", "both fail"),
    # a product of two float columns per row, a WHERE keeping only the rows that fit
    ("product_grouped", "SELECT k, sum(f * f) AS s FROM fl GROUP BY k", "both fail"),
    ("product_where", "SELECT id, f * f AS p FROM fl WHERE abs(f) < 1e100", "match"),
    # a filter on a grouped subquery's grouping column drops the groups before they are
    # aggregated (PostgreSQL pushes it down as a HAVING and moves that to the WHERE)
    ("grouped_subquery_filtered", "SELECT * FROM (SELECT k, avg(f) AS a FROM fl GROUP BY k) q WHERE abs(k - 2) < 1",
     "match"),
    ("grouped_cte_filtered", "WITH c AS (SELECT k, sum(f) * 2 AS s FROM fl GROUP BY k) SELECT * FROM c "
     "WHERE k % 3 <> 0 AND k <> 4", "match"),
    ("grouped_subquery_on_aggregate", "SELECT * FROM (SELECT k, avg(f) AS a FROM fl GROUP BY k) q WHERE a < 1",
     "both fail"),
    ("product_pushed", "SELECT id, p FROM (SELECT id, f * f AS p FROM fl) s WHERE abs(id - 5) < 1", "match"),
]


both = sql_oracle.both_fixture(EXTRA_SETUP)


@pytest.mark.parametrize(("name", "sql", "expected"), CASES, ids=[c[0] for c in CASES])
def test_answers_as_postgresql(both, name, sql, expected):
    conn, cat = both
    kind, detail = sql_oracle.outcome(conn, cat, sql)
    assert kind == expected, f"{name}: {kind} {detail}"
    if kind == "both fail":
        with pytest.raises(SQLError, match="value out of range: (overflow|underflow)"):
            cat.sql(sql)


#: Values whose overflow does not hang on the order they are read in (as PostgreSQL's does
#: where a cancelling -1e308 follows two 1e308, or a NaN follows what overflows).
FINITE = [0.5, -0.0, 2.5, 1e200, -1e200, 1e300, 1e308]
NON_FINITE = ["NaN", "Infinity", "-Infinity"]

AGGREGATES = ["sum", "avg", "var_pop", "var_samp", "stddev", "stddev_pop", "variance"]


def _literal(v) -> str:
    return "NULL" if v is None else f"'{v}'" if isinstance(v, str) else repr(v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(1, 3), st.sampled_from(FINITE + NON_FINITE + [None])),
                     min_size=1, max_size=7),
       fn=st.sampled_from(AGGREGATES),
       shape=st.sampled_from(["grouped", "global", "filter", "cumulative", "sliding", "times", "having"]))
def test_drawn_groups_as_postgresql(pg, rows, fn, shape):
    # non-finite first: the order PostgreSQL reads them in, where its answer is colmz's
    ordered = sorted(rows, key=lambda r: not isinstance(r[1], str))
    values = ", ".join(f"({i}, {k}, {_literal(v)})" for i, (k, v) in enumerate(ordered))
    pg.execute("DROP TABLE IF EXISTS g")
    cat = colmz.Catalog()
    for stmt in ("CREATE TABLE g (id INT, k INT, f DOUBLE PRECISION)", f"INSERT INTO g VALUES {values}"):
        pg.execute(stmt)
        cat.execute(stmt)
    sql = {
        "grouped": f"SELECT k, {fn}(f) AS a FROM g GROUP BY k",
        "global": f"SELECT {fn}(f) AS a FROM g",
        "filter": f"SELECT k, {fn}(f) FILTER (WHERE id > 0) AS a FROM g GROUP BY k",
        "cumulative": f"SELECT id, {fn}(f) OVER (ORDER BY id) AS a FROM g",
        "sliding": f"SELECT id, {fn}(f) OVER (PARTITION BY k ORDER BY id ROWS 1 PRECEDING) AS a FROM g",
        "times": f"SELECT k, {fn}(f) * 1e10 AS a FROM g GROUP BY k",
        "having": f"SELECT k FROM g GROUP BY k HAVING {fn}(f) * 10 > 0",
    }[shape]
    kind, detail = sql_oracle.outcome(pg, cat, sql)
    if kind == "refused":
        # only where PostgreSQL's answer hangs on the order of some group's or frame's rows
        assert any(_order_dependent(fn, frame) for frame in _frames(shape, ordered)), \
            f"refused: {sql} over {ordered}\n{detail}"
        return
    assert kind in ("match", "both fail"), f"{kind}: {sql} over {ordered}\n{detail}"


def _raises(fn: str, values) -> bool:
    # Whether PostgreSQL 15's transition of fn (float8pl for sum, else float8_accum) raises
    # "value out of range: overflow" reading ``values`` in this order (float.c, as written)
    if fn == "sum":
        s = None
        for x in values:
            if s is not None:
                r = s + x
                if math.isinf(r) and not math.isinf(s) and not math.isinf(x):
                    return True
                s = r
            else:
                s = x
        return False
    n = sx = sxx = 0.0
    for x in values:
        prev = sx
        n += 1.0
        sx += x
        if n > 1.0:
            tmp = x * n - sx
            sxx += tmp * tmp / (n * (n - 1.0))
            if math.isinf(sx) or math.isinf(sxx):
                if not math.isinf(prev) and not math.isinf(x):
                    return True
                sxx = math.nan
        elif not math.isfinite(x):
            sxx = math.nan
    return False


def _order_dependent(fn: str, values) -> bool:
    # whether some order of the non-NULL values raises and another does not
    vals = [float(v) for v in values if v is not None]
    return len({_raises(fn, p) for p in itertools.permutations(vals)}) > 1


def _frames(shape: str, rows):
    # the multisets of values each aggregate of the drawn query reads (rows: (k, value) by id)
    if shape == "global":
        return [[v for _, v in rows]]
    if shape == "cumulative":
        return [[v for _, v in rows[: i + 1]] for i in range(len(rows))]
    groups = {}
    for k, v in rows:
        groups.setdefault(k, []).append(v)
    if shape == "sliding":
        return [g[max(0, i - 1) : i + 1] for g in groups.values() for i in range(len(g))]
    return list(groups.values())


def test_a_view_commit_raises_as_postgresqls_query(pg):
    # each insert into a view's input: the commit raises where PostgreSQL's query over the
    # new rows raises (table and view unchanged), else the view is PostgreSQL's answer
    bodies = ["SELECT k, sum(f) AS s FROM t GROUP BY k", "SELECT k, avg(f) AS a FROM t GROUP BY k",
              "SELECT sum(f) AS s FROM t", "SELECT k, var_samp(f) AS v FROM t GROUP BY k",
              "SELECT k, sum(f) * 10 AS s FROM t GROUP BY k"]
    steps = ["(1, 1e307), (2, 0.5)", "(1, 1e308)", "(2, 1e300)", "(3, 1e200), (3, 1e200)", "(3, -1e200)",
             "(1, 'NaN')", "(1, 1e307)", "(4, 2.5)"]
    for body in bodies:
        pg.execute("DROP TABLE IF EXISTS t")
        pg.execute("CREATE TABLE t (k INT, f DOUBLE PRECISION)")
        cat = colmz.Catalog(views="incremental")
        cat.execute("CREATE TABLE t (k INT, f DOUBLE PRECISION)")
        cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
        for step in steps:
            before = (cat.sql("SELECT * FROM t").to_pylist(), cat.sql("SELECT * FROM v").to_pylist())
            pg.execute(f"INSERT INTO t VALUES {step}")
            want = sql_oracle.run_pg(pg, body)
            if want is None:
                pg.execute(f"DELETE FROM t WHERE ctid IN (SELECT ctid FROM t ORDER BY ctid DESC "
                           f"LIMIT {step.count('(')})")
                with pytest.raises(SQLError, match=OVERFLOW):
                    cat.execute(f"INSERT INTO t VALUES {step}")
                assert (cat.sql("SELECT * FROM t").to_pylist(), cat.sql("SELECT * FROM v").to_pylist()) == before
                continue
            cat.execute(f"INSERT INTO t VALUES {step}")
            got = sql_oracle.run_colmz(cat, "SELECT * FROM v")
            assert got[0] == want[0], body
            g, w = sorted(got[1], key=repr), sorted(want[1], key=repr)
            assert len(g) == len(w) and all(sql_oracle.same(a, b) for a, b in zip(g, w)), (body, step)


#: The values whose every order the slow test below reads in PostgreSQL.
ORDER_VALUES = [1e308, -1e308, "Infinity", "-Infinity", "NaN", 1.0, 0.0]


def _pg_answer(pg, fn: str, values) -> tuple[str, object]:
    # PostgreSQL's answer reading ``values`` in this order (a VALUES list is read as written)
    import psycopg

    rows = ", ".join(f"({_literal(v)}::float8)" for v in values)
    try:
        return "value", pg.execute(f"SELECT {fn}(f) FROM (VALUES {rows}) v(f)").fetchone()[0]
    except psycopg.Error as e:
        return "error", str(e).splitlines()[0]


def _same_value(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-9)


def _colmz_answers(fn: str, values):
    # colmz's answers over a table of ``values``: plain, grouped, as a window and as a
    # maintained view (each an answer, or the exception raised)
    cat = colmz.Catalog(views="incremental")
    cat.execute("CREATE TABLE g (k INT, f DOUBLE PRECISION)")
    cat.execute(f"CREATE MATERIALIZED VIEW v AS SELECT k, {fn}(f) AS a FROM g GROUP BY k")
    rows = ", ".join(f"(1, {_literal(v)}::float8)" for v in values)
    out = {}
    try:
        cat.execute(f"INSERT INTO g VALUES {rows}")
    except SQLError as e:
        out["view"] = e
    else:
        out["view"] = [r["a"] for r in cat.sql("SELECT a FROM v").to_pylist()]
    if "view" in out and isinstance(out["view"], Exception):  # (the table is then empty)
        plain = colmz.Catalog()
        plain.execute("CREATE TABLE g (k INT, f DOUBLE PRECISION)")
        plain.execute(f"INSERT INTO g VALUES {rows}")
        cat = plain
    for shape, sql in (("plain", f"SELECT {fn}(f) AS a FROM g"),
                       ("grouped", f"SELECT k, {fn}(f) AS a FROM g GROUP BY k"),
                       ("window", f"SELECT {fn}(f) OVER (PARTITION BY k) AS a FROM g")):
        try:
            out[shape] = [r["a"] for r in cat.sql(sql).to_pylist()]
        except SQLError as e:
            out[shape] = e
    return out


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.sampled_from(ORDER_VALUES), min_size=1, max_size=4),
       fn=st.sampled_from(["sum", "avg", "var_pop", "var_samp", "stddev"]))
def test_every_order_as_postgresql(pg, values, fn):
    # PostgreSQL read in every order of the multiset: where every order gives one answer,
    # colmz's plain, grouped, window and maintained-view answers are it (its error in
    # PostgreSQL's words); where orders differ, colmz refuses by name
    from colmz.sql import UnsupportedSQL

    answers = [_pg_answer(pg, fn, p) for p in set(itertools.permutations(values))]
    first = answers[0]
    agreed = all(a[0] == first[0] and (a[1] == first[1] if a[0] == "error" else _same_value(a[1], first[1]))
                 for a in answers)
    for shape, got in _colmz_answers(fn, values).items():
        where = f"{fn} over {values} ({shape}): PostgreSQL {sorted(set(map(repr, answers)))}, colmz {got!r}"
        if not agreed:
            assert isinstance(got, UnsupportedSQL), where
        elif first[0] == "error":
            assert isinstance(got, SQLError) and not isinstance(got, UnsupportedSQL), where
            assert str(got) == first[1], where
        else:
            assert not isinstance(got, Exception) and all(_same_value(a, first[1]) for a in got), where
