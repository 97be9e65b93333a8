"""``DeltaJoin``: against a nested-loop model over random simultaneous changes; work counted."""

from __future__ import annotations

from collections import Counter
from itertools import product

import dataflow_model as dm
import numpy as np
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.dataflow import DeltaJoin, OuterJoin

T = {"tk": pa.int64(), "tv": pa.float64()}
U = {"uk": pa.int64(), "uw": pa.string()}
V = {"vk": pa.int64(), "vx": pa.int64()}
W = {"wx": pa.int64(), "wy": pa.string()}
T_POOL = [(k, v) for k in (None, 0, 1, -(2**63)) for v in (None, float("nan"), 1.5)]
U_POOL = [(k, w) for k in (None, 0, 1, -(2**63)) for w in ("a", "", None)]
V_POOL = [(k, x) for k in (None, 0, 1) for x in (None, 2, 3)]
W_POOL = [(x, y) for x in (None, 2, 3) for y in ("p", "q")]


def model_join(inputs: list[Counter], schemas: list[dict], on: list[tuple[str, str]]) -> Counter:
    names = [n for s in schemas for n in s]
    out: Counter = Counter()
    for combo in product(*(list(c.items()) for c in inputs)):
        row = tuple(v for r, _ in combo for v in r)
        vals = dict(zip(names, row))
        if all(vals[a] is not None and vals[a] == vals[b] for a, b in on):
            mult = 1
            for _, d in combo:
                mult *= d
            out[row] += mult
    return Counter({k: v for k, v in out.items() if v})


def run_against_model(schemas, pools_steps, on):
    j = DeltaJoin(schemas, on=on)
    held = [Counter() for _ in schemas]
    prev: Counter = Counter()
    n_steps = max(len(s) for s in pools_steps)
    for t in range(n_steps):
        deltas = []
        for i, steps in enumerate(pools_steps):
            step = steps[t] if t < len(steps) else []
            b = dm.batch(schemas[i], [r for r, _ in step], [d for _, d in step], t)
            deltas.append(b)
            held[i].update(dm.counter_of(b))
            held[i] = Counter({k: v for k, v in held[i].items() if v})
        got = dm.as_delta(j.step(t, *deltas), t)
        now = model_join(held, schemas, on)
        assert got == dm.diff_of(prev, now), f"step {t}"
        prev = now


@settings(max_examples=us.examples(80))
@given(dm.change_steps(T_POOL, valid=False), dm.change_steps(U_POOL, valid=False))
def test_two_way_join_matches_the_model(ts, us_):
    run_against_model([T, U], [ts, us_], [("tk", "uk")])


@settings(max_examples=us.examples(60))
@given(dm.change_steps(V_POOL, max_steps=4, max_rows=4), dm.change_steps(T_POOL, max_steps=4, max_rows=4),
       dm.change_steps(W_POOL, max_steps=4, max_rows=4))
def test_three_way_chain_join_matches_the_model(vs, ts, ws):
    # vk = tk and vx = wx: the middle input is looked up by two different keys.
    run_against_model([T, V, W], [ts, vs, ws], [("tk", "vk"), ("vx", "wx")])


@settings(max_examples=us.examples(40))
@given(dm.change_steps(T_POOL, max_steps=4, max_rows=4), dm.change_steps(U_POOL, max_steps=4, max_rows=4),
       dm.change_steps(V_POOL, max_steps=4, max_rows=4))
def test_three_way_star_join_counts_each_combination_once(ts, us_, vs):
    run_against_model([T, U, V], [ts, us_, vs], [("tk", "uk"), ("uk", "vk")])


@settings(max_examples=us.examples(40))
@given(dm.change_steps(T_POOL, max_steps=4, max_rows=4), dm.change_steps(U_POOL, max_steps=4, max_rows=4),
       dm.change_steps(V_POOL, max_steps=4, max_rows=4))
def test_cross_joins_match_the_model(ts, us_, vs):
    # t x u with no key at all; t x (u join v) with u, v connected and t reached by no key
    run_against_model([T, U], [ts, us_], [])
    run_against_model([T, U, V], [ts, us_, vs], [("uk", "vk")])


def test_a_cross_join_change_costs_the_other_side():
    j = DeltaJoin([{"a": pa.int64()}, {"b": pa.int64()}], on=[])
    j.step(1, colmz.Updates({"a": list(range(50))}, time=[1] * 50, diff=[1] * 50),
           colmz.Updates({"b": list(range(20))}, time=[1] * 20, diff=[1] * 20))
    before = sum(a.rows_found for a in j.arrangements.values())
    out = j.step(2, colmz.Updates({"a": [7]}, time=[2], diff=[-1]), colmz.Updates.empty({"b": pa.int64()}))
    assert sorted(out.to_pylist()) == [(7, b, 2, -1) for b in range(20)]
    assert sum(a.rows_found for a in j.arrangements.values()) - before == 20


def test_simultaneous_inserts_count_each_pair_once():
    j = DeltaJoin([T, U], on=[("tk", "uk")])
    out = j.step(0, dm.batch(T, [(1, 2.0)], [1], 0), dm.batch(U, [(1, "a")], [1], 0))
    assert out.to_pylist() == [(1, 2.0, 1, "a", 0, 1)]
    out = j.step(1, dm.batch(T, [(1, 2.0)], [-1], 1), dm.batch(U, [(1, "a")], [-1], 1))
    assert out.to_pylist() == [(1, 2.0, 1, "a", 1, -1)]


def test_one_row_change_touches_few_rows_of_a_100k_join():
    n = 100_000
    rng = np.random.default_rng(7)
    j = DeltaJoin([{"tk": pa.int64(), "tv": pa.int64()}, {"uk": pa.int64(), "uw": pa.int64()}], on=[("tk", "uk")])
    t0 = colmz.Updates({"tk": rng.integers(0, n // 10, n), "tv": np.arange(n)}, time=np.zeros(n, np.uint64),
                       diff=np.ones(n, np.int64))
    u0 = colmz.Updates({"uk": np.arange(n // 10), "uw": np.arange(n // 10)}, time=np.zeros(n // 10, np.uint64),
                       diff=np.ones(n // 10, np.int64))
    j.step(0, t0, u0)
    for t in range(1, 30):  # a history of one-row changes, as a view sees
        j.step(t, colmz.Updates({"tk": [t], "tv": [-t]}, time=[t], diff=[1]),
               colmz.Updates.empty({"uk": pa.int64(), "uw": pa.int64()}))
    arrs = list(j.arrangements.values())

    def touched():
        return sum(a.rows_found + a.keys_searched + a.rows_merged + a.rows_inserted for a in arrs)

    before = touched()
    out = j.step(30, colmz.Updates({"tk": [5], "tv": [-1]}, time=[30], diff=[1]),
                 colmz.Updates.empty({"uk": pa.int64(), "uw": pa.int64()}))
    assert out.to_pylist() == [(5, -1, 5, 5, 30, 1)]
    assert touched() - before <= 48  # one search per run of u's arrangement, one match, the insert
    before = touched()
    out = j.step(31, colmz.Updates.empty({"tk": pa.int64(), "tv": pa.int64()}),
                 colmz.Updates({"uk": [5], "uw": [5]}, time=[31], diff=[-1]))
    # u's row 5 leaves with its matches: t0's rows of key 5 and the two inserted at times 5 and 30
    assert len(out) == 2 + int((t0.column("tk").to_numpy() == 5).sum())
    assert touched() - before <= 48 + len(out)


def test_bad_joins_are_refused_by_name():
    with pytest.raises(ValueError, match="distinct across"):
        DeltaJoin([{"k": pa.int64()}, {"k": pa.int64()}], on=[("k", "k")])
    with pytest.raises(TypeError, match="one type"):
        DeltaJoin([{"a": pa.int64()}, {"b": pa.float64()}], on=[("a", "b")])
    with pytest.raises(ValueError, match="one input"):
        DeltaJoin([{"a": pa.int64(), "a2": pa.int64()}, {"b": pa.int64()}], on=[("a", "a2"), ("a", "b")])
    with pytest.raises(ValueError, match="no input has"):
        DeltaJoin([{"a": pa.int64()}, {"b": pa.int64()}], on=[("a", "zz")])


def test_a_failed_step_changes_nothing():
    j = DeltaJoin([{"a": pa.int64()}, {"b": pa.int64()}], on=[("a", "b")])
    j.step(0, colmz.Updates({"a": [1]}, time=[0], diff=[2**40]), colmz.Updates({"b": [1]}, time=[0], diff=[1]))
    with pytest.raises(OverflowError, match="diff overflow"):
        j.step(1, colmz.Updates({"a": [1]}, time=[1], diff=[1]), colmz.Updates({"b": [1]}, time=[1], diff=[2**40]))
    with pytest.raises(ValueError, match="at time 3"):
        j.step(2, colmz.Updates({"a": [1]}, time=[3], diff=[1]), colmz.Updates.empty({"b": pa.int64()}))
    # The arrangements did not move (a's change entered before b's path failed, and left):
    # (a + 1)(b + 1) - ab = a + b + 1 with a = 2**40, b = 1.
    out = j.step(1, colmz.Updates({"a": [1]}, time=[1], diff=[1]), colmz.Updates({"b": [1]}, time=[1], diff=[1]))
    assert out.to_pylist() == [(1, 1, 1, 2**40 + 2)]
    with pytest.raises(ValueError, match="before the last step"):
        j.step(0, colmz.Updates.empty({"a": pa.int64()}), colmz.Updates.empty({"b": pa.int64()}))


BIG_T = [(k, float(v)) for k in (None, *range(6)) for v in range(6)]
BIG_U = [(k, w) for k in (None, *range(6)) for w in ("x", "y" * 9, "z" * 20)]


@settings(max_examples=us.examples(15))
@given(dm.change_steps(BIG_T, max_steps=14, max_rows=60, valid=False),
       dm.change_steps(BIG_U, max_steps=14, max_rows=60, valid=False))
def test_bulk_changes_through_many_runs_match_the_model(ts, us_):
    # Batches above the small-batch paths, strings of several widths (runs of different
    # layouts merged and searched), many runs merged geometrically.
    run_against_model([T, U], [ts, us_], [("tk", "uk")])


# ----------------------------------------------------------------------------- outer joins


def model_outer(held: list[Counter], kind: str) -> Counter:
    inner = model_join(held, [T, U], [("tk", "uk")])
    out = Counter(inner)
    pads = {0: (None, None), 1: (None, None)}
    for p in {"left": (0,), "right": (1,), "full": (0, 1)}[kind]:
        o = 1 - p
        other_keys = {r[0] for r, c in held[o].items() if c and r[0] is not None}
        for row, c in held[p].items():
            if row[0] is None or row[0] not in other_keys:
                out[row + pads[o] if p == 0 else pads[o] + row] += c
    return Counter({k: v for k, v in out.items() if v})


@settings(max_examples=us.examples(80))
@given(dm.change_steps(T_POOL), dm.change_steps(U_POOL), st.sampled_from(["left", "right", "full"]))
def test_outer_joins_match_the_model(ts, us_, kind):
    j = OuterJoin([T, U], on=[("tk", "uk")], kind=kind)
    held = [Counter(), Counter()]
    prev: Counter = Counter()
    for t in range(max(len(ts), len(us_))):
        deltas = []
        for i, (steps, schema) in enumerate(((ts, T), (us_, U))):
            step = steps[t] if t < len(steps) else []
            b = dm.batch(schema, [r for r, _ in step], [d for _, d in step], t)
            deltas.append(b)
            held[i].update(dm.counter_of(b))
            held[i] = Counter({k: v for k, v in held[i].items() if v})
        got = dm.as_delta(j.step(t, *deltas), t)
        now = model_outer(held, kind)
        assert got == dm.diff_of(prev, now), f"step {t}"
        prev = now


@pytest.mark.parametrize("kind", ["left", "right", "full"])
def test_an_outer_join_on_two_keys_in_another_order_than_its_sides_columns(kind):
    # Each side is arranged by its join columns in its own schema's order: here (k, w) on
    # the left, (s, v) on the right, while the pairs are (w = s, k = v) -- no one order
    # fits both. A right side's last match retracted must pad the left row again (and
    # the left row's match arriving must retract its padding), as for one key.
    left, right = {"k": pa.int64(), "w": pa.string()}, {"s": pa.string(), "v": pa.int64()}
    j = OuterJoin([left, right], on=[("w", "s"), ("k", "v")], kind=kind)
    none_l, none_r = colmz.Updates.empty(left), colmz.Updates.empty(right)

    def step(t, dl, dr):
        return sorted(j.step(t, dl, dr).to_pylist(), key=repr)

    lrow = colmz.Updates({"k": [2], "w": ["a"]}, time=[2], diff=[1])
    assert step(1, none_l, colmz.Updates({"s": ["a"], "v": [2]}, time=[1], diff=[1])) == (
        [] if kind == "left" else [(None, None, "a", 2, 1, 1)])
    got = step(2, lrow, none_r)
    assert (2, "a", "a", 2, 2, 1) in got and ((None, None, "a", 2, 2, -1) in got) == (kind != "left")
    got = step(3, none_l, colmz.Updates({"s": ["a"], "v": [2]}, time=[3], diff=[-1]))
    assert got == sorted([(2, "a", "a", 2, 3, -1)] + ([(2, "a", None, None, 3, 1)] if kind != "right" else []),
                         key=repr)
    got = step(4, none_l, colmz.Updates({"s": ["a", "b"], "v": [2, 2]}, time=[4, 4], diff=[1, 1]))
    expected = [(2, "a", "a", 2, 4, 1)] + ([(2, "a", None, None, 4, -1)] if kind != "right" else [])
    expected += [(None, None, "b", 2, 4, 1)] if kind != "left" else []
    assert got == sorted(expected, key=repr)


def test_outer_join_work_is_the_flipping_key():
    n = 100_000
    schema_t, schema_u = {"tk": pa.int64(), "tv": pa.int64()}, {"uk": pa.int64()}
    j = OuterJoin([schema_t, schema_u], on=[("tk", "uk")], kind="left")
    j.step(0, colmz.Updates({"tk": np.arange(n) % 10_000, "tv": np.arange(n)}, time=np.zeros(n, np.uint64),
                            diff=np.ones(n, np.int64)), colmz.Updates.empty(schema_u))
    arrs = list(j.arrangements.values())
    found = sum(a.rows_found for a in arrs)
    out = j.step(1, colmz.Updates.empty(schema_t), colmz.Updates({"uk": [7]}, time=[1], diff=[1]))
    assert len(out) == 20  # key 7's ten rows leave the unmatched part and join
    assert sum(a.rows_found for a in arrs) - found <= 2 * 10 + 4
    with pytest.raises(ValueError, match="kind must be one of"):
        OuterJoin([schema_t, schema_u], on=[("tk", "uk")], kind="inner")


def test_a_failed_outer_step_changes_nothing():
    j = OuterJoin([{"a": pa.int64()}, {"b": pa.int64()}], on=[("a", "b")], kind="full")
    j.step(0, colmz.Updates({"a": [1]}, time=[0], diff=[2**40]), colmz.Updates.empty({"b": pa.int64()}))
    with pytest.raises(OverflowError, match="diff overflow"):
        j.step(1, colmz.Updates({"a": [1]}, time=[1], diff=[1]), colmz.Updates({"b": [1]}, time=[1], diff=[2**40]))
    # As if the failed step never ran: a's 2**40 + 1 rows of key 1 meet b's first row.
    out = j.step(1, colmz.Updates({"a": [1]}, time=[1], diff=[1]), colmz.Updates({"b": [1]}, time=[1], diff=[1]))
    assert out.to_pylist() == [(1, None, 1, -(2**40)), (1, 1, 1, 2**40 + 1)]
