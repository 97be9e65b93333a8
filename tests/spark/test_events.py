"""``colmz.spark.events``: the store's state against the view (one Spark action, or pyarrow in
the driver), the example log, and the event checks done in the driver."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.spark.events import (
    EventsSpec,
    check_event_values,
    check_events,
    example_events,
    example_events_table,
    verify,
    verify_local,
)
from colmz.spark.schemas import InputError

SPEC = EventsSpec(("k",), "v")
EVENTS = pa.schema([("k", pa.string()), ("v", pa.int64()), ("valid_from", pa.int64()), ("valid_to", pa.int64())])
UPDATES = pa.schema([("k", pa.string()), ("v", pa.int64()), ("time", pa.int64()), ("diff", pa.int64())])


def _table(rows, schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def _spark_verify(spark, events, updates, ticks):
    ev = spark.createDataFrame(events, "k string, v long, valid_from long, valid_to long")
    up = spark.createDataFrame(updates, "k string, v long, time long, diff long")
    return verify(spark, ev, up, SPEC, ticks)


def _local_verify(spark, events, updates, ticks):
    return verify_local(_table(events, EVENTS), _table(updates, UPDATES), SPEC, ticks)


VERIFIERS = [pytest.param(_spark_verify, marks=pytest.mark.spark, id="spark"),
             pytest.param(_local_verify, id="local")]


@pytest.fixture(params=VERIFIERS)
def check(request):
    """Each verifier, given a session only when it needs one."""
    fn = request.param
    spark = request.getfixturevalue("spark") if fn is _spark_verify else None
    return lambda events, updates, ticks: fn(spark, events, updates, ticks)


def test_verify_counts_rows_and_mismatches(check):
    # The view: (a, 1) during [0, 3); (b, 2) twice during [1, 5); (NULL, 7) during [2, 4).
    events = [("a", 1, 0, 3), ("b", 2, 1, 5), ("b", 2, 1, 5), (None, 7, 2, 4)]
    right = [("a", 1, 0, 1), ("a", 1, 3, -1), ("b", 2, 1, 2), ("b", 2, 5, -2), (None, 7, 2, 1), (None, 7, 4, -1)]
    assert check(events, right, [0, 1, 2, 3, 4, 6]) == {
        0: {"rows": 1, "mismatches": 0}, 1: {"rows": 3, "mismatches": 0}, 2: {"rows": 4, "mismatches": 0},
        3: {"rows": 3, "mismatches": 0}, 4: {"rows": 2, "mismatches": 0}, 6: {"rows": 0, "mismatches": 0}}

    # b counted once instead of twice (a differing count: two pairs), a never retracted (one
    # pair from tick 3 on, on the state's side), the NULL row missing (one pair, the view's).
    wrong = [("a", 1, 0, 1), ("b", 2, 1, 1), ("b", 2, 5, -1)]
    assert check(events, wrong, [0, 1, 2, 3, 6]) == {
        0: {"rows": 1, "mismatches": 0}, 1: {"rows": 3, "mismatches": 2}, 2: {"rows": 4, "mismatches": 3},
        3: {"rows": 3, "mismatches": 4}, 6: {"rows": 0, "mismatches": 1}}


def test_verify_counts_negative_state(check):
    # A retraction with nothing to retract: the state holds a negative count, a pair of its own.
    assert check([("a", 1, 0, 9)], [("a", 1, 0, 1), ("z", 0, 0, -1)], [0]) == {0: {"rows": 1, "mismatches": 1}}


def test_verify_rejects_a_tick_spark_cannot_hold(check):
    with pytest.raises(ValueError, match="verification tick"):
        check([("a", 1, 0, 9)], [], [2**63])


def _oracle(events, updates, ticks):
    """Counters per tick: the view's multiset and the state's, compared pair by pair."""
    out = {}
    for t in ticks:
        view = Counter((k, v) for k, v, f, u in events if f <= t < u)
        state = Counter()
        for k, v, time, d in updates:
            if time <= t:
                state[(k, v)] += d
        pairs = sum((view[r] != 0) + (state[r] != 0) for r in set(view) | set(state) if view[r] != state[r])
        out[t] = {"rows": sum(view.values()), "mismatches": pairs}
    return out


rows = st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 2))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(rows, st.integers(0, 8), st.integers(0, 8)), max_size=20),
       st.lists(st.tuples(rows, st.integers(0, 9), st.integers(-2, 2)), max_size=20),
       st.lists(st.integers(0, 10), min_size=1, max_size=4, unique=True))
def test_verify_local_matches_an_oracle(evs, ups, ticks):
    events = [(k, v, min(a, b), max(a, b)) for (k, v), a, b in evs]
    updates = [(k, v, t, d) for (k, v), t, d in ups]
    ticks = sorted(ticks)
    assert verify_local(_table(events, EVENTS), _table(updates, UPDATES), SPEC, ticks) == _oracle(events, updates, ticks)


def test_verify_local_names_cannot_clash_with_data_columns():
    # data columns named like the aggregates the evaluation makes
    spec = EventsSpec(("count_all", "_colmz_v"), "_colmz_diff_sum")
    events = pa.table({"count_all": [1, 1], "_colmz_v": [2, 2], "_colmz_diff_sum": [3, 4],
                       "valid_from": [0, 0], "valid_to": [5, 5]})
    updates = pa.table({"count_all": [1], "_colmz_v": [2], "_colmz_diff_sum": [3], "time": [0], "diff": [1]})
    assert verify_local(events, updates, spec, [0, 5]) == {0: {"rows": 2, "mismatches": 1},
                                                           5: {"rows": 0, "mismatches": 1}}


def test_example_table_is_deterministic_and_valid():
    t = example_events_table(50_000, ticks=100, seed=7)  # 50 events a tick over 100 ticks
    assert t.num_rows == 5000
    assert t.schema == pa.schema([("customer", pa.int64()), ("region", pa.string()), ("plan", pa.string()),
                                  ("valid_from", pa.int64()), ("valid_to", pa.int64())])
    assert t.equals(example_events_table(50_000, ticks=100, seed=7))
    assert not t.equals(example_events_table(50_000, ticks=100, seed=8))
    f, u = t.column("valid_from").to_numpy(), t.column("valid_to").to_numpy()
    assert f.min() == 0 and f.max() == 99 and (u > f).all() and (u - f).max() <= 550
    assert (u > 99).any() and (u <= 99).any()  # some retractions fall after the last tick, most before
    assert set(t.column("region").to_pylist()) == {"eu", "us", "ap", "sa"}
    c = t.column("customer").to_numpy()
    assert c.min() >= 0 and c.max() < 12_500 and len(np.unique(c)) > 4000
    assert check_event_values(t, EventsSpec(("customer", "region"), "plan")) == 5000
    with pytest.raises(ValueError, match="n must be a positive int"):
        example_events_table(0)
    with pytest.raises(TypeError, match="seed must be an int"):
        example_events_table(10, seed=1.5)


def test_a_longer_example_extends_the_same_log():
    """`colmz sink --ticks 1200` after a run over 1000 ticks sees the same events for the first
    1000 ticks (the log is not drawn anew for every tick count)."""
    short = example_events_table(20_000, ticks=1000, seed=0)
    longer = example_events_table(20_000, ticks=1200, seed=0)
    assert longer.num_rows == 24_000 and short.num_rows == 20_000
    assert longer.slice(0, short.num_rows).equals(short)
    assert pc.min(longer.slice(short.num_rows).column("valid_from")).as_py() == 1000


BAD_ROWS = [("a", 1, -1, 3), ("b", 1, 4, 2), ("c", 1, None, 2), ("d", 1, 0, None), ("e", 1, 2, -3), ("f", 1, 0, 1)]


def test_local_checks_report_every_problem_with_a_row():
    table = _table(BAD_ROWS, EVENTS)
    with pytest.raises(InputError) as local:
        check_event_values(table, SPEC)
    msg = str(local.value)
    for problem in ("1 row(s) with NULL valid_from", "1 row(s) with NULL valid_to", "1 row(s) with negative valid_from",
                    "1 row(s) with negative valid_to", "2 row(s) with valid_to < valid_from"):
        assert problem in msg
    example = json.loads(msg.split("NULL valid_to, e.g. ")[1].split(";")[0])
    assert example == {"k": "d", "v": 1, "valid_from": 0}  # NULL fields left out, as Spark's to_json does


@pytest.mark.spark
def test_local_checks_equal_the_spark_checks(spark):
    table = _table(BAD_ROWS, EVENTS)
    with pytest.raises(InputError) as local:
        check_event_values(table, SPEC)
    with pytest.raises(InputError) as remote:
        check_events(spark.createDataFrame(table), SPEC)
    assert str(local.value) == str(remote.value)
    good = table.slice(5)
    assert check_event_values(good, SPEC) == check_events(spark.createDataFrame(good), SPEC) == 1


@pytest.mark.spark
def test_example_events_frame_is_the_table(spark):
    t = example_events_table(300, ticks=20, seed=2)
    df = example_events(spark, 300, ticks=20, seed=2)
    assert df.toArrow().equals(t)
