"""``colmz.dataflow.Collation``: reduces of different types joined per group (their
pipelines are checked against DuckDB in ``test_plan.py``; here the operator's own rules)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
from colmz.dataflow.collate import Collation
from colmz.errors import NegativeMultiplicity

A = {"g": pa.float64(), "s": pa.int64()}
B = {"g": pa.float64(), "hi": pa.int64()}


def up(schema, rows, diffs, t):
    names = list(schema)
    return colmz.Updates({n: [r[i] for r in rows] for i, n in enumerate(names)}, time=[t] * len(rows),
                         diff=diffs, schema=schema)


def test_groups_are_group_by_groups_null_and_nan_included():
    c = Collation([A, B], ["g"])
    nan = float("nan")
    out = c.step(1, up(A, [(None, 1), (nan, 2), (-0.0, 3)], [1, 1, 1], 1),
                 up(B, [(None, 10), (nan, 20), (0.0, 30)], [1, 1, 1], 1))
    rows = sorted(out.to_pylist(), key=repr)
    assert len(rows) == 3 and {r[1:3] for r in rows} == {(1, 10), (2, 20), (3, 30)}
    # a group changed in one input only: old combined row out, new in
    out = c.step(2, up(A, [(nan, 2), (nan, 5)], [-1, 1], 2), up(B, [], [], 2))
    assert [(r[1], r[2], r[4]) for r in out.to_pylist()] == [(2, 20, -1), (5, 20, 1)]
    # a group gone from both inputs is retracted once
    out = c.step(3, up(A, [(None, 1)], [-1], 3), up(B, [(None, 10)], [-1], 3))
    assert out.to_pylist() == [(None, 1, 10, 3, -1)]


def test_a_step_that_raises_changes_nothing():
    c = Collation([A, B], ["g"])
    c.step(1, up(A, [(1.0, 1)], [1], 1), up(B, [(1.0, 5)], [1], 1))
    with pytest.raises(NegativeMultiplicity, match="retracts rows it does not hold"):
        c.step(2, up(A, [(1.0, 1), (2.0, 7)], [-1, 1], 2), up(B, [(1.0, 9)], [-1], 2))  # (1.0, 9) never held
    out = c.step(2, up(A, [(1.0, 1)], [-1], 2), up(B, [(1.0, 5)], [-1], 2))
    assert out.to_pylist() == [(1.0, 1, 5, 2, -1)]


@pytest.mark.parametrize("inputs,group,match", [
    ([A], ["g"], "at least two inputs"),
    ([A, {"h": pa.float64(), "hi": pa.int64()}], ["g"], "does not start with the group columns"),
    ([A, {"g": pa.int64(), "hi": pa.int64()}], ["g"], "of one type"),
    ([A, {"g": pa.float64(), "s": pa.int64()}], ["g"], "named twice"),
])
def test_bad_inputs(inputs, group, match):
    with pytest.raises(ValueError, match=match):
        Collation(inputs, group)


def test_two_rows_in_a_group_are_refused():
    c = Collation([A, B], ["g"])
    with pytest.raises(NegativeMultiplicity, match="more than one row"):
        c.step(1, up(A, [(1.0, 1), (1.0, 2)], [1, 1], 1), up(B, [(1.0, 5)], [1], 1))
    assert c.step(1, up(A, [(1.0, 1)], [1], 1), up(B, [(1.0, 5)], [1], 1)).to_pylist() == [(1.0, 1, 5, 1, 1)]


def test_a_step_looks_up_only_the_groups_it_touches():
    c = Collation([A, B], ["g"])
    n = 5000
    c.step(1, up(A, [(float(i), i) for i in range(n)], [1] * n, 1), up(B, [(float(i), i) for i in range(n)], [1] * n, 1))
    found = sum(a.rows_found for a in c.arrangements)
    out = c.step(2, up(A, [(7.0, 7), (7.0, 8)], [-1, 1], 2), up(B, [], [], 2))
    assert out.to_pylist() == [(7.0, 7, 7, 2, -1), (7.0, 8, 7, 2, 1)]
    assert sum(a.rows_found for a in c.arrangements) - found <= 6  # one group, both inputs, before and after
