"""Stage against the list of batches pushed: it holds them unsorted and uncopied, counts their
updates, hands them back as one run, and restores a saved state."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.rollback import roll_back, save
from colmz.stage import Stage


def _batch(keys, times) -> colmz.Updates:
    return colmz.Updates({"k": keys}, time=times, diff=np.ones(len(times), np.int64))


def test_one_part_is_handed_back_as_it_was_pushed():
    s = Stage()
    assert len(s) == 0 and s.peek() is None and s.take() is None and s.nbytes == 0
    enc = _batch([3, 1], [5, 2]).encode()
    s.push(enc)
    assert s.peek() is enc and len(s) == 2 and s.nbytes == enc.nbytes
    assert s.take() is enc and len(s) == 0 and s.parts == []


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.integers(-5, 5), st.text(max_size=3)), st.integers(0, 9)),
                         min_size=1, max_size=5), max_size=6),
       st.booleans())
def test_peek_is_the_pushed_batches_in_push_order(batches, strings):
    s = Stage()
    rows = []
    for b in batches:
        # int keys, or strings of varying widths: parts whose layouts differ are padded
        keys = [str(k) if strings else (k if isinstance(k, int) else len(k)) for k, _ in b]
        u = _batch(keys, [t for _, t in b])
        s.push(u.encode())
        rows += u.to_pylist()
    assert len(s) == len(rows) == sum(len(p) for p in s.parts)
    run = s.peek()
    if not rows:
        assert run is None
        return
    schema = _batch(["x"] if strings else [0], [0]).schema
    assert colmz.Updates.decode(run, schema).to_pylist() == rows
    assert len(s) == len(rows)  # peek empties nothing


def test_roll_back_to_a_saved_state():
    s = Stage()
    a, b = _batch([1], [0]).encode(), _batch([2, 3], [1, 1]).encode()
    s.push(a)
    state = save(s)
    s.push(b)
    s.clear()
    roll_back(s, state)
    assert s.parts == [a] and len(s) == 1
    s.push(b)
    roll_back(s, state)  # a saved state can be rolled back to again
    assert s.parts == [a] and len(s) == 1
