"""Naive multiset models of the ``colmz.dataflow`` operators, and random change sequences.

Shared by ``tests/colmz/dataflow/`` (import it as ``dataflow_model``: ``tests/`` is on
``sys.path``). A model integrates each input as a ``Counter`` of canonical rows (NULL =
``None``, NaN = ``updates_strategies.NAN``, -0.0 = 0.0), recomputes the operator on the
integrated inputs in plain Python, and diffs consecutive results: the operator's step must
equal that difference exactly.
"""

from __future__ import annotations

from collections import Counter

import updates_strategies as us
from hypothesis import strategies as st

import colmz

NAN = us.NAN


def counter_of(u: colmz.Updates) -> Counter:
    acc: Counter = Counter()
    for row, d in zip(us.canon_rows(u), u.diff.tolist()):
        acc[row] += d
    return Counter({k: v for k, v in acc.items() if v})


def diff_of(old: Counter, new: Counter) -> dict[tuple, int]:
    out = {}
    for k in set(old) | set(new):
        d = new.get(k, 0) - old.get(k, 0)
        if d:
            out[k] = d
    return out


def as_delta(u: colmz.Updates, time: int) -> dict[tuple, int]:
    """A step's output as ``{row: diff}``; checks it is consolidated and all at ``time``."""
    got = us.as_dict(u)
    assert all(t == time for _, t in got), f"output not all at time {time}: {got}"
    return {row: d for (row, _), d in got.items()}


def batch(schema: dict, rows: list[tuple], diffs: list[int], time: int) -> colmz.Updates:
    names = list(schema)
    cols = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    return colmz.Updates(cols, time=[time] * len(rows), diff=diffs, schema=schema)


@st.composite
def change_steps(draw, pool: list[tuple], max_steps: int = 6, max_rows: int = 6, valid: bool = True):
    """Steps of ``[(row, diff)]`` over rows from ``pool``: inserts, duplicates, deletes
    (retractions to zero included), empty steps. With ``valid`` no row's count goes below 0."""
    steps = []
    held: Counter = Counter()
    for _ in range(draw(st.integers(1, max_steps))):
        changes = draw(st.lists(st.tuples(st.integers(0, len(pool) - 1), st.integers(-3, 3)), max_size=max_rows))
        step = []
        for i, d in changes:
            row = pool[i]
            if valid and held[row] + d < 0:
                d = -held[row]  # retract to zero instead
            if d:
                step.append((row, d))
                held[row] += d
        steps.append(step)
    return steps
