"""Frontiers over totally ordered ``uint64`` time: lattice laws and argument checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.frontier import (
    MAX_TIME,
    advance_by,
    before,
    check_frontier,
    check_time,
    frontier_le,
    frontier_lt,
    join,
    less_equal,
    less_than,
    meet,
    step_back,
    step_back_frontier,
    step_forward,
)

times = st.sampled_from([0, 1, MAX_TIME - 1, MAX_TIME]) | st.integers(0, MAX_TIME)
frontiers = st.none() | times


def as_key(f):
    """Frontier order as a sortable key: ``None`` (the empty antichain) is the top."""
    return (1, 0) if f is None else (0, f)


@settings(max_examples=200)
@given(frontiers, frontiers, frontiers)
def test_lattice_laws(f, g, h):
    assert frontier_le(f, g) == (as_key(f) <= as_key(g))
    assert frontier_lt(f, g) == (as_key(f) < as_key(g))
    assert join(f, g) == join(g, f) and meet(f, g) == meet(g, f)
    assert join(f, join(g, h)) == join(join(f, g), h)
    assert meet(f, meet(g, h)) == meet(meet(f, g), h)
    assert join(f, meet(f, g)) == f and meet(f, join(f, g)) == f
    assert frontier_le(f, join(f, g)) and frontier_le(meet(f, g), f)
    assert join(f, g) == (g if frontier_le(f, g) else f)


@settings(max_examples=200)
@given(frontiers, times)
def test_time_relations(f, t):
    assert less_equal(f, t) == (f is not None and f <= t)
    assert less_than(f, t) == (f is not None and f < t)
    assert before(t, f) == (not less_equal(f, t))
    assert before(t, None)


@settings(max_examples=100)
@given(times, times)
def test_advance_and_steps(t, s):
    a = advance_by(t, s)
    assert a == max(t, s) and advance_by(a, s) == a
    if t < MAX_TIME:
        assert step_forward(t) == t + 1 and step_back(step_forward(t)) == t
    else:
        with pytest.raises(OverflowError, match="2\\*\\*64-1"):
            step_forward(t)
    assert step_back(t) == (t - 1 if t else None)
    assert step_back_frontier(t) == (t - 1 if t else 0)


def test_identities_and_empty():
    assert join() == 0 and meet() is None
    assert join(3, None, 5) is None and meet(3, None, 1) == 1
    assert step_back_frontier(None) is None
    assert frontier_le(MAX_TIME, None) and not frontier_le(None, MAX_TIME)


def test_check_time_and_frontier():
    assert check_time(np.uint64(MAX_TIME)) == MAX_TIME
    assert check_time(np.int32(4), "upper") == 4
    assert check_frontier(None) is None and check_frontier(7, "since") == 7
    with pytest.raises(ValueError, match=r"since must be a time in \[0, 2\*\*64-1\], got -1"):
        check_time(-1, "since")
    with pytest.raises(ValueError, match=r"upper must be a time in \[0, 2\*\*64-1\], got 18446744073709551616"):
        check_frontier(2**64, "upper")
    with pytest.raises(TypeError, match=r"since must be an integer time, got float 1.0"):
        check_time(1.0, "since")
    with pytest.raises(TypeError, match=r"t must be an integer time, got bool True"):
        check_time(True, "t")
    with pytest.raises(TypeError, match=r"upper must be an integer time, got str '3'"):
        check_frontier("3", "upper")
