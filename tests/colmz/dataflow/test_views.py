"""Operator pipelines of whole views against DuckDB recomputing the view's SQL.

After every step, the view's collection (written through ``ViewSink``) must equal DuckDB's
answer to the view's query over the integrated tables -- the differential check of maintained
views, here for the pipelines the operators make without a plan.
"""

from __future__ import annotations

import math
from collections import Counter

import dataflow_model as dm
import duckdb
import pyarrow as pa
import updates_strategies as us
from hypothesis import given, settings

import colmz.rows
from colmz.dataflow import (
    AccumulableReduce,
    Avg,
    Column,
    Compare,
    Count,
    DeltaJoin,
    Distinct,
    MapFilter,
    Max,
    Min,
    MinMaxReduce,
    OrderBy,
    OuterJoin,
    Sum,
    TopK,
    ViewSink,
)
from colmz.dataflow.plan import plan, render

T = {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}
U = {"uk": pa.int64(), "w": pa.string()}
T_POOL = [(k, v, s) for k, v, s in zip([None, 1, 1, 2, 3, 2, 1, None], [4, None, -2, 7, 7, 0, 4, 9],
                                       ["a", "b", None, "a", "c", "", "a", "b"])]
U_POOL = [(k, w) for k in (None, 1, 2, 4) for w in ("x", None)]


def canon(v):
    if isinstance(v, float):
        return round(v, 9) if not math.isnan(v) else "NaN"
    return v


def view_rows(sink: ViewSink, t: int) -> Counter:
    rows = colmz.rows.expand(sink.collection.snapshot(t))
    return Counter(tuple(canon(v) for v in r) for r in zip(*[rows.column(c).to_pylist() for c in rows.column_names]))


_CON = duckdb.connect()
# PostgreSQL's NULLs order (last ascending, first descending), which the plans follow.
_CON.execute("SET default_null_order = 'nulls_last_on_asc_first_on_desc'")


def _table(schema: dict, held: Counter) -> pa.Table:
    rows = [r for r, c in held.items() for _ in range(c)]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(schema.items())})


def duckdb_rows(sql: str, held_t: Counter, held_u: Counter) -> Counter:
    _CON.register("t", _table(T, held_t))
    _CON.register("u", _table(U, held_u))
    return Counter(tuple(canon(v) for v in r) for r in _CON.execute(sql).fetchall())


class SumView:
    sql = "SELECT k, sum(v), count(*), avg(v) FROM t WHERE v >= 0 GROUP BY k"

    def __init__(self):
        self.f = MapFilter(T, where=[Compare("v", ">=", 0)], select=["k", "v"])
        self.r = AccumulableReduce(self.f.schema, ["k"], {"s": Sum("v"), "c": Count(), "a": Avg("v")})
        self.schema = self.r.schema

    def step(self, t, dt, du):
        return self.r.step(t, self.f.step(t, dt))


class JoinView:
    sql = "SELECT t.k, t.s, u.w FROM t JOIN u ON t.k = u.uk"

    def __init__(self):
        self.j = DeltaJoin([T, U], on=[("k", "uk")])
        self.p = MapFilter(self.j.schema, select=["k", "s", "w"])
        self.schema = self.p.schema

    def step(self, t, dt, du):
        return self.p.step(t, self.j.step(t, dt, du))


class LeftJoinView:
    sql = "SELECT t.k, t.v, u.uk, u.w FROM t LEFT JOIN u ON t.k = u.uk"

    def __init__(self):
        self.j = OuterJoin([T, U], on=[("k", "uk")], kind="left")
        self.p = MapFilter(self.j.schema, select=["k", "v", "uk", "w"])
        self.schema = self.p.schema

    def step(self, t, dt, du):
        return self.p.step(t, self.j.step(t, dt, du))


class MinMaxView:
    sql = "SELECT s, min(v), max(k) FROM t GROUP BY s"

    def __init__(self):
        self.r = MinMaxReduce(T, ["s"], {"lo": Min("v"), "hi": Max("k")})
        self.schema = self.r.schema

    def step(self, t, dt, du):
        return self.r.step(t, dt)


class DistinctView:
    sql = "SELECT DISTINCT k, s FROM t"

    def __init__(self):
        self.p = MapFilter(T, select=["k", Column("s")])
        self.d = Distinct(self.p.schema)
        self.schema = self.d.schema

    def step(self, t, dt, du):
        return self.d.step(t, self.p.step(t, dt))


class TopView:
    # Ties broken by the whole row, so the window is one multiset: DuckDB's query says the same.
    sql = "SELECT k, v, s FROM t ORDER BY v DESC NULLS FIRST, k ASC NULLS LAST, s NULLS LAST LIMIT 3"

    def __init__(self):
        self.k = TopK(T, [], [OrderBy("v", descending=True), OrderBy("k")], limit=3)
        self.schema = self.k.schema

    def step(self, t, dt, du):
        return self.k.step(t, dt)


class Planned:
    """A view rendered from its SQL by ``colmz.dataflow.plan`` (the plans' node kinds that
    recompute per group in DuckDB, semijoins, cross joins, ...)."""

    sql = ""

    def __init__(self):
        p = plan(self.sql, {"t": T, "u": U})
        assert p.incremental, p.explain()
        self.pipe = render(p)
        self.schema = self.pipe.schema

    def step(self, t, dt, du):
        return self.pipe.step(t, {n: d for n, d in (("t", dt), ("u", du)) if n in self.pipe.tables})


def planned(text: str) -> type:
    return type(f"Planned({text})", (Planned,), {"sql": text})


#: Bodies of the plan's newer node kinds, each against DuckDB after every step.
PLANNED = [planned(q) for q in (
    "SELECT k, string_agg(s, ',' ORDER BY s) AS ss, count(DISTINCT v) FROM t GROUP BY k",
    "SELECT k, v, dense_rank() OVER (PARTITION BY k ORDER BY v) FROM t",
    "SELECT k, s FROM t WHERE k IN (SELECT uk FROM u WHERE w = 'x')",
    "SELECT k, v FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.uk = t.k)",
    "SELECT k, v FROM t WHERE k NOT IN (SELECT uk FROM u)",
    "SELECT t.k, u.w FROM t, u WHERE t.v = 7",
    "SELECT k FROM t INTERSECT SELECT uk FROM u",
    "SELECT DISTINCT ON (s) s, v FROM t ORDER BY s, v DESC NULLS LAST",
    "WITH g AS (SELECT k, max(v) AS m FROM t GROUP BY k) SELECT g.k, g.m, u.w FROM g LEFT JOIN u ON g.k = u.uk",
    "SELECT k, (SELECT count(*) FROM u) AS n FROM t",
)]

VIEWS = [SumView, JoinView, LeftJoinView, MinMaxView, DistinctView, *PLANNED]


@settings(max_examples=us.examples(20), deadline=None)
@given(dm.change_steps(T_POOL, max_steps=6), dm.change_steps(U_POOL, max_steps=6))
def test_views_equal_duckdb_after_every_step(ts, us_):
    views = [v() for v in VIEWS]
    sinks = [ViewSink(v.schema) for v in views]
    held_t: Counter = Counter()
    held_u: Counter = Counter()
    for t in range(max(len(ts), len(us_))):
        a = ts[t] if t < len(ts) else []
        b = us_[t] if t < len(us_) else []
        dt = dm.batch(T, [r for r, _ in a], [d for _, d in a], t)
        du = dm.batch(U, [r for r, _ in b], [d for _, d in b], t)
        for r, d in a:
            held_t[r] += d
        for r, d in b:
            held_u[r] += d
        held_t = Counter({k: c for k, c in held_t.items() if c})
        held_u = Counter({k: c for k, c in held_u.items() if c})
        for view, sink in zip(views, sinks):
            sink.step(t, view.step(t, dt, du))
            assert view_rows(sink, t) == duckdb_rows(view.sql, held_t, held_u), f"{type(view).__name__} at {t}"


@settings(max_examples=us.examples(20))
@given(dm.change_steps(T_POOL, max_steps=6))
def test_top_k_view_equals_duckdb_when_ties_are_whole_rows(ts):
    # Rows equal on (v, k) differ in s: DuckDB's ORDER BY names s last, TopK breaks ties by
    # the whole row (colmz's order: '' < 'a' < ... < NULL here, as NULLS LAST says).
    view = TopView()
    sink = ViewSink(view.schema)
    held: Counter = Counter()
    for t, step in enumerate(ts):
        for r, d in step:
            held[r] += d
        held = Counter({k: c for k, c in held.items() if c})
        sink.step(t, view.step(t, dm.batch(T, [r for r, _ in step], [d for _, d in step], t), None))
        assert view_rows(sink, t) == duckdb_rows(view.sql, held, Counter())
