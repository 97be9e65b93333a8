"""``GroupRecompute``: against a naive model (the query's answer per group, in Python, over
the integrated input) under random change sequences; work counted per affected group."""

from __future__ import annotations

from collections import Counter

import dataflow_model as dm
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings

import colmz
from colmz.dataflow.recompute import GroupRecompute
from colmz.errors import NegativeMultiplicity
from colmz.sql import translate

T = {"g": pa.int64(), "x": pa.string(), "v": pa.int64()}
POOL = [(g, x, v) for g in (None, 1, 2) for x, v in (("a", 1), ("b", None), (None, 3), ("a", 2))]


def model_agg(held: Counter) -> Counter:
    # SELECT g, string_agg(x, ',' ORDER BY x), count(DISTINCT v), count(*) GROUP BY g
    groups: dict = {}
    for (g, x, v), c in held.items():
        groups.setdefault(g, []).extend([(x, v)] * c)
    out: Counter = Counter()
    for g, rows in groups.items():
        xs = sorted(x for x, _ in rows if x is not None)
        out[(g, ",".join(xs) if xs else None, len({v for _, v in rows if v is not None}), len(rows))] += 1
    return out


def model_window(held: Counter) -> Counter:
    # SELECT *, rank() OVER (PARTITION BY g ORDER BY v) (NULLs last, PostgreSQL's)
    groups: dict = {}
    for row, c in held.items():
        groups.setdefault(row[0], []).extend([row] * c)
    out: Counter = Counter()
    for rows in groups.values():
        key = [(r[2] is None, r[2] if r[2] is not None else 0) for r in rows]
        for r, k in zip(rows, key):
            out[(*r, 1 + sum(1 for o in key if o < k))] += 1
    return out


AGG = translate("SELECT g, string_agg(x, ',' ORDER BY x) AS xs, count(DISTINCT v) AS d, count(*) AS n "
                "FROM input_rows GROUP BY g")
WINDOW = translate("SELECT *, rank() OVER (PARTITION BY g ORDER BY v) AS r FROM input_rows")


@settings(max_examples=us.examples(25), deadline=None)
@given(dm.change_steps(POOL, max_steps=5))
def test_basic_aggregates_and_windows_match_the_model(steps):
    ops = [(GroupRecompute(T, ["g"], AGG), model_agg), (GroupRecompute(T, ["g"], WINDOW), model_window)]
    held: Counter = Counter()
    prev = [Counter() for _ in ops]
    for t, step in enumerate(steps):
        delta = dm.batch(T, [r for r, _ in step], [d for _, d in step], t)
        for r, d in step:
            held[r] += d
        held = Counter({k: c for k, c in held.items() if c})
        for i, (op, model) in enumerate(ops):
            now = model(held)
            assert dm.as_delta(op.step(t, delta), t) == dm.diff_of(prev[i], now), f"{op} at {t}"
            prev[i] = now


def test_a_global_group_has_its_row_from_the_first_step():
    r = GroupRecompute(T, [], translate("SELECT count(*) AS n, string_agg(x, ',') AS xs FROM input_rows"))
    assert r.step(0, colmz.Updates.empty(T)).to_pylist() == [(0, None, 0, 1)]
    assert r.step(1, colmz.Updates.empty(T)).to_pylist() == []
    assert r.step(2, dm.batch(T, [(1, "a", 1)], [1], 2)).to_pylist() == [(0, None, 2, -1), (1, "a", 2, 1)]


def test_a_one_row_change_recomputes_its_group_only():
    # 20 k rows in 2 k groups of 10: a one-row change gives DuckDB its group's rows only
    n = 20_000
    r = GroupRecompute(T, ["g"], AGG)
    r.step(1, dm.batch(T, [(i % 2000, "a", i) for i in range(n)], [1] * n, 1))
    inp, out = r.arrangements
    before = (r.rows_recomputed, inp.rows_found, out.rows_found)
    delta = r.step(2, dm.batch(T, [(7, "b", -1)], [1], 2))
    assert sorted(delta.to_pylist()) == [(7, ",".join(["a"] * 10), 10, 10, 2, -1),
                                         (7, ",".join(["a"] * 10 + ["b"]), 11, 11, 2, 1)]
    assert r.rows_recomputed - before[0] == 11
    assert inp.rows_found - before[1] == 11 and out.rows_found - before[2] == 1


def test_a_failed_step_changes_nothing():
    r = GroupRecompute(T, ["g"], AGG)
    r.step(1, dm.batch(T, [(1, "a", 1)], [1], 1))
    with pytest.raises(NegativeMultiplicity):
        r.step(2, dm.batch(T, [(1, "b", 1)], [-1], 2))
    with pytest.raises(ValueError, match="before the last step"):
        r.step(0, dm.batch(T, [], [], 0))
    assert r.step(3, dm.batch(T, [(1, "a", 1)], [-1], 3)).to_pylist() == [(1, "a", 1, 1, 3, -1)]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="must hold the group key"):
        GroupRecompute(T, ["g"], translate("SELECT count(*) AS n FROM input_rows"))
    with pytest.raises(ValueError, match="group_by names column 'zz'"):
        GroupRecompute(T, ["zz"], AGG)
    with pytest.raises(TypeError, match="translated must be SQL text"):
        GroupRecompute(T, ["g"], None)
    with pytest.raises(colmz.SchemaError, match="DECIMAL"):
        GroupRecompute(T, [], translate("SELECT avg(v)::numeric(10, 2) AS a FROM input_rows"))


def model_trailing_key(held: Counter) -> Counter:
    # SELECT v, g, row_number() OVER (PARTITION BY g ORDER BY v, x) with unique (v, x) per group
    groups: dict = {}
    for row, c in held.items():
        groups.setdefault(row[0], []).extend([row] * c)
    out: Counter = Counter()
    for rows in groups.values():
        rows.sort(key=lambda r: ((r[2] is None, r[2] or 0), (r[1] is None, r[1] or "")))
        for i, (g, x, v) in enumerate(rows):
            out[(v, x, g, i + 1)] += 1
    return out


TRAILING = translate("SELECT v, x, g, row_number() OVER (PARTITION BY g ORDER BY v, x) AS r FROM input_rows")


@settings(max_examples=us.examples(25), deadline=None)
@given(dm.change_steps(POOL, max_steps=5))
def test_a_group_key_after_other_columns_matches_the_model(steps):
    # The change is found on the words of (key, rest); a key that does not lead the columns
    # has its change sorted again (a consolidated delta's order).
    op = GroupRecompute(T, ["g"], TRAILING)
    held: Counter = Counter()
    prev: Counter = Counter()
    for t, step in enumerate(steps):
        for r, d in step:
            held[r] += d
        held = Counter({k: c for k, c in held.items() if c})
        if any(c > 1 for c in held.values()):  # row_number over equal rows: ties DuckDB breaks
            return
        out = op.step(t, dm.batch(T, [r for r, _ in step], [d for _, d in step], t))
        assert out.to_pylist() == colmz.consolidate(out).to_pylist()
        now = model_trailing_key(held)
        assert dm.as_delta(out, t) == dm.diff_of(prev, now), f"step {t}"
        prev = now


def test_a_bulk_change_is_one_duckdb_call_and_comes_consolidated():
    # 2 k partitions of 10 rows (no NULL: the change's words are its consolidated order); one
    # step touching 500 partitions, duplicates and a partition retracted to nothing included.
    schema = {"g": pa.int64(), "v": pa.int64()}
    w = GroupRecompute(schema, ["g"], translate(
        "SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY v) AS r FROM input_rows"))
    rows = [(i % 2000, i) for i in range(20_000)]
    w.step(1, dm.batch(schema, rows, [1] * len(rows), 1))
    queries = w.queries
    change = [((g, 10_000_000 + g), 2) for g in range(0, 1000, 2)] + [((1, v), -1) for g, v in rows if g == 1]
    out = w.step(2, dm.batch(schema, [r for r, _ in change], [d for _, d in change], 2))
    assert w.queries - queries == 1
    assert out.to_pylist() == colmz.consolidate(out).to_pylist()
    got = Counter()
    for g, v, r, _, d in out.to_pylist():
        got[(g, v, r)] += d
    want = Counter({(g, 10_000_000 + g, r): 1 for g in range(0, 1000, 2) for r in (11, 12)})
    want.update({(1, v, i + 1): -1 for i, v in enumerate(sorted(v for g, v in rows if g == 1))})
    assert got == want
    held = w.arrangements[1].snapshot()
    assert not [r for r in held.to_pylist() if r[0] == 1]


def test_the_input_is_sorted_only_when_a_run_holds_a_retraction():
    # rows of positive diffs in several runs are given to DuckDB as read; a retraction in a
    # run makes the read consolidate (a row inserted, then deleted in another run, cancels)
    r = GroupRecompute(T, ["g"], AGG)
    r.step(1, dm.batch(T, [(1, "a", 1), (1, "b", 2)], [1, 1], 1))
    r.step(2, dm.batch(T, [(1, "a", 1), (2, "c", 3)], [1, 1], 2))
    assert r.rows_consolidated == 0
    out = r.step(3, dm.batch(T, [(1, "a", 1)], [-2], 3))
    assert r.rows_consolidated > 0
    assert sorted(out.to_pylist()) == [(1, "a,a,b", 2, 3, 3, -1), (1, "b", 1, 1, 3, 1)]
