"""Frontiers over totally ordered ``uint64`` time.

Design
------
Every colmz structure runs on Materialize's ``Timestamp``: a ``u64`` that is totally ordered.
For a total order an antichain holds at most one element, so a frontier is either ``{t}`` or
``{}``. colmz spells them as a Python ``int`` ``t`` (``0 <= t <= 2**64 - 1``) and ``None``.

``None`` -- the empty antichain -- is the *top* of the frontier order: an upper of ``None``
says the collection is sealed for good, a since of ``None`` says nothing may be read any more.
It is never encoded as ``2**64 - 1``: ``{2**64 - 1}`` is a legal, different frontier under which
time ``MAX`` can still occur.

Arithmetic on times happens on Python ``int``; nothing here wraps.

Operations (meaning for ``u64``)
--------------------------------
=========================  =====================================================
``less_equal(f, t)``       ``t`` is beyond ``f``: ``f is not None and f <= t``
``less_than(f, t)``        ``f is not None and f < t``
``frontier_le(f, g)``      frontier order: ``g is None or (f is not None and f <= g)``
``frontier_lt(f, g)``      ``frontier_le(f, g) and f != g``
``before(t, upper)``       ``t`` is not yet sealed: ``upper is None or t < upper``
``join(*fs)``              least upper bound: ``max``, ``None`` absorbing
``meet(*fs)``              greatest lower bound: ``min``, ``None`` neutral
``step_forward(t)``        ``t + 1``; ``OverflowError`` at ``MAX``
``step_back(t)``           ``t - 1`` or ``None`` at 0
``step_back_frontier(f)``  saturating: ``{0} -> {0}``, ``{} -> {}``
=========================  =====================================================
"""

from __future__ import annotations

import operator
from typing import TypeAlias

__all__ = [
    "MAX_TIME",
    "Frontier",
    "advance_by",
    "before",
    "check_frontier",
    "check_time",
    "frontier_le",
    "frontier_lt",
    "join",
    "less_equal",
    "less_than",
    "meet",
    "step_back",
    "step_back_frontier",
    "step_forward",
]

#: The largest time, ``2**64 - 1``.
MAX_TIME: int = 2**64 - 1

#: A frontier: an ``int`` time (the antichain ``{t}``) or ``None`` (the empty antichain).
Frontier: TypeAlias = int | None


def check_time(value: object, name: str = "time") -> int:
    """Return ``value`` as an ``int`` time, or raise naming ``name``.

    >>> check_time(5)
    5
    >>> check_time(-1, "since")
    Traceback (most recent call last):
    ...
    ValueError: since must be a time in [0, 2**64-1], got -1
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer time, got bool {value!r}")
    try:
        t = operator.index(value)  # accepts int and numpy integers, rejects floats
    except TypeError:
        raise TypeError(
            f"{name} must be an integer time, got {type(value).__name__} {value!r}"
        ) from None
    if not 0 <= t <= MAX_TIME:
        raise ValueError(f"{name} must be a time in [0, 2**64-1], got {t}")
    return t


def check_frontier(value: object, name: str = "frontier") -> Frontier:
    """Return ``value`` as a frontier (``int`` or ``None``), or raise naming ``name``.

    >>> check_frontier(None) is None
    True
    >>> check_frontier(3, "upper")
    3
    """
    if value is None:
        return None
    return check_time(value, name)


def less_equal(f: Frontier, t: int) -> bool:
    """Whether time ``t`` is beyond frontier ``f`` (``f <= t``).

    >>> less_equal(3, 3), less_equal(None, 3)
    (True, False)
    """
    return f is not None and f <= t


def less_than(f: Frontier, t: int) -> bool:
    """Whether ``f < t``; the empty frontier is less than no time.

    >>> less_than(2, 3), less_than(3, 3)
    (True, False)
    """
    return f is not None and f < t


def frontier_le(f: Frontier, g: Frontier) -> bool:
    """Frontier order: ``f <= g``, where ``None`` is the top.

    >>> frontier_le(3, None), frontier_le(None, 3), frontier_le(None, None)
    (True, False, True)
    """
    return g is None or (f is not None and f <= g)


def frontier_lt(f: Frontier, g: Frontier) -> bool:
    """Strict frontier order.

    >>> frontier_lt(3, None), frontier_lt(3, 3)
    (True, False)
    """
    return frontier_le(f, g) and f != g


def before(t: int, upper: Frontier) -> bool:
    """Whether time ``t`` lies before ``upper`` (is not yet sealed by it).

    >>> before(5, 6), before(6, 6), before(2**64 - 1, None)
    (True, False, True)
    """
    return upper is None or t < upper


def join(*frontiers: Frontier) -> Frontier:
    """Least upper bound of frontiers: the ``max``; ``None`` absorbs.

    >>> join(3, 7), join(3, None)
    (7, None)
    """
    out: Frontier = 0
    for f in frontiers:
        if f is None:
            return None
        out = max(out, f)
    return out


def meet(*frontiers: Frontier) -> Frontier:
    """Greatest lower bound of frontiers: the ``min``; ``None`` is neutral.

    >>> meet(3, 7), meet(None, 7), meet(None) is None
    (3, 7, True)
    """
    out: Frontier = None
    for f in frontiers:
        if f is not None and (out is None or f < out):
            out = f
    return out


def advance_by(t: int, since: int) -> int:
    """Advance time ``t`` by the since ``{since}``: ``max(t, since)``.

    The empty since has no time to advance to; each structure states what it does then.

    >>> advance_by(3, 5), advance_by(9, 5)
    (5, 9)
    """
    return t if t >= since else since


def step_forward(t: int) -> int:
    """``t + 1``, raising ``OverflowError`` at ``2**64 - 1``.

    >>> step_forward(4)
    5
    """
    if t >= MAX_TIME:
        raise OverflowError(f"cannot step time {t} forward: it is the largest time 2**64-1")
    return t + 1


def step_back(t: int) -> int | None:
    """``t - 1``, or ``None`` at 0.

    >>> step_back(4), step_back(0)
    (3, None)
    """
    return t - 1 if t > 0 else None


def step_back_frontier(f: Frontier) -> Frontier:
    """Step a frontier back, saturating: ``{0} -> {0}`` and ``{} -> {}``.

    >>> step_back_frontier(10), step_back_frontier(0), step_back_frontier(None)
    (9, 0, None)
    """
    if f is None:
        return None
    return f - 1 if f > 0 else 0
