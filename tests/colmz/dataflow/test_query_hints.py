"""The catalog choosing Materialize's min/max plans: ``OPTIONS (AGGREGATE INPUT GROUP SIZE =
n)`` (the bucketed plan), tables ``WITH (APPEND ONLY)`` (the monotonic plan) -- views equal
the recompute path across random changes, EXPLAIN names the plan, a durable reopen keeps it,
bad hints and retractions into an append-only table are refused with the catalog unchanged."""

from __future__ import annotations

import warnings

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.catalog.engine import AppendOnlyViolation
from colmz.dataflow.minmax import MinMaxReduce
from colmz.sql import UnsupportedSQL
from colmz.sql.hints import InvalidHint

#: Views over ``a`` (append-only) and ``t`` (any change), each with the plan it must take.
VIEWS = {
    "hinted": ("SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 300)",
               "bucketed"),
    "hinted_mixed": ("SELECT k, min(v) AS lo, count(*) AS n, sum(v) AS s FROM t WHERE v IS NOT NULL GROUP BY k "
                     "OPTIONS (AGGREGATE INPUT GROUP SIZE = 17) HAVING count(*) > 0", "bucketed"),
    "hinted_global": ("SELECT max(v) AS hi, min(v) AS lo FROM t OPTIONS (AGGREGATE INPUT GROUP SIZE = 5000)",
                      "bucketed"),
    "hinted_inner": ("SELECT s.k, s.hi + 1 AS h FROM (SELECT k, max(v) AS hi FROM t GROUP BY k "
                     "OPTIONS (AGGREGATE INPUT GROUP SIZE = 40)) s", "bucketed"),
    "monotonic": ("SELECT k, min(v) AS lo, max(v) AS hi FROM a GROUP BY k", "monotonic"),
    "monotonic_filtered": ("SELECT k, max(v) AS hi, count(*) AS n FROM a WHERE v > -3 GROUP BY k", "monotonic"),
    "monotonic_join": ("SELECT a.k, min(b.v) AS lo FROM a JOIN a AS b ON a.k = b.k GROUP BY a.k", "monotonic"),
    "monotonic_hinted": ("SELECT k, min(v) AS lo FROM a GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 100)",
                         "monotonic"),
    "mixed_inputs": ("SELECT t.k, min(a.v) AS lo FROM t JOIN a ON t.k = a.k GROUP BY t.k", "per group"),
    "top": ("SELECT k, v FROM t WHERE v IS NOT NULL OPTIONS (LIMIT INPUT GROUP SIZE = 50) ORDER BY v DESC, k LIMIT 2",
            None),
}
SETUP = ("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE a (k BIGINT, v BIGINT) WITH (APPEND ONLY); "
         "INSERT INTO t VALUES (1, 1), (1, 4), (2, NULL); INSERT INTO a VALUES (1, 2), (3, NULL)")


def _catalogs(views=VIEWS, url=None):
    from colmz.catalog.durable import Catalog

    cats = [Catalog(url) if url else colmz.Catalog(), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(SETUP)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no Fallback: every view is maintained
            for name, (body, _) in views.items():
                cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    return cats


def _rows(cat, name):
    return sorted(tuple(r.values()) for r in cat.sql(f"SELECT * FROM {name}").to_pylist())


def _plans(cat, name):
    mv = cat.object(name).maintained
    ops = [o for o in mv.pipeline.operators for o in (o, getattr(o, "hierarchical", None))
           if isinstance(o, MinMaxReduce)]
    return {o.plan for o in ops}


def _check(cats, what):
    inc, rec = cats
    for name in VIEWS:
        assert _rows(inc, name) == _rows(rec, name), f"view {name} after {what}"
        assert inc.sql(f"SELECT * FROM {name}").column_names == rec.sql(f"SELECT * FROM {name}").column_names


values = st.one_of(st.none(), st.integers(-4, 4))
change = st.one_of(
    st.tuples(st.just("insert t"), st.lists(st.tuples(st.integers(0, 3), values), min_size=1, max_size=5)),
    st.tuples(st.just("insert a"), st.lists(st.tuples(st.integers(0, 3), values), min_size=1, max_size=5)),
    st.tuples(st.just("delete t"), st.integers(-4, 4)),
    st.tuples(st.just("delete k"), st.integers(0, 3)),
    st.tuples(st.just("update t"), st.integers(-4, 4)),
    st.tuples(st.just("empty"), st.none()),
)


def _sql(c) -> str:
    kind, arg = c
    lit = lambda x: "NULL" if x is None else str(x)  # noqa: E731
    if kind.startswith("insert"):
        return f"INSERT INTO {kind[-1]} VALUES " + ", ".join(f"({k}, {lit(v)})" for k, v in arg)
    if kind == "delete t":
        return f"DELETE FROM t WHERE v = {arg} OR v IS NULL"
    if kind == "delete k":
        return f"DELETE FROM t WHERE k = {arg}"  # a group retracted to zero
    if kind == "update t":
        return f"UPDATE t SET v = v + 1 WHERE v = {arg}"
    return "DELETE FROM t WHERE k = 99"  # an empty commit


@settings(max_examples=us.examples(15), deadline=None)
@given(st.lists(st.lists(change, min_size=1, max_size=3), min_size=1, max_size=8))
def test_hinted_and_append_only_views_equal_the_recompute(scripts):
    cats = _catalogs()
    for name, (_, plan) in VIEWS.items():
        if plan is not None:
            assert _plans(cats[0], name) == {plan}, name
    _check(cats, "creation")
    for script in scripts:
        text = "; ".join(_sql(c) for c in script)
        for cat in cats:
            cat.execute(text)
        _check(cats, text)


def test_explain_names_the_chosen_plan():
    inc, _ = _catalogs()
    explain = {n: str(inc.explain(n)) for n in VIEWS}
    assert "AGGREGATE INPUT GROUP SIZE = 300: hierarchical plan bucketed 256/16" in explain["hinted"]
    assert "hierarchical: bucketed 256/16" in explain["hinted"]  # the operator's own strategy
    assert "hierarchical plan bucketed 16)" in explain["hinted_mixed"]
    assert "bucketed 4096/256/16" in explain["hinted_global"]
    assert "hierarchical: monotonic (append-only input)" in explain["monotonic"]
    assert "AGGREGATE INPUT GROUP SIZE = 100 not needed" in explain["monotonic_hinted"]
    assert "per affected group over" in explain["mixed_inputs"]  # t retracts: not monotonic
    assert "LIMIT INPUT GROUP SIZE = 50 recorded: colmz's top-k has one plan" in explain["top"]
    rows = inc.sql("EXPLAIN MATERIALIZED VIEW hinted").column("plan").to_pylist()
    assert any("bucketed 256/16" in r for r in rows)


def test_the_recompute_path_ignores_hints():
    cat = colmz.Catalog(views="recompute")
    cat.execute(SETUP)
    plain = "SELECT k, min(v), max(v) AS hi FROM t GROUP BY k"
    hinted = plain + " OPTIONS (AGGREGATE INPUT GROUP SIZE = 7)"
    cat.execute(f"CREATE MATERIALIZED VIEW p AS {plain}; CREATE MATERIALIZED VIEW h AS {hinted}")
    cat.execute("INSERT INTO t VALUES (1, -9); DELETE FROM t WHERE v = 4")
    assert cat.sql("SELECT * FROM h").column_names == cat.sql("SELECT * FROM p").column_names == ["k", "min", "hi"]
    assert _rows(cat, "h") == _rows(cat, "p") == sorted(tuple(r.values()) for r in cat.sql(hinted).to_pylist())
    # a DISTINCT ON's hint, in an ad-hoc query
    q = "SELECT DISTINCT ON (k) k, v FROM t OPTIONS (DISTINCT ON INPUT GROUP SIZE = 3) ORDER BY k, v"
    assert cat.sql(q).to_pylist() == [{"k": 1, "v": -9}, {"k": 2, "v": None}]


@pytest.mark.parametrize("options, message", [
    ("AGGREGATE INPUT GROUP SIZE = 0", "AGGREGATE INPUT GROUP SIZE takes a positive integer, got '0'"),
    ("AGGREGATE INPUT GROUP SIZE = 'many'", "takes a positive integer, got \"'many'\""),
    ("AGGREGATE INPUT GROUP SIZE = -5", "takes a positive integer, got '-5'"),
    ("AGGREGATE INPUT GROUP SIZE = 2.5", "got '2.5'"),
    ("AGGREGATE INPUT GROUP SIZE", "got 'nothing'"),
    ("AGGREGATE GROUP SIZE = 10", "unknown query hint 'AGGREGATE GROUP SIZE = 10'"),
    ("AGGREGATE INPUT GROUP SIZE = 1, AGGREGATE INPUT GROUP SIZE = 2", "AGGREGATE INPUT GROUP SIZE is given twice"),
])
def test_bad_hints_are_refused_and_leave_the_catalog(options, message):
    for cat in (colmz.Catalog(), colmz.Catalog(views="recompute")):
        cat.execute(SETUP)
        before = (cat.now, cat.names)
        with pytest.raises(InvalidHint, match=message.replace("(", r"\(").replace(")", r"\)")):
            cat.execute(f"CREATE MATERIALIZED VIEW m AS SELECT k, min(v) FROM t GROUP BY k OPTIONS ({options})")
        assert (cat.now, cat.names) == before
        with pytest.raises(InvalidHint):
            cat.sql(f"SELECT k, min(v) FROM t GROUP BY k OPTIONS ({options})")


def test_retractions_into_an_append_only_table_are_refused_and_change_nothing():
    inc, rec = _catalogs()
    for cat in (inc, rec):
        before = (cat.now, cat.read("a").to_pylist(), {n: _rows(cat, n) for n in VIEWS})
        for stmt, message in [("DELETE FROM a WHERE k = 1", "DELETE FROM a: the table is append-only"),
                              ("UPDATE a SET v = 0", "UPDATE a: the table is append-only"),
                              ("INSERT INTO t VALUES (5, 5); INSERT INTO a VALUES (1, 9); DELETE FROM a WHERE k = 7",
                               "DELETE FROM a: the table is append-only")]:
            with pytest.raises(AppendOnlyViolation, match=message):
                cat.execute(stmt)
            assert (cat.now, cat.read("a").to_pylist(), {n: _rows(cat, n) for n in VIEWS}) == before
        with pytest.raises(AppendOnlyViolation, match=r"table 'a' is append-only .* retracts row \(1, 2\)"):
            cat.append("a", colmz.Updates({"k": [1, 4], "v": [2, 4]}, time=[0, 0], diff=[-1, 1]), time=cat.now + 1)
        assert (cat.now, cat.read("a").to_pylist(), {n: _rows(cat, n) for n in VIEWS}) == before
        cat.append("a", colmz.Updates({"k": [4], "v": [4]}, time=[0], diff=[1]), time=cat.now + 1)  # inserts pass
    _check((inc, rec), "appends")


def test_table_options_other_than_append_only_are_unsupported():
    cat = colmz.Catalog()
    with pytest.raises(UnsupportedSQL, match=r"CREATE TABLE \.\.\. WITH \(RETAIN HISTORY = 1\).*APPEND ONLY"):
        cat.execute("CREATE TABLE t (k INT) WITH (RETAIN HISTORY = 1)")
    assert cat.names == []


def test_a_durable_catalog_reopens_with_the_same_plans(tmp_path):
    from colmz.catalog.durable import Catalog

    url = str(tmp_path / "cat")
    inc, rec = _catalogs(url=url)
    for cat in (inc, rec):
        cat.execute("INSERT INTO t VALUES (1, -3), (4, 8); INSERT INTO a VALUES (1, -1), (4, 0)")
    again = Catalog(url)
    assert again.view_work["initialized"] == 0 and again.view_work["input_rows_read"] == 0
    for name, (_, plan) in VIEWS.items():
        if plan is not None:
            assert _plans(again, name) == {plan}, name
    assert "hierarchical: bucketed 256/16" in str(again.explain("hinted"))
    assert "hierarchical: monotonic" in str(again.explain("monotonic"))
    with pytest.raises(AppendOnlyViolation):  # the declaration is part of the table's definition
        again.execute("DELETE FROM a")
    for cat in (again, rec):
        cat.execute("DELETE FROM t WHERE v = 1; INSERT INTO a VALUES (3, 7), (1, -8)")
    _check((again, rec), "reopen")
