"""Sums and averages of floats in maintained views: within 1e-9 relative of the recompute and
of PostgreSQL 15, whatever was retracted before.

A float sum kept by adding each change's ``value * diff`` to a running ``float64`` loses the
small terms a large one swamped: insert ``1e15`` and ``-3.3``, retract ``1e15``, and the
running sum is ``-3.25``, where a recompute over the rows held (and PostgreSQL) answers
``-3.3``. So the planner keeps ``sum``/``avg`` of a float column per affected group (the
group's held rows summed again, as a recompute does), never as a running float; integer
sums stay accumulable (exact). Checked here on the cancelling changes, against the
recompute under random changes of values of very different magnitudes, and against
PostgreSQL (``CI=1``).
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from sql_oracle import oracle_url, require, same

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLE = "CREATE TABLE r (k BIGINT, x DOUBLE PRECISION, i BIGINT)"

#: Views summing floats: grouped, global, beside an exact sum and a min, under an expression
#: and HAVING, over a join, and a window sum.
VIEWS = [
    ("g", "SELECT k, sum(x) AS s, avg(x) AS a, count(x) AS n FROM r GROUP BY k"),
    ("glob", "SELECT sum(x) AS s, avg(x) AS a, count(*) AS n FROM r"),
    ("mixed", "SELECT k, sum(x) AS s, sum(i) AS si, min(x) AS lo FROM r GROUP BY k"),
    ("expr", "SELECT k, sum(x) * 2 AS d FROM r GROUP BY k HAVING sum(x) < 1e14"),
    ("joined", "SELECT a.k, sum(a.x + b.x) AS s FROM r a JOIN r b ON a.k = b.k GROUP BY a.k"),
    ("win", "SELECT k, x, sum(x) OVER (PARTITION BY k) AS s FROM r"),
]

#: Values of very different magnitudes: a sum holding 1e15 keeps none of 0.1's low bits. No
#: two cancel while held (``7e12 + 0.001 - 7e12`` is ill-conditioned in any order of terms:
#: PostgreSQL's answer then is its own rounding's), only by retraction.
VALUES = [1e15, 0.1, -3.3, 2.5, 1e-3, 7e12, None, float("nan"), float("inf")]


def literal(v) -> str:
    if v is None:
        return "NULL"
    return f"'{v!r}'::double precision" if math.isfinite(v) else f"'{v}'::double precision"


def rows(cat: colmz.Catalog, name: str) -> list[tuple]:
    return sorted((tuple(r.values()) for r in cat.sql(f"SELECT * FROM {name}").to_pylist()), key=repr)


def norm(v):
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


def agree(a: list[tuple], b: list[tuple]) -> bool:
    """Bags of rows equal, numbers within 1e-9 relative (``sql_oracle.same``)."""
    left = Counter(tuple(map(norm, r)) for r in a)
    for r in b:
        r = tuple(map(norm, r))
        hit = next((c for c in left if left[c] and same(c, r)), None)
        if hit is None:
            return False
        left[hit] -= 1
    return not any(left.values())


def catalogs():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLE)
        for name, body in VIEWS:
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    return cats


def check(cats, after: str) -> None:
    inc, rec = cats
    for name, _ in VIEWS:
        assert agree(rows(inc, name), rows(rec, name)), (name, after, rows(inc, name), rows(rec, name))


def test_a_retracted_large_value_leaves_the_small_ones_exact():
    cats = catalogs()
    for text in ["INSERT INTO r VALUES (3, 1e15, 1), (3, -3.3, 2), (4, 0.1, 3), (4, 0.2, 4)",
                 "DELETE FROM r WHERE x = 1e15",
                 "INSERT INTO r VALUES (4, 1e15, 5)",
                 "DELETE FROM r WHERE x = 1e15; INSERT INTO r VALUES (4, 0.3, 6)"]:
        for cat in cats:
            cat.execute(text)
        check(cats, text)
    inc = cats[0]
    assert rows(inc, "g") == [(3, -3.3, -3.3, 1), (4, 0.1 + 0.2 + 0.3, (0.1 + 0.2 + 0.3) / 3, 3)]
    assert rows(inc, "glob")[0][0] == pytest.approx(-3.3 + 0.6, rel=1e-12)


def test_float_sums_are_kept_per_group_and_integer_sums_accumulate():
    inc = catalogs()[0]
    # the float sum is never a running float: the reduce holding it re-sums affected groups
    reduce = [ln for ln in inc.explain("mixed").lines if ln.lstrip().startswith("Reduce")]
    assert len(reduce) == 1 and "sum(x)" in reduce[0], reduce
    assert "basic (recomputed per affected group in DuckDB)  -- per affected group" in reduce[0]
    cat = colmz.Catalog()
    cat.execute(TABLE + "; CREATE MATERIALIZED VIEW s AS SELECT k, sum(i) AS s, avg(i) AS a FROM r GROUP BY k")
    assert "sum(r.i) accumulable" in str(cat.explain("s"))


@st.composite
def change(draw):
    kind = draw(st.sampled_from(["insert", "insert", "delete", "delete_key", "update"]))
    if kind == "insert":
        rows_ = draw(st.lists(st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from(VALUES),
                                        st.integers(-3, 3)), min_size=1, max_size=4))
        return "INSERT INTO r VALUES " + ", ".join(f"({'NULL' if k is None else k}, {literal(x)}, {i})"
                                                   for k, x, i in rows_)
    if kind == "delete":
        x = draw(st.sampled_from([v for v in VALUES if v is not None]))
        return f"DELETE FROM r WHERE x = {literal(x)}"
    if kind == "delete_key":
        return f"DELETE FROM r WHERE k = {draw(st.sampled_from([1, 2]))}"
    return f"UPDATE r SET x = x * 10 WHERE k = {draw(st.sampled_from([1, 2]))}"


@settings(max_examples=us.examples(15), deadline=None)
@given(st.lists(st.lists(change(), min_size=1, max_size=3), min_size=1, max_size=8))
def test_float_sums_equal_the_recompute_within_1e_9(commits):
    cats = catalogs()
    for stmts in commits:
        text = "; ".join(stmts)
        for cat in cats:
            cat.execute(text)
        check(cats, text)


def test_float_sums_equal_postgres_within_1e_9():
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    conn = psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True)
    try:
        cat = colmz.Catalog()
        conn.execute(TABLE)
        cat.execute(TABLE)
        for name, body in VIEWS:
            if name == "win":
                continue
            conn.execute(f"CREATE VIEW {name} AS {body}")
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
        script = ["INSERT INTO r VALUES (3, 1e15, 1), (3, -3.3, 2), (4, 0.1, 3), (4, 0.2, 4), (5, 7e12, 0)",
                  "DELETE FROM r WHERE x = 1e15",
                  "INSERT INTO r VALUES (4, 1e15, 5), (5, 0.001, 1), (5, 2.5, 2)",
                  "DELETE FROM r WHERE x = 1e15; DELETE FROM r WHERE x = 7e12",
                  "UPDATE r SET x = x * 10 WHERE k = 4"]
        for text in script:
            for s in text.split("; "):
                conn.execute(s)
            cat.execute(text)
            for name, _ in VIEWS:
                if name == "win":
                    continue
                theirs = sorted((tuple(float(v) if v is not None and not isinstance(v, int) else v for v in r)
                                 for r in conn.execute(f"SELECT * FROM {name}").fetchall()), key=repr)
                assert agree(rows(cat, name), theirs), (name, text, rows(cat, name), theirs)
    finally:
        conn.close()


def test_a_durable_float_sum_resumes_reading_no_input():
    import uuid

    url = f"mem://float-sums-{uuid.uuid4().hex}"
    cat = colmz.Catalog(url)
    cat.execute(TABLE)
    for name, body in VIEWS[:2]:
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    cat.execute("INSERT INTO r VALUES (3, 1e15, 1), (3, -3.3, 2); DELETE FROM r WHERE x = 1e15")
    again = colmz.Catalog(url)
    # the per-group state (input and output arranged by group) is restored, not rebuilt
    assert again.view_work == {"initialized": 0, "restored": 2, "input_rows_read": 0}
    again.execute("INSERT INTO r VALUES (3, 0.3, 3)")
    assert rows(again, "g") == [(3, -3.3 + 0.3, (-3.3 + 0.3) / 2, 2)]
    assert rows(again, "glob") == [(-3.3 + 0.3, (-3.3 + 0.3) / 2, 2)]


def test_spark_buckets_recompute_a_keyed_float_sum_and_refuse_a_global_one():
    pytest.importorskip("pyspark")
    import pyarrow as pa

    from colmz.spark.views import bucketed_view

    schemas = {"r": {"k": pa.int64(), "x": pa.float64()}}
    assert bucketed_view("SELECT k, sum(x) AS s FROM r GROUP BY k", schemas).kind == "plan"
    with pytest.raises(ValueError, match=r"global aggregate \(no GROUP BY\) recomputed in DuckDB \(sum\(x\)\)"):
        bucketed_view("SELECT sum(x) AS s FROM r", schemas)
