"""``TopK``, ``Distinct`` and ``Threshold`` against recomputes in Python."""

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
from colmz.dataflow import Distinct, OrderBy, Threshold, TopK
from colmz.errors import NegativeMultiplicity

S = {"g": pa.int64(), "x": pa.float64(), "y": pa.int64(), "s": pa.string()}
POOL = [(g, x, y, s) for g, x, y, s in zip(
    [None, 1, 1, 2, 1, None, 2, 1, 1, 2],
    [1.0, float("nan"), None, -0.0, 1.0, 2.0, None, float("nan"), 0.0, 3.5],
    [5, 5, None, 1, 2, 5, 7, None, 2, 1],
    ["a", "b", "", None, "a", "c", "b", "d", "e", "a"])]
KINDS = [colmz.ColumnSpec(n, t).kind for n, t in S.items()]


def model_topk(held: Counter, group: list[int], order: list[OrderBy], limit, offset) -> Counter:
    out: Counter = Counter()
    for rows in rm.sorted_groups(held, group, rm.row_order(list(S), KINDS, order)):
        end = None if limit is None else offset + limit
        out.update(rows[offset:end])
    return out


def run(op, steps, model):
    held: Counter = Counter()
    prev: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        got = dm.as_delta(op.step(t, b), t)
        now = model(held)
        assert got == dm.diff_of(prev, now), f"step {t}"
        prev = now


orders = st.lists(st.builds(OrderBy, st.sampled_from(["x", "y", "g"]), st.booleans(),
                            st.one_of(st.none(), st.booleans())), min_size=1, max_size=2)


@settings(max_examples=us.examples(80))
@given(dm.change_steps(POOL, max_steps=8), orders, st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 2),
       st.booleans())
def test_topk_matches_the_model(steps, order, limit, offset, grouped):
    group = ["g"] if grouped else []
    op = TopK(S, group, order, limit=limit, offset=offset)
    run(op, steps, lambda h: model_topk(h, [0] if grouped else [], order, limit, offset))


def test_topk_work_is_the_affected_group():
    n = 100_000
    schema = {"g": pa.int64(), "v": pa.int64()}
    t = TopK(schema, ["g"], [OrderBy("v", descending=True)], limit=2)
    t.step(0, colmz.Updates({"g": np.arange(n) % 10_000, "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                            diff=np.ones(n, np.int64)))
    before = t.arrangement.rows_found
    out = t.step(1, colmz.Updates({"g": [3], "v": [90_003]}, time=[1], diff=[-1]))  # group 3's first
    assert out.to_pylist() == [(3, 70_003, 1, 1), (3, 90_003, 1, -1)]
    assert t.arrangement.rows_found - before == 10  # the group read once, before the delta enters


def test_topk_refuses_text_order_and_bad_limits():
    with pytest.raises(TypeError, match="collation"):
        TopK(S, [], ["s"], limit=1)
    with pytest.raises(ValueError, match="limit must be a non-negative int"):
        TopK(S, [], ["x"], limit=-1)
    with pytest.raises(ValueError, match="offset"):
        TopK(S, [], ["x"], limit=1, offset=1.5)


def model_distinct(held: Counter) -> Counter:
    return Counter({r: 1 for r, c in held.items() if c > 0})


def model_threshold(held: Counter) -> Counter:
    return Counter({r: c for r, c in held.items() if c > 0})


@settings(max_examples=us.examples(80))
@given(dm.change_steps(POOL, max_steps=8))
def test_distinct_matches_the_model(steps):
    run(Distinct(S), steps, model_distinct)


@settings(max_examples=us.examples(80))
@given(dm.change_steps(POOL, max_steps=8, valid=False))
def test_threshold_matches_the_model_with_negative_counts(steps):
    run(Threshold(S), steps, model_threshold)


def test_distinct_refuses_negative_counts_and_changes_nothing():
    d = Distinct(S)
    d.step(0, dm.batch(S, [POOL[0]], [1], 0))
    with pytest.raises(NegativeMultiplicity):
        d.step(1, dm.batch(S, [POOL[0]], [-2], 1))
    assert d.step(1, dm.batch(S, [POOL[0]], [-1], 1)).to_pylist() == [(None, 1.0, 5, "a", 1, -1)]


def test_distinct_one_row_change_touches_log_n():
    n = 100_000
    d = Distinct({"k": pa.int64()})
    d.step(0, colmz.Updates({"k": np.arange(n) % 50_000}, time=np.zeros(n, np.uint64), diff=np.ones(n, np.int64)))
    a = d.arrangement
    before = a.keys_searched + a.rows_found + a.rows_merged
    assert d.step(1, colmz.Updates({"k": [7]}, time=[1], diff=[-1])).to_pylist() == []
    assert d.step(2, colmz.Updates({"k": [7]}, time=[2], diff=[-1])).to_pylist() == [(7, 2, -1)]
    assert a.keys_searched + a.rows_found + a.rows_merged - before <= 2 * a.runs + 4


def test_topk_refuses_retracting_rows_it_does_not_hold_and_changes_nothing():
    t = TopK(S, ["g"], [OrderBy("x", descending=True)], limit=1)
    t.step(0, dm.batch(S, [POOL[1], POOL[4]], [1, 1], 0))
    with pytest.raises(NegativeMultiplicity, match="top-k"):
        t.step(1, dm.batch(S, [POOL[4]], [-2], 1))
    # unchanged: the NaN row leads group 1 (NaN above every number, DESC puts it first)
    out = t.step(1, dm.batch(S, [POOL[1]], [-1], 1)).to_pylist()
    assert repr(out) == repr([(1, 1.0, 2, "a", 1, 1), (1, float("nan"), 5, "b", 1, -1)])


def test_topk_text_payload_nulls_and_duplicates_to_zero():
    # payload words of text columns of several widths; duplicates occupy places; a group
    # retracted to nothing leaves the output
    s = {"g": pa.int64(), "v": pa.int64(), "t": pa.string()}
    t = TopK(s, ["g"], [OrderBy("v", nulls_first=True)], limit=2)
    rows = [(1, None, "a long string of text"), (1, 3, "b"), (1, 3, "b"), (1, 2, None), (2, 5, "")]
    out = t.step(0, colmz.Updates({c: [r[i] for r in rows] for i, c in enumerate(s)}, time=[0] * 5,
                                  diff=[1] * 5))
    assert sorted(out.to_pylist(), key=repr) == sorted(
        [(1, None, "a long string of text", 0, 1), (1, 2, None, 0, 1), (2, 5, "", 0, 1)], key=repr)
    out = t.step(1, colmz.Updates({"g": [1, 2], "v": [None, 5], "t": ["a long string of text", ""]},
                                  time=[1, 1], diff=[-1, -1]))
    assert sorted(out.to_pylist(), key=repr) == sorted(
        [(1, None, "a long string of text", 1, -1), (1, 3, "b", 1, 1), (2, 5, "", 1, -1)], key=repr)


# -- the kept places (``TopK.top``): a group the delta only inserts into is ranked from its
# kept places and the inserted rows, never read from the input arrangement

TIES = [(g, x, y, "t") for g in (None, 1, 2) for x, y in ((1.0, 1), (1.0, 1), (1.0, 2), (None, 1), (2.0, None))]


@st.composite
def insert_heavy_steps(draw, pool, max_steps=8):
    """Steps mostly inserting (several rows of one group, ties, duplicates), some retracting
    -- the kth row, a row to zero -- never below zero."""
    held: Counter = Counter()
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step = []
        for i, d in draw(st.lists(st.tuples(st.integers(0, len(pool) - 1),
                                            st.sampled_from([1, 1, 1, 2, -1, -3])), max_size=6)):
            row = pool[i]
            d = max(d, -held[row])
            if d:
                step.append((row, d))
                held[row] += d
        steps.append(step)
    return steps


def model_places(held: Counter, group, order, places) -> Counter:
    return model_topk(held, group, order, places, 0)


@settings(max_examples=us.examples(120))
@given(insert_heavy_steps(TIES + POOL), orders, st.integers(0, 3), st.integers(0, 2), st.booleans())
def test_topk_kept_places_match_the_model(steps, order, limit, offset, grouped):
    # every step's output is the model's difference, and the kept places are each group's
    # first offset + limit places (ties, NULL group keys, duplicates, retractions to zero)
    group = ["g"] if grouped else []
    op = TopK(S, group, order, limit=limit, offset=offset)
    held: Counter = Counter()
    prev: Counter = Counter()
    for t, step in enumerate(steps):
        b = dm.batch(S, [r for r, _ in step], [d for _, d in step], t)
        held.update(dm.counter_of(b))
        held = Counter({k: v for k, v in held.items() if v})
        got = dm.as_delta(op.step(t, b), t)
        now = model_topk(held, [0] if grouped else [], order, limit, offset)
        assert got == dm.diff_of(prev, now), f"step {t}"
        prev = now
        kept = dm.counter_of(op.top.snapshot())
        assert kept == model_places(held, [0] if grouped else [], order, offset + limit), f"step {t}"


def test_topk_insert_only_groups_are_ranked_from_their_kept_places():
    n, groups = 100_000, 10_000
    schema = {"g": pa.int64(), "v": pa.int64()}
    t = TopK(schema, ["g"], [OrderBy("v", descending=True)], limit=2)
    t.step(0, colmz.Updates({"g": np.arange(n) % groups, "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                            diff=np.ones(n, np.int64)))
    found, reread, ranked = t.arrangement.rows_found, t.groups_reread, t.rows_ranked
    m = 1_000  # a bulk insert into 1,000 groups of 10 rows each
    g = np.arange(m) * 7 % groups
    out = t.step(1, colmz.Updates({"g": g, "v": np.full(m, n) + g}, time=np.ones(m, np.uint64),
                                  diff=np.ones(m, np.int64)))
    # each group's new row leads it: it enters, the old second place leaves
    assert len(out) == 2 * m
    rows = out.to_pylist()
    assert (0, n, 1, 1) in rows and (0, 80_000, 1, -1) in rows  # group 0: 90,000 stays first
    assert t.arrangement.rows_found == found  # no group read from the input
    assert t.groups_reread == reread
    assert t.rows_ranked - ranked == 2 * m + m  # each group's 2 kept places and its inserted row


def test_topk_deleting_the_kth_row_rereads_its_group_only():
    schema = {"g": pa.int64(), "v": pa.int64()}
    t = TopK(schema, ["g"], ["v"], limit=2)
    t.step(0, colmz.Updates({"g": [1, 1, 1, 1, 2, 2], "v": [4, 3, 2, 1, 7, 7]}, time=[0] * 6, diff=[1] * 6))
    # group 1's second place (v = 2) leaves: v = 3 moves up; group 2 takes an insert only
    out = t.step(1, colmz.Updates({"g": [1, 2], "v": [2, 0]}, time=[1, 1], diff=[-1, 1]))
    assert sorted(out.to_pylist()) == [(1, 2, 1, -1), (1, 3, 1, 1), (2, 0, 1, 1), (2, 7, 1, -1)]
    assert t.groups_reread == 1
    assert sorted(t.top.snapshot().to_pylist()) == [(1, 1, 1, 1), (1, 3, 1, 1), (2, 0, 1, 1), (2, 7, 1, 1)]
    # the tie at the boundary: v = 7 twice held one place; retracting one copy keeps it
    out = t.step(2, colmz.Updates({"g": [2], "v": [7]}, time=[2], diff=[-1]))
    assert out.to_pylist() == []
    # the whole group to zero leaves the output and the kept places
    out = t.step(3, colmz.Updates({"g": [2, 2], "v": [7, 0]}, time=[3, 3], diff=[-1, -1]))
    assert sorted(out.to_pylist()) == [(2, 0, 3, -1), (2, 7, 3, -1)]
    assert sorted(t.top.snapshot().to_pylist()) == [(1, 1, 3, 1), (1, 3, 3, 1)]


def test_topk_without_a_limit_keeps_no_places():
    t = TopK({"g": pa.int64(), "v": pa.int64()}, ["g"], ["v"], limit=None, offset=1)
    assert t.top is None
    out = t.step(0, colmz.Updates({"g": [1, 1, 1], "v": [3, 1, 2]}, time=[0] * 3, diff=[1] * 3))
    assert sorted(out.to_pylist()) == [(1, 2, 0, 1), (1, 3, 0, 1)]
    assert t.groups_reread == 1
