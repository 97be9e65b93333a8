"""Views with temporal filters (``mz_now()`` compared with a column) kept by their operators
in ``colmz.Catalog``: a ``TemporalFilter`` at the plan's root, its future updates held by
the view sink's correction and written as commits pass their times.

The oracle: at every commit the view equals ``Catalog(views="recompute")``'s (the query
recomputed with ``mz_now()`` at the commit's time), and read ``AS OF`` any time ``T`` since
the previous commit it equals the query evaluated ``AS OF T`` -- including commits that
touch none of the view's inputs and commits that jump several times ahead. Work counters
show the operators never read the inputs whole.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter

import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow.maintained import FallbackWarning
from colmz.dataflow.temporal import TemporalFilter as TemporalFilterOp
from colmz.sql import SQLError, UnsupportedSQL

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLES = "CREATE TABLE t (k BIGINT, a BIGINT, b INT, s TEXT); CREATE TABLE u (k BIGINT, w TEXT)"

#: Temporal filters the operators keep (a TemporalFilter at the root).
TEMPORAL = [
    "SELECT k, a FROM t WHERE mz_now() >= a AND mz_now() < a + 3",
    "SELECT k FROM t WHERE mz_now() <= b + 1",
    "SELECT k, a, s FROM t WHERE k > 0 AND mz_now() = a",
    "SELECT t.k, u.w FROM t JOIN u ON t.k = u.k WHERE mz_now() > t.a - 2",
    "SELECT k, a FROM t WHERE upper(s) <> 'X' AND mz_now() < a",
    "SELECT k, a FROM t WHERE a - 1 <= mz_now() AND 5 + b > mz_now() AND mz_now() <= a + 6",
    "SELECT k AS key, b FROM t WHERE mz_now() > b AND b IS NOT NULL ORDER BY b",
]
#: Other uses of mz_now(): recomputed at every commit, the reason named.
RECOMPUTED = [
    "SELECT k, mz_now() AS now FROM t WHERE a > 0",
    "SELECT k FROM t WHERE mz_now() >= a UNION ALL SELECT k FROM u",
    "SELECT k, count(*) AS n FROM t WHERE mz_now() < a GROUP BY k",
    "SELECT k FROM t WHERE mz_now() < a OR k = 1",
    "SELECT q.k, q.a, u.w FROM (SELECT k, a FROM t WHERE mz_now() < a) q JOIN u ON q.k = u.k",
]
#: Views over the first temporal view (v0): fed its flips as its changes.
OVER = [("over", "SELECT k, count(*) AS n, sum(a) AS s FROM v0 GROUP BY k")]

VALUES = st.one_of(st.none(), st.integers(-2, 30))


def canon(v):
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else float(f"{v:.9g}") + 0.0
    return v


def bag(table: pa.Table) -> Counter:
    cols = [table.column(c).to_pylist() for c in table.column_names]
    return Counter(tuple(canon(v) for v in r) for r in zip(*cols))


def lit(v) -> str:
    return "NULL" if v is None else ("'" + v + "'" if isinstance(v, str) else str(v))


@st.composite
def statement(draw):
    table = draw(st.sampled_from(["t", "t", "u"]))
    kind = draw(st.sampled_from(["insert", "insert", "delete", "update", "empty"]))
    if kind == "insert" and table == "t":
        rows = draw(st.lists(st.tuples(st.sampled_from([None, 1, 2, 3]), VALUES, VALUES,
                                       st.sampled_from([None, "x", "y"])), min_size=1, max_size=3))
        return "INSERT INTO t VALUES " + ", ".join("(" + ", ".join(map(lit, r)) + ")" for r in rows)
    if kind == "insert":
        rows = draw(st.lists(st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from(["p", "q", None])),
                             min_size=1, max_size=2))
        return "INSERT INTO u VALUES " + ", ".join("(" + ", ".join(map(lit, r)) + ")" for r in rows)
    k = draw(st.sampled_from([None, 1, 2, 3]))
    cond = "k IS NULL" if k is None else f"k = {k}"
    if kind == "delete":
        return f"DELETE FROM {table} WHERE {cond}"
    if kind == "update":
        return (f"UPDATE t SET a = a + {draw(st.integers(-3, 5))} WHERE {cond}" if table == "t"
                else f"UPDATE u SET w = 'q' WHERE {cond}")
    return "DELETE FROM u WHERE k = 99"  # an empty commit


@st.composite
def script(draw):
    """``(text, gap)``: statements committed at ``now + gap`` (a commit that touches only
    ``u``, an empty one, a failing one, or DDL among them)."""
    kind = draw(st.sampled_from(["commit", "commit", "commit", "fail", "ddl"]))
    stmts = draw(st.lists(statement(), min_size=1, max_size=2))
    gap = draw(st.integers(1, 4))
    text = "; ".join(stmts)
    if kind == "fail":
        text += "; INSERT INTO nowhere VALUES (1)"
    elif kind == "ddl":
        text += "; CREATE TABLE IF NOT EXISTS extra (z INT); DROP TABLE extra"
    return text, gap


def catalogs(bodies):
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES)
        cat.execute("INSERT INTO t VALUES (1, 2, 3, 'x'), (2, 4, NULL, 'y'), (3, NULL, 1, NULL), (1, 5, 9, 'x'); "
                    "INSERT INTO u VALUES (1, 'p'), (2, 'q')")
        for i, b in enumerate(bodies):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
        if bodies and bodies[0] == TEMPORAL[0]:
            for name, b in OVER:
                cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {b}")
    return cats


def views(cat):
    return [n for n in cat.names if cat.object(n).kind == "materialized view"]


def check(cats, bodies, since: int, text: str):
    inc, rec = cats
    assert inc.now == rec.now
    for n in views(inc):
        assert bag(inc.sql(f"SELECT * FROM {n}")) == bag(rec.sql(f"SELECT * FROM {n}")), (n, text)
    # every time since the previous commit, flips between commits included (a view
    # recomputed changes at commits only: its contents between them are the last commit's)
    for i, body in enumerate(bodies):
        if body not in TEMPORAL:
            continue
        for at in range(since, inc.now + 1):
            assert bag(inc.sql(f"SELECT * FROM v{i}", as_of=at)) == bag(inc.sql(body, as_of=at)), (body, at, text)


@settings(max_examples=us.examples(15), deadline=None)
@given(st.lists(st.sampled_from(TEMPORAL + RECOMPUTED), min_size=1, max_size=4, unique=True),
       st.lists(script(), min_size=1, max_size=8))
def test_temporal_views_equal_the_recompute_at_every_time(bodies, scripts):
    cats = catalogs(bodies)
    inc = cats[0]
    for i, b in enumerate(bodies):
        assert inc.object(f"v{i}").maintained.incremental == (b in TEMPORAL), b
    check(cats, bodies, inc.now, "creation")
    for text, gap in scripts:
        since = inc.now + 1
        outcomes = []
        for cat in cats:
            try:
                cat.execute(text, time=cat.now + gap)
                outcomes.append(None)
            except (SQLError, ValueError) as e:
                outcomes.append(type(e).__name__)
        assert outcomes[0] == outcomes[1], text
        check(cats, bodies, min(since, inc.now), text)


@settings(max_examples=us.examples(150), deadline=None)
@given(st.lists(st.sampled_from(TEMPORAL + RECOMPUTED), min_size=1, max_size=6, unique=True),
       st.lists(script(), min_size=1, max_size=16))
@pytest.mark.slow
def test_temporal_views_equal_the_recompute_long(bodies, scripts):
    test_temporal_views_equal_the_recompute_at_every_time.hypothesis.inner_test(bodies, scripts)


def _temporal_op(cat, name):
    mv = cat.object(name).maintained
    ops = [op for _, _, op, _, _ in mv._pipeline.steps() if isinstance(op, TemporalFilterOp)]
    assert len(ops) == 1
    return ops[0]


def test_commits_touching_no_input_flip_the_view_without_recomputing():
    cat = colmz.Catalog()
    cat.execute(TABLES)
    n = 1000
    cat.append("t", pa.table({"k": pa.array(range(n), pa.int64()), "a": pa.array(range(n), pa.int64()),
                              "b": pa.array([0] * n, pa.int32()), "s": pa.array(["x"] * n)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FallbackWarning: kept by the operators
        cat.execute("CREATE MATERIALIZED VIEW recent WITH (INCREMENTAL = 'require') AS "
                    "SELECT k FROM t WHERE mz_now() >= a AND mz_now() < a + 10")
    op = _temporal_op(cat, "recent")
    seen = op.rows_seen
    assert seen == n  # the one initial computation
    for _ in range(30):
        cat.execute("INSERT INTO u VALUES (1, 'p')")  # not an input of the view
        now = cat.now
        assert bag(cat.sql("SELECT * FROM recent")) == Counter((k,) for k in range(max(0, now - 9), now + 1))
    # thirty commits later the filter has read no row again: the flips came from the sink
    assert op.rows_seen == seen
    cat.execute("DELETE FROM t WHERE k = 40", time=cat.now + 7)  # one row in, the jump's flips written
    assert op.rows_seen == seen + 1
    now = cat.now
    assert bag(cat.sql("SELECT * FROM recent")) == Counter((k,) for k in range(now - 9, now + 1) if k != 40)
    for at in range(now - 7, now + 1):
        assert bag(cat.sql("SELECT * FROM recent", as_of=at)) == Counter(
            (k,) for k in range(at - 9, at + 1) if k != 40 or at < now)
    assert "TemporalFilter where=[mz_now() >= t.a AND mz_now() < t.a + 10]" in str(cat.explain("recent"))


def test_other_uses_of_mz_now_are_recomputed_and_named():
    cat = colmz.Catalog()
    cat.execute(TABLES)
    with pytest.warns(FallbackWarning, match=r"at every commit \(it calls mz_now\(\)\).*mz_now is volatile"):
        cat.execute("CREATE MATERIALIZED VIEW n AS SELECT k, mz_now() AS now FROM t")
    # the branch would be recomputed alone, but it calls mz_now(): the whole view is
    with pytest.raises(UnsupportedSQL, match=r"INCREMENTAL = 'require'.*mz_now\(\) other than in a temporal"):
        cat.execute("CREATE MATERIALIZED VIEW b WITH (INCREMENTAL = 'require') AS "
                    "SELECT k FROM t WHERE mz_now() >= a UNION ALL SELECT k FROM u")
    with pytest.raises(UnsupportedSQL, match=r"mz_now\(\) other than in a temporal filter"):
        cat.execute("CREATE MATERIALIZED VIEW q WITH (INCREMENTAL = 'require') AS "
                    "SELECT q.k FROM (SELECT k FROM t WHERE mz_now() < a) q JOIN u ON q.k = u.k")
    with pytest.raises(UnsupportedSQL, match=r"temporal filter \(mz_now\(\)\) in a subquery, CTE or set-operation"):
        cat.execute("CREATE MATERIALIZED VIEW c WITH (INCREMENTAL = 'require') AS "
                    "WITH c AS (SELECT k FROM t WHERE mz_now() < a) SELECT k FROM c")
    assert sorted(cat.names) == ["n", "t", "u"]
    assert not cat.object("n").maintained.incremental
    cat.execute("INSERT INTO t VALUES (1, 2, 3, 'x')")
    cat.execute("INSERT INTO u VALUES (1, 'p')")  # no input of n: recomputed all the same
    assert bag(cat.sql("SELECT * FROM n")) == Counter({(1, cat.now): 1})


def test_a_reopened_durable_temporal_view_keeps_its_flips(tmp_path):
    body = "SELECT k, a FROM t WHERE mz_now() >= a AND mz_now() < a + 3"
    cat = colmz.Catalog(tmp_path)
    cat.execute(TABLES)
    cat.execute(f"CREATE MATERIALIZED VIEW w AS {body}")
    cat.execute("INSERT INTO t VALUES (1, 3, 0, 'x'), (2, 6, 0, 'y'), (3, 40, 0, NULL)")
    for step in range(8):
        if step % 3 == 2:
            cat = colmz.Catalog(tmp_path)  # operators rebuilt: future flips recomputed, only differences written
            assert cat.object("w").maintained.incremental
        cat.execute("INSERT INTO u VALUES (1, 'p')")
        assert bag(cat.sql("SELECT * FROM w")) == bag(cat.sql(body)), step
