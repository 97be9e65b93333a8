"""Materialized views holding ``WITH RECURSIVE``: a ``LetRec`` iterated per commit.

The views are kept by ``colmz.dataflow.iterate.Iterate`` (one instance of the recursive
term's operators per iteration, fed each commit's deltas) and compared, after every commit,
with the recompute path (``views="recompute"``: DuckDB evaluating the query) and with
PostgreSQL 15 (the same tables, each body a plain ``VIEW``): transitive closure and
reachability with ``UNION`` over graphs with cycles created and broken, path counts with
``UNION ALL`` over DAGs, counters bounded by a table's value; inserts and deletes, random
edge scripts (Hypothesis), durable reopen (the iterations reached restored, no input read),
the iteration bound (an error naming it, the commit rolled back) and a work counter: a
one-edge change does work in proportion to the part of the graph it reaches, not the graph.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import norm, require, same
from test_maintained import contents, views_of
from test_views_postgres import commit_each

import colmz
from colmz.catalog.durable import Catalog
from colmz.dataflow import plan_setops
from colmz.dataflow.iterate import RECURSION_LIMIT, Iterate, RecursionLimitExceeded
from colmz.dataflow.plan import plan, render

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

#: Every view here is kept by its operators: one falling back fails its test.
pytestmark = pytest.mark.filterwarnings("error::colmz.dataflow.maintained.FallbackWarning")

TABLES = ["CREATE TABLE e (src BIGINT, dst BIGINT)",  # a graph: cycles allowed
          "CREATE TABLE d (src BIGINT, dst BIGINT)",  # a DAG: src < dst always
          "CREATE TABLE lim (k BIGINT)"]

#: (name, body): every one kept by its operators (no Fallback).
VIEWS = [
    ("closure", "WITH RECURSIVE r(a, b) AS (SELECT src, dst FROM e UNION "
                "SELECT r.a, e.dst FROM r JOIN e ON r.b = e.src) SELECT a, b FROM r"),
    ("reach", "WITH RECURSIVE r(n) AS (SELECT 1::bigint UNION SELECT e.dst FROM r JOIN e ON r.n = e.src) "
              "SELECT n FROM r"),
    ("hops", "WITH RECURSIVE r(n, h) AS (SELECT 1::bigint, 0 UNION SELECT e.dst, r.h + 1 FROM r JOIN e ON r.n = e.src "
             "WHERE r.h < 4) SELECT n, min(h) AS h FROM r GROUP BY n"),
    ("paths", "WITH RECURSIVE p(a, b) AS (SELECT src, dst FROM d UNION ALL "
              "SELECT p.a, d.dst FROM p JOIN d ON p.b = d.src) SELECT a, b, count(*) AS n FROM p GROUP BY a, b"),
    ("walks", "WITH RECURSIVE p(a, b, len) AS (SELECT src, dst, 1 FROM d UNION ALL "
              "SELECT p.a, d.dst, p.len + 1 FROM p JOIN d ON p.b = d.src) SELECT a, b, len FROM p"),
    ("counter", "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < (SELECT max(k) FROM lim)) "
                "SELECT n FROM c"),
    ("counter_join", "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT c.n + 1 FROM c JOIN "
                     "(SELECT max(k) AS k FROM lim) l ON c.n < l.k) "
                     "SELECT n, count(*) AS m FROM c GROUP BY n"),
]


def insert(table: str, rows) -> str:
    return f"INSERT INTO {table} VALUES " + ", ".join(f"({a}, {b})" for a, b in rows)


def catalogs(names=None, incremental=None):
    """An incremental (or ``incremental``, e.g. durable) and a recompute catalog holding the
    tables and the views ``names`` (all by default)."""
    cats = [incremental or colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    chosen = [(n, b) for n, b in VIEWS if names is None or n in names]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        for n, b in chosen:
            cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    for n, _ in chosen:
        mv = cats[0].object(n).maintained
        assert mv.incremental and not mv.plan.fallbacks(), n
    return cats


def check_equal(cats, text=""):
    inc, rec = cats
    for n in views_of(inc):
        assert contents(inc, n) == contents(rec, n), f"view {n} after {text!r}"


# ---------------------------------------------------------------------------- planning


def test_plan_is_a_letrec_and_explain_names_it():
    p = plan(VIEWS[0][1], {"e": {"src": pa.int64(), "dst": pa.int64()}})
    shown = p.explain()
    assert "LetRec r (UNION;" in shown and "Variable r (rows of the previous iteration)" in shown
    assert "Variable r (rows produced so far)" in shown and f"at most {RECURSION_LIMIT} iterations" in shown
    assert not p.fallbacks()
    cat = catalogs(["closure"])[0]
    cat.execute(insert("e", [(1, 2), (2, 3), (3, 4)]))
    lines = cat.explain("closure").lines
    letrec = next(ln for ln in lines if "LetRec" in ln)
    assert "3 iterations reached (iteration 0 shown)" in letrec, letrec  # paths of 1, 2, 3 edges
    assert any("Join inner on=[r.b = e.src]" in ln and "last commit" in ln for ln in lines), lines


@pytest.mark.parametrize("body,word", [
    # PostgreSQL refuses a recursive term reading the CTE twice
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT a.n + b.n FROM r a JOIN r b ON a.n = b.n WHERE a.n < 3) "
     "SELECT n FROM r", "more than once"),
    # a global aggregate gives a row over an empty working table
    ("WITH RECURSIVE r(n) AS (SELECT src FROM e UNION ALL SELECT count(*) FROM r) SELECT n FROM r",
     "working table is empty"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 0.5 FROM r WHERE n < 3) SELECT n FROM r",
     "in the recursive term"),
])
def test_recursions_outside_the_subset_fall_back_by_name(body, word):
    p = plan(body, {"e": {"src": pa.int64(), "dst": pa.int64()}})
    assert p.fallbacks() and word in p.fallbacks()[0].reason, p.explain()


def test_a_recursive_cte_not_reading_itself_is_a_union():
    p = plan("WITH RECURSIVE r(n) AS (SELECT src FROM e UNION SELECT dst FROM e) SELECT n FROM r",
             {"e": {"src": pa.int64(), "dst": pa.int64()}})
    assert "LetRec" not in p.explain() and "Distinct" in p.explain() and not p.fallbacks()


def test_the_operator_retracts_what_a_deleted_row_derived():
    p = plan("WITH RECURSIVE c(n) AS (SELECT k FROM t UNION ALL SELECT n + 1 FROM c WHERE n < 4) SELECT n FROM c",
             {"t": {"k": pa.int64()}})
    pipe = render(p)
    add = pipe.step(1, {"t": colmz.Updates({"k": [1, 3]}, time=[1, 1], diff=[1, 1])})
    assert sorted((r[0], r[2]) for r in add.to_pylist()) == [(1, 1), (2, 1), (3, 2), (4, 2)]
    gone = pipe.step(2, {"t": colmz.Updates({"k": [1]}, time=[2], diff=[-1])})
    assert sorted((r[0], r[2]) for r in gone.to_pylist()) == [(1, -1), (2, -1), (3, -1), (4, -1)]
    it = next(op for op in pipe.operators if isinstance(op, Iterate))
    assert it.depth == 4  # 1 -> 4 took 3 steps; the fourth iteration's output is empty


# ---------------------------------------------------------------------------- against the recompute


FIXED_SCRIPT = [
    [insert("e", [(1, 2), (2, 3), (3, 4)]), insert("d", [(1, 2), (2, 3), (1, 3)]), "INSERT INTO lim VALUES (3)"],
    [insert("e", [(4, 1)])],                      # a cycle 1 -> 2 -> 3 -> 4 -> 1
    [insert("e", [(4, 5), (5, 6)]), insert("d", [(3, 4), (2, 4)])],
    ["DELETE FROM e WHERE src = 2"],              # the cycle broken: 1 no longer reaches 3, 4, ...
    [insert("e", [(2, 3), (3, 3)]), "INSERT INTO lim VALUES (5)"],  # a self-loop, the cycle back
    ["DELETE FROM d WHERE src = 1 AND dst = 2", "DELETE FROM lim WHERE k = 3"],
    ["DELETE FROM e WHERE src = 4", insert("d", [(1, 2), (1, 2)])],  # a duplicate edge: paths twice
    ["DELETE FROM lim", "DELETE FROM e WHERE dst = 3"],
    ["DELETE FROM e", "DELETE FROM d"],
    [insert("e", [(1, 1)]), insert("d", [(5, 6)])],
]


def test_fixed_script_equals_the_recompute_after_every_commit():
    cats = catalogs()
    check_equal(cats, "creation")
    commit_each(FIXED_SCRIPT, lambda text: check_equal(cats, text), *cats)
    assert contents(cats[0], "reach") == Counter({(1,): 1})  # the self-loop: reached, once


def postgres_rows(conn, name: str):
    cur = conn.execute(f"SELECT * FROM {name}")
    return [d.name for d in cur.description], sorted((tuple(norm(x) for x in r) for r in cur.fetchall()), key=repr)


def colmz_rows(cat, name: str):
    table = cat.sql(f"SELECT * FROM {name}")
    rows = zip(*(c.to_pylist() for c in table.columns))
    return table.column_names, sorted((tuple(norm(x) for x in r) for r in rows), key=repr)


def postgres_checker(pg):
    """Fresh PostgreSQL tables and views, a pair of catalogs, and the check run after each
    commit: every view equal in both catalogs and in PostgreSQL."""
    pg.execute("DROP TABLE IF EXISTS e, d, lim CASCADE")
    for s in TABLES:
        pg.execute(s)
    for n, b in VIEWS:
        pg.execute(f"CREATE VIEW {n} AS {b}")
    cats = catalogs()
    compared = Counter()

    def after(text):
        check_equal(cats, text)
        for n, _ in VIEWS:
            (cn, cr), (pn, pr) = colmz_rows(cats[0], n), postgres_rows(pg, n)
            assert cn == pn and len(cr) == len(pr) and all(same(a, b) for a, b in zip(cr, pr)), (n, text, cr, pr)
            compared[n] += 1

    return cats, after, compared


def test_fixed_script_equals_postgres_after_every_commit(pg):
    cats, after, compared = postgres_checker(pg)
    after("creation")
    commit_each(FIXED_SCRIPT, after, pg, *cats)
    assert set(compared.values()) == {len(FIXED_SCRIPT) + 1}


NODES = st.integers(1, 6)


@st.composite
def edge_commit(draw):
    """One commit: edges of ``e`` (any) and ``d`` (src < dst) inserted or deleted, ``lim``
    changed."""
    stmts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["e+", "e-", "d+", "d-", "lim"]))
        a, b = draw(NODES), draw(NODES)
        if kind == "e+":
            stmts.append(insert("e", [(a, b)]))
        elif kind == "e-":
            stmts.append(f"DELETE FROM e WHERE src = {a}" + (f" AND dst = {b}" if draw(st.booleans()) else ""))
        elif kind == "d+":
            stmts.append(insert("d", [(min(a, b), max(a, b) + (a == b))]))
        elif kind == "d-":
            stmts.append(f"DELETE FROM d WHERE dst = {b}")
        else:
            stmts.append(draw(st.sampled_from(["DELETE FROM lim", f"INSERT INTO lim VALUES ({a})",
                                               f"UPDATE lim SET k = k + {b}"])))
    return stmts


@settings(max_examples=us.examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edge_commit(), min_size=1, max_size=8))
def test_random_edge_scripts_equal_the_recompute(script):
    cats = catalogs()
    commit_each(script, lambda text: check_equal(cats, text), *cats)


@settings(max_examples=us.examples(6), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(edge_commit(), min_size=1, max_size=6))
def test_random_edge_scripts_equal_postgres(pg, script):
    cats, after, compared = postgres_checker(pg)
    commit_each(script, after, pg, *cats)
    assert set(compared.values()) == {len(script)}


# ---------------------------------------------------------------------------- bound, rollback


def test_a_recursion_past_its_bound_raises_and_rolls_the_commit_back(monkeypatch):
    monkeypatch.setattr(plan_setops, "RECURSION_LIMIT", 25)
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(insert("e", [(1, 2), (2, 3)]))
    # UNION ALL over a graph: the paths; a cycle makes them endless (PostgreSQL loops forever)
    cat.execute("CREATE MATERIALIZED VIEW walks AS WITH RECURSIVE p(a, b) AS (SELECT src, dst FROM e UNION ALL "
                "SELECT p.a, e.dst FROM p JOIN e ON p.b = e.src) SELECT a, b FROM p")
    before = contents(cat, "walks"), cat.now, len(cat.read("e"))
    with pytest.raises(RecursionLimitExceeded, match="no fixed point within 25 iterations"):
        cat.execute(insert("e", [(3, 1)]))
    assert (contents(cat, "walks"), cat.now, len(cat.read("e"))) == before
    cat.execute(insert("e", [(3, 4)]))  # the view goes on from where it was
    assert contents(cat, "walks")[(1, 4)] == 1
    # (a CREATE over a cyclic graph is not tried: the catalog types a view's query by running
    # it in DuckDB, which iterates forever, as PostgreSQL does)


def test_the_bound_is_checked():
    with pytest.raises(ValueError, match="limit must be a positive int"):
        Iterate({"n": pa.int64()}, "c", False, {}, lambda: None, "w", None, limit=0)


# ---------------------------------------------------------------------------- durable


def test_durable_views_reopen_with_their_iterations_and_equal_the_recompute():
    url = f"mem://recview-{uuid.uuid4().hex}"
    cats = catalogs(incremental=Catalog(url))
    for stmts in FIXED_SCRIPT:
        text = "; ".join(stmts)
        for cat in cats:
            cat.execute(text)
        cats[0] = Catalog(url)
        check_equal(cats, text)
        assert cats[0].view_work == {"initialized": 0, "restored": len(VIEWS), "input_rows_read": 0}, text
    depths = {n: next(op for op in cats[0].object(n).maintained.pipeline.operators if isinstance(op, Iterate)).depth
              for n, _ in VIEWS}
    assert depths["counter_join"] >= 1 and max(depths.values()) > 1, depths


def test_a_reopen_without_the_states_rebuilds_from_nothing():
    # a grown, never restored instance is dropped at the first step: a view rebuilt equals
    url = f"mem://recview-{uuid.uuid4().hex}"
    cats = catalogs(["reach"], incremental=Catalog(url))
    for cat in cats:
        cat.execute(insert("e", [(1, 2), (2, 3), (3, 4)]))
    it = next(op for op in render(cats[0].object("reach").maintained.plan).operators if isinstance(op, Iterate))
    it.grow_to_states(["instances.3.operators.1.counts.c0"])
    assert it.depth == 4
    it.step(5, colmz.Updates.empty(it.schema), deltas={})
    assert it.depth == 1
    check_equal([Catalog(url), cats[1]])


# ---------------------------------------------------------------------------- work


def _work(cat, name: str) -> int:
    """The recursion's cumulative work: rows into and out of its iterations' instances."""
    return next(op for op in cat.object(name).maintained.pipeline.operators if isinstance(op, Iterate)).rows_touched


@pytest.mark.parametrize("body", [VIEWS[0][1], "WITH RECURSIVE p(a, b) AS (SELECT src, dst FROM e UNION ALL "
                                  "SELECT p.a, e.dst FROM p JOIN e ON p.b = e.src) SELECT a, b FROM p"])
def test_a_one_edge_change_works_on_what_it_reaches_not_the_graph(body):
    """Chains of 4 edges, 20 or 160 of them; one edge of one chain removed, then put back:
    the rows through the iterations do not grow with the number of chains (each iteration
    is fed the edge's change, and derives what the chain derives through it)."""
    work = []
    for chains in (20, 160):
        cat = colmz.Catalog()
        cat.execute("; ".join(TABLES))
        edges = [(10 * c + i, 10 * c + i + 1) for c in range(chains) for i in range(4)]
        cat.execute(insert("e", edges))
        cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
        start = _work(cat, "v")
        cat.execute("DELETE FROM e WHERE src = 2")  # chain 0 cut in two
        cat.execute(insert("e", [(2, 3)]))  # and whole again
        work.append(_work(cat, "v") - start)
        assert len(cat.read("v")) > chains
    assert work[1] == work[0], work
