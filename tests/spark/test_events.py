"""``colmz.spark.events.verify``: the store's state against the view, in one Spark action."""

from __future__ import annotations

import pytest

from colmz.spark.events import EventsSpec, verify

pytestmark = pytest.mark.spark

SPEC = EventsSpec(("k",), "v")


def _events(spark, rows):
    return spark.createDataFrame(rows, "k string, v long, valid_from long, valid_to long")


def _updates(spark, rows):
    return spark.createDataFrame(rows, "k string, v long, time long, diff long")


def test_verify_counts_rows_and_mismatches(spark):
    # The view: (a, 1) during [0, 3); (b, 2) twice during [1, 5); (NULL, 7) during [2, 4).
    events = _events(spark, [("a", 1, 0, 3), ("b", 2, 1, 5), ("b", 2, 1, 5), (None, 7, 2, 4)])
    right = _updates(spark, [("a", 1, 0, 1), ("a", 1, 3, -1), ("b", 2, 1, 2), ("b", 2, 5, -2),
                             (None, 7, 2, 1), (None, 7, 4, -1)])
    got = verify(spark, events, right, SPEC, [0, 1, 2, 3, 4, 6])
    assert got == {0: {"rows": 1, "mismatches": 0}, 1: {"rows": 3, "mismatches": 0},
                   2: {"rows": 4, "mismatches": 0}, 3: {"rows": 3, "mismatches": 0},
                   4: {"rows": 2, "mismatches": 0}, 6: {"rows": 0, "mismatches": 0}}

    # b counted once instead of twice (a differing count: two pairs), a never retracted (one
    # pair from tick 3 on, on the state's side), the NULL row missing (one pair, the view's).
    wrong = _updates(spark, [("a", 1, 0, 1), ("b", 2, 1, 1), ("b", 2, 5, -1)])
    got = verify(spark, events, wrong, SPEC, [0, 1, 2, 3, 6])
    assert got == {0: {"rows": 1, "mismatches": 0}, 1: {"rows": 3, "mismatches": 2},
                   2: {"rows": 4, "mismatches": 3}, 3: {"rows": 3, "mismatches": 4},
                   6: {"rows": 0, "mismatches": 1}}


def test_verify_counts_negative_state(spark):
    # A retraction with nothing to retract: the state holds a negative count, a pair of its own.
    events = _events(spark, [("a", 1, 0, 9)])
    updates = _updates(spark, [("a", 1, 0, 1), ("z", 0, 0, -1)])
    assert verify(spark, events, updates, SPEC, [0]) == {0: {"rows": 1, "mismatches": 1}}


def test_verify_rejects_a_tick_spark_cannot_hold(spark):
    events = _events(spark, [("a", 1, 0, 9)])
    with pytest.raises(ValueError, match="verification tick"):
        verify(spark, events, _updates(spark, []), SPEC, [2**63])
