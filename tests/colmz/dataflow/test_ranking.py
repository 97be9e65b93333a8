"""Ranking windows (``row_number``, ``rank``, ``dense_rank``) kept natively by
``GroupRecompute`` (``colmz.dataflow.ranking``): against a model of PostgreSQL's answer and
against DuckDB running the same query, under random change sequences; work counted."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import numpy as np
import pyarrow as pa
import pytest
import reference_models as rm
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow.ranking import recognize
from colmz.dataflow.recompute import GroupRecompute, output_schema
from colmz.dataflow.topk import OrderBy
from colmz.errors import NegativeMultiplicity
from colmz.sql import translate

S = {"g": pa.int64(), "y": pa.int64(), "b": pa.bool_(), "x": pa.float64()}
KINDS = [colmz.ColumnSpec(n, t).kind for n, t in S.items()]
# NULL partition keys and order values, ties on y with different rows, duplicates
POOL = [(g, y, b, x) for g in (None, 1, 2) for y, b, x in
        ((1, True, 0.5), (1, False, 0.5), (None, True, 1.0), (3, None, -1.0), (1, True, 2.0), (2, False, None))]


def model(held: Counter, order: list[OrderBy], functions: list[str]) -> Counter:
    """PostgreSQL's answer, ``row_number`` ties broken by colmz's order on the row."""
    cols = list(S)
    peer = rm.peer_order(cols, order)
    out: Counter = Counter()
    for rows in rm.sorted_groups(held, [0], rm.row_order(cols, KINDS, order)):
        for i, r in enumerate(rows):
            vals = []
            for f in functions:
                if f == "row_number":
                    vals.append(i + 1)
                elif f == "rank":
                    vals.append(1 + sum(1 for o in rows if peer(o, r) < 0))
                else:
                    vals.append(1 + len({tuple(o[cols.index(x.column)] for x in order) for o in rows if peer(o, r) < 0}))
            out[(*r, *vals)] += 1
    return out


def query(order: list[OrderBy], functions: list[str]) -> str:
    by = ", ".join(f"{o.column}{' DESC' if o.descending else ''} NULLS {'FIRST' if o.nulls_first else 'LAST'}"
                   for o in order)
    over = f"OVER (PARTITION BY g{' ORDER BY ' + by if by else ''})"
    return "SELECT *, " + ", ".join(f"{f}() {over} AS w{i}" for i, f in enumerate(functions)) + " FROM input_rows"


def unmarked(u: colmz.Updates) -> colmz.Updates:
    """``u`` as a new batch that says nothing of its order."""
    return colmz.Updates({n: u.column(n) for n in u.column_names}, u.time, u.diff)


orders = st.lists(st.builds(OrderBy, st.sampled_from(["y", "b", "g"]), st.booleans(),
                            st.one_of(st.none(), st.booleans())), max_size=2)
functions = st.lists(st.sampled_from(["row_number", "rank", "dense_rank"]), min_size=1, max_size=3)


@settings(max_examples=us.examples(60), deadline=None)
@given(dm.change_steps(POOL, max_steps=6), orders, functions)
def test_ranking_matches_the_model(steps, order, fns):
    op = GroupRecompute(S, ["g"], translate(query(order, fns)))
    assert op.ranking is not None and op.arrangements == (op.arrangements[0],)
    held: Counter = Counter()
    prev: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        out = op.step(t, b)
        # consolidated, in order -- checked on a copy that does not say so (a batch marked
        # consolidated is returned by colmz.consolidate as it is)
        assert out.to_pylist() == colmz.consolidate(unmarked(out)).to_pylist()
        now = model(held, order, fns)
        assert dm.as_delta(out, t) == dm.diff_of(prev, now), f"step {t}"
        prev = now


@settings(max_examples=us.examples(30), deadline=None)
@given(dm.change_steps(POOL, max_steps=5), orders, st.lists(st.sampled_from(["rank", "dense_rank"]), min_size=1,
                                                             max_size=2))
def test_rank_and_dense_rank_equal_duckdb(steps, order, fns):
    # no ties to break: DuckDB's answer over the whole input is the one answer
    sql = translate(query(order, fns))
    op = GroupRecompute(S, ["g"], sql)
    from colmz.dataflow.recompute import INPUT_RELATION
    from colmz.sql.run import run_query, session

    held: Counter = Counter()
    view: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        for row, d in dm.as_delta(op.step(t, b), t).items():
            view[row] += d
        view = Counter({k: v for k, v in view.items() if v})
    rows = [r for r, c in held.items() for _ in range(c)]
    table = pa.table({n: pa.array([r[i] for r in rows], typ) for i, (n, typ) in enumerate(S.items())})
    cur = session(external_access=False)
    cur.register(INPUT_RELATION, table)
    answer, _ = run_query(cur, sql, 0)
    cur.close()
    want = Counter(us.canon_rows(colmz.Updates({c: answer.column(c) for c in answer.column_names},
                                               time=np.zeros(answer.num_rows, np.uint64),
                                               diff=np.ones(answer.num_rows, np.int64))))
    assert view == want


def test_a_bulk_insert_ranks_its_partitions_without_duckdb():
    # 2 k partitions of 10 rows; one step inserting into 500 of them (one row each, ranked
    # first: every old number moves) and retracting partition 1 whole
    schema = {"g": pa.int64(), "v": pa.int64()}
    w = GroupRecompute(schema, ["g"], translate(
        "SELECT *, row_number() OVER (PARTITION BY g ORDER BY v) AS r FROM input_rows"))
    assert w.ranking is not None
    rows = [(i % 2000, i) for i in range(20_000)]
    w.step(1, dm.batch(schema, rows, [1] * len(rows), 1))
    found, ranked, recomputed = w.arrangements[0].rows_found, w.rows_ranked, w.rows_recomputed
    change = [((g, -1 - g), 1) for g in range(0, 1000, 2)] + [((1, v), -1) for g, v in rows if g == 1]
    out = w.step(2, dm.batch(schema, [r for r, _ in change], [d for _, d in change], 2))
    assert w.queries == 0  # no DuckDB call
    assert w.arrangements[0].rows_found - found == 501 * 10  # the affected partitions' rows
    assert w.rows_ranked - ranked == 501 * 10 + len(change)
    assert w.rows_recomputed - recomputed == 500 * 11  # the partitions' rows after (partition 1: none)
    got = Counter()
    for g, v, r, _, d in out.to_pylist():
        got[(g, v, r)] += d
    want = Counter()
    for g in range(0, 1000, 2):
        old = [v for k, v in rows if k == g]
        want.update({(g, v, i + 1): -1 for i, v in enumerate(old)})
        want.update({(g, v, i + 1): 1 for i, v in enumerate([-1 - g, *old])})
    want.update({(1, v, i + 1): -1 for i, v in enumerate(v for g, v in rows if g == 1)})
    assert got == Counter({k: d for k, d in want.items() if d})
    assert len(out) == 500 * 21 + 10


def test_a_row_whose_place_does_not_move_emits_nothing():
    schema = {"g": pa.int64(), "v": pa.int64()}
    w = GroupRecompute(schema, ["g"], translate(
        "SELECT *, row_number() OVER (PARTITION BY g ORDER BY v) AS r, rank() OVER (PARTITION BY g ORDER BY v) "
        "AS k FROM input_rows"))
    w.step(1, dm.batch(schema, [(1, 1), (1, 2), (1, 2), (1, 5)], [1] * 4, 1))
    # a tie inserted after the rows it ties with: row_number 4 moves to the new copy's... v=5 moves only
    out = w.step(2, dm.batch(schema, [(1, 2)], [1], 2))
    assert sorted(out.to_pylist()) == [(1, 2, 4, 2, 2, 1), (1, 5, 4, 4, 2, -1), (1, 5, 5, 5, 2, 1)]


def test_a_retraction_of_rows_not_held_changes_nothing():
    schema = {"g": pa.int64(), "v": pa.int64()}
    w = GroupRecompute(schema, ["g"], translate("SELECT *, dense_rank() OVER (PARTITION BY g ORDER BY v) AS d "
                                                "FROM input_rows"))
    w.step(1, dm.batch(schema, [(1, 1)], [1], 1))
    with pytest.raises(NegativeMultiplicity, match="window"):
        w.step(2, dm.batch(schema, [(1, 1), (1, 3)], [-2, 1], 2))
    assert w.step(2, dm.batch(schema, [(1, 0)], [1], 2)).to_pylist() == [(1, 0, 1, 2, 1), (1, 1, 1, 2, -1),
                                                                         (1, 1, 2, 2, 1)]


@pytest.mark.parametrize("sql", [
    "SELECT *, sum(y) OVER (PARTITION BY g ORDER BY y) AS s FROM input_rows",  # not a ranking
    "SELECT *, rank() OVER (PARTITION BY g ORDER BY x) AS r FROM input_rows",  # float peers: -0.0 = 0.0
    "SELECT *, rank() OVER (PARTITION BY y ORDER BY x) AS r FROM input_rows",  # another partition
    "SELECT *, row_number() OVER (PARTITION BY g ORDER BY y + 1) AS r FROM input_rows",  # an expression
    "SELECT *, row_number() OVER (PARTITION BY g ORDER BY y) AS r FROM input_rows WHERE y > 1",
    "SELECT g, y, row_number() OVER (PARTITION BY g ORDER BY y) AS r FROM input_rows",  # not *
    "SELECT *, row_number() OVER (PARTITION BY g ORDER BY y) + 1 AS r FROM input_rows",
    "SELECT *, rank() OVER (PARTITION BY g ORDER BY y) AS r, rank() OVER (PARTITION BY g ORDER BY b) AS q "
    "FROM input_rows",  # two orders
    "SELECT *, row_number() OVER (PARTITION BY g ORDER BY y) AS r FROM input_rows TABLESAMPLE 50%",
    "SELECT *, row_number() OVER (PARTITION BY g ORDER BY y ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS r "
    "FROM input_rows",  # a frame bound's expression
    "SELECT *, row_number(ORDER BY y) OVER (PARTITION BY g ORDER BY y) AS r FROM input_rows",  # the argument order
    "SELECT *, rank() OVER (PARTITION BY g ORDER BY y ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW "
    "EXCLUDE CURRENT ROW) AS r FROM input_rows",
])
def test_other_queries_stay_duckdbs(sql):
    translated = translate(sql)
    assert recognize(translated, GroupRecompute(S, ["g"], translate("SELECT * FROM input_rows")).input_schema,
                     ["g"], output_schema(S, translated)) is None


def test_row_number_over_a_float_is_native():
    sql = translate("SELECT *, row_number() OVER (PARTITION BY g ORDER BY x DESC) AS r FROM input_rows")
    w = GroupRecompute(S, ["g"], sql)
    assert w.ranking is not None
    out = w.step(1, dm.batch(S, [(1, 1, True, float("nan")), (1, 1, True, 2.0), (1, 1, True, None)], [1] * 3, 1))
    # DESC: NULLs first, then NaN (above every number), then 2.0
    assert [(r[3], r[4]) for r in sorted(out.to_pylist(), key=lambda r: r[4])][0] == (None, 1)
    assert sorted(out.to_pylist(), key=lambda r: r[4])[2][3:5] == (2.0, 3)


def test_a_catalog_window_view_is_ranked_natively_and_explained_so():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.append("t", pa.table({"k": [1, 1, 2, None], "v": [5, 3, 1, 2]}))
    cat.execute("CREATE MATERIALIZED VIEW w WITH (INCREMENTAL = 'require') AS "
                "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t")
    cat.append("t", pa.table({"k": [1, None], "v": [4, 1]}))
    assert "ranked natively: row_number (no DuckDB call)" in str(cat.explain("w"))
    got = sorted(cat.read("w").to_pylist(), key=repr)
    want = cat.sql("SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t")
    assert [r[:3] for r in got] == sorted(zip(*[want.column(c).to_pylist() for c in want.column_names]), key=repr)


def test_a_ranked_bulk_change_is_written_without_a_sort():
    # The ranked change comes consolidated by construction and says so: a caught-up view
    # sink (its CREATE write drained it) writes it as it is -- the correction sorts nothing.
    sql = "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t"
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    rng = np.random.default_rng(3)
    cat.append("t", pa.table({"k": rng.integers(0, 2000, 20_000), "v": rng.integers(0, 1000, 20_000)}))
    cat.execute(f"CREATE MATERIALIZED VIEW w WITH (INCREMENTAL = 'require') AS {sql}")
    sink = cat.object("w").maintained.sink
    for _ in range(2):
        before, passed = sink.rows_consolidated, sink.rows_passed
        cat.append("t", pa.table({"k": rng.integers(0, 2000, 500), "v": rng.integers(0, 1000, 500)}))
        assert sink.rows_consolidated == before and sink.rows_passed - passed > 500
    got = colmz.rows.expand(cat.read("w"))
    want = cat.sql(sql)
    assert sorted(zip(*[got.column(c).to_pylist() for c in ("k", "v", "r")])) == \
        sorted(zip(*[want.column(c).to_pylist() for c in ("k", "v", "r")]))


@settings(max_examples=us.examples(30), deadline=None)
@given(dm.change_steps(POOL, max_steps=6), orders, functions)
def test_the_words_path_gives_the_packed_paths_answer(steps, order, fns):
    # rows whose sort words pack into one uint64 are ranked on the packed words; the others
    # (wide values) on the matrix of words: both give the same change, in the same order
    from unittest import mock

    sql = translate(query(order, fns))
    packed, words = GroupRecompute(S, ["g"], sql), GroupRecompute(S, ["g"], sql)
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        want = packed.step(t, b)
        with mock.patch("colmz.dataflow.ranking.pack_columns", return_value=None):
            got = words.step(t, b)
        assert got.to_pylist() == want.to_pylist()


def test_values_too_wide_to_pack_are_ranked_exactly():
    # an int64 column spanning its whole range: the sort words need more than 64 bits
    schema = {"g": pa.int64(), "v": pa.int64()}
    w = GroupRecompute(schema, ["g"], translate(
        "SELECT *, row_number() OVER (PARTITION BY g ORDER BY v) AS r, rank() OVER (PARTITION BY g ORDER BY v) AS k "
        "FROM input_rows"))
    lo, hi = -(2**63), 2**63 - 1
    rows = [(1, hi), (1, lo), (2, 0), (1, hi), (2, lo)]
    out = w.step(1, dm.batch(schema, rows, [1] * len(rows), 1))
    assert sorted(out.to_pylist()) == sorted([(1, lo, 1, 1, 1, 1), (1, hi, 2, 2, 1, 1), (1, hi, 3, 2, 1, 1),
                                              (2, lo, 1, 1, 1, 1), (2, 0, 2, 2, 1, 1)])
    out = w.step(2, dm.batch(schema, [(1, 0), (2, lo)], [1, -1], 2))
    assert sorted(out.to_pylist()) == sorted([
        (1, 0, 2, 2, 2, 1), (1, hi, 2, 2, 2, -1), (1, hi, 3, 2, 2, -1), (1, hi, 3, 3, 2, 1), (1, hi, 4, 3, 2, 1),
        (2, lo, 1, 1, 2, -1), (2, 0, 2, 2, 2, -1), (2, 0, 1, 1, 2, 1)])


@settings(max_examples=us.examples(30), deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 1, 2**58, 2**59 - 1, -5]),
                                   st.sampled_from([1, 1, 2, -1])), max_size=8), max_size=5))
def test_row_number_of_wide_values_sorts_by_a_permutation(steps):
    # values spanning ~2**59 pack into one word, but not beside the entries' positions: the
    # kernel reads the sorted keys through a permutation; same answer as the words path
    from unittest import mock

    schema = {"g": pa.int64(), "v": pa.int64()}
    sql = translate("SELECT *, row_number() OVER (PARTITION BY g ORDER BY v) AS r FROM input_rows")
    packed, words = GroupRecompute(schema, ["g"], sql), GroupRecompute(schema, ["g"], sql)
    held: Counter = Counter()
    for t, step in enumerate(steps):
        step = [(r, d) for r, d in ((r[:2], r[2]) for r in step) if held[r] + d >= 0]
        # (no retraction below zero: both paths raise alike on one, tested above)
        fixed: Counter = Counter()
        for r, d in step:
            if held[r] + fixed[r] + d >= 0:
                fixed[r] += d
        b = dm.batch(schema, list(fixed), list(fixed.values()), t)
        held.update(fixed)
        want = packed.step(t, b)
        with mock.patch("colmz.dataflow.ranking.pack_columns", return_value=None):
            got = words.step(t, b)
        assert got.to_pylist() == want.to_pylist()
