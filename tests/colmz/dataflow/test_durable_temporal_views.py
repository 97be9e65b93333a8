"""Durable views with temporal filters resume from their held flips and never recompute.

A temporal filter (``colmz.dataflow.temporal``) holds the updates at the future times its
predicate flips; a durable ``colmz.Catalog`` keeps them as the view's operator state
(``colmz.dataflow.state``), committed in the record's one compare-and-set with the tables
and the views. Reopening restores them and reads no input (``Catalog.view_work``), and the
later commits write the flips at their own times exactly as a catalog never reopened does.
Checked against ``views="recompute"`` (the oracle) and an in-memory catalog never reopened,
reopening after every step of random scripts (time jumps, commits touching no input,
failed commits, DDL), under storage faults failing each call of a commit in turn, and under
SIGKILL between the parts' writes and the record's compare-and-set.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from test_durable_view_state import killed_children, recomputed
from test_temporal_views import OVER, TABLES, TEMPORAL, bag, script

from colmz.catalog.durable import VIEW_STATE, Catalog
from colmz.catalog.store import CatalogStore
from colmz.dataflow.temporal import TemporalFilter
from colmz.sql import SQLError
from colmz.storage.url import open_location

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

FIRST_ROWS = ("INSERT INTO t VALUES (1, 2, 3, 'x'), (2, 4, NULL, 'y'), (3, NULL, 1, NULL), (1, 5, 9, 'x'); "
              "INSERT INTO u VALUES (1, 'p'), (2, 'q')")


def setup(cats, bodies):
    for cat in cats:
        cat.execute(TABLES)
        cat.execute(FIRST_ROWS)
        for i, b in enumerate(bodies):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
        if bodies[0] == TEMPORAL[0]:
            for name, b in OVER:
                cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {b}")


def views(cat):
    return [n for n in cat.names if cat.object(n).kind == "materialized view"]


def held(cat, name) -> int:
    """Rows the view's temporal filter holds (its durable state)."""
    [op] = [op for op in cat.object(name).maintained.pipeline.operators if isinstance(op, TemporalFilter)]
    return len(op.held)


def reopen(url: str, n_views: int) -> Catalog:
    cat = Catalog(url)
    assert cat.view_work == {"initialized": 0, "restored": n_views, "input_rows_read": 0}
    return cat


def state_entries(url: str) -> list[dict]:
    record = CatalogStore(open_location(url)).load()
    return [d for d in record["objects"] if d.get("kind") == VIEW_STATE]


@settings(max_examples=us.examples(10), deadline=None)
@given(st.lists(st.sampled_from(TEMPORAL), min_size=1, max_size=3, unique=True),
       st.lists(script(), min_size=1, max_size=6))
def test_reopen_after_every_step_equals_the_recompute_and_a_catalog_never_reopened(bodies, scripts):
    url = f"mem://dtv-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(), Catalog(views="recompute")]
    setup(cats, bodies)
    names = views(cats[0])
    # every view is restored, the one over v0 too (a view over a temporal view is not temporal)
    cats[0] = reopen(url, len(names))
    for text, gap in scripts:
        since = cats[0].now + 1
        outcomes = []
        for cat in cats:
            try:
                cat.execute(text, time=cat.now + gap)
                outcomes.append(None)
            except (SQLError, ValueError) as e:
                outcomes.append(type(e).__name__)
        assert len(set(outcomes)) == 1, (text, outcomes)
        durable, memory, rec = cats
        assert durable.now == memory.now == rec.now
        for n in names:
            want = bag(rec.sql(f"SELECT * FROM {n}"))
            assert bag(durable.sql(f"SELECT * FROM {n}")) == want, (n, text)
            assert bag(memory.sql(f"SELECT * FROM {n}")) == want, (n, text)
            # the flips written since the reopen: at their own times, as the catalog never reopened wrote them
            if since <= durable.now:
                assert durable.changes(n, since, durable.now + 1).to_pylist() == \
                    memory.changes(n, since, memory.now + 1).to_pylist(), (n, text)
        for i, body in enumerate(bodies):
            for at in range(min(since, durable.now), durable.now + 1):
                assert bag(durable.sql(f"SELECT * FROM v{i}", as_of=at)) == bag(durable.sql(body, as_of=at)), \
                    (body, at, text)
        cats[0] = reopen(url, len(names))


@pytest.mark.slow
@settings(max_examples=us.examples(60), deadline=None)
@given(st.lists(st.sampled_from(TEMPORAL), min_size=1, max_size=5, unique=True),
       st.lists(script(), min_size=1, max_size=12))
def test_reopen_after_every_step_equals_the_recompute_long(bodies, scripts):
    test_reopen_after_every_step_equals_the_recompute_and_a_catalog_never_reopened.hypothesis.inner_test(
        bodies, scripts)


def test_held_flips_commit_with_the_view_and_are_restored_reading_no_input():
    url = f"mem://dtv-{uuid.uuid4().hex}"
    body = "SELECT k, a FROM t WHERE mz_now() >= a AND mz_now() < a + 3"
    cat, memory = Catalog(url), Catalog()
    setup([cat, memory], [body])
    cat.execute("INSERT INTO t VALUES (7, 20, 0, 'z'), (8, 40, 0, NULL)")
    memory.execute("INSERT INTO t VALUES (7, 20, 0, 'z'), (8, 40, 0, NULL)")
    [entry] = [d for d in state_entries(url) if d["view"] == cat.identity("v0")]
    assert entry["state"] == "0.held"
    store = CatalogStore(open_location(url))
    store.load()
    dur = store.arrangement(entry["key"])
    assert dur.upper == store.arrangement(cat.identity("v0")).upper  # committed with the view
    # the durable state is the flips still to come (time, k, a, diff), as the filter holds them
    got = sorted((*r[:3], r[-1]) for r in dur.snapshot(dur.upper - 1).to_pylist())
    [op] = [op for op in memory.object("v0").maintained.pipeline.operators if isinstance(op, TemporalFilter)]
    assert got == sorted((*r[:3], r[-1]) for r in op.held.snapshot().to_pylist())
    assert {(20, 7, 20, 1), (23, 7, 20, -1), (40, 8, 40, 1), (43, 8, 40, -1)} <= set(got)  # rows 7, 8 enter later
    assert held(cat, "v0") == len(got)
    again = reopen(url, 2)
    assert held(again, "v0") == len(got)
    for _ in range(3):  # no input changed, the flips come due: written at their own times
        again.execute("INSERT INTO u VALUES (5, 'p')", time=again.now + 15)
        memory.execute("INSERT INTO u VALUES (5, 'p')", time=memory.now + 15)
        assert again.changes("v0", 2, again.now + 1).to_pylist() == memory.changes("v0", 2, memory.now + 1).to_pylist()
        again = reopen(url, 2)
    assert bag(again.sql("SELECT * FROM v0")) == bag(again.sql(body)) == Counter()
    assert held(again, "v0") == 0


# ----------------------------------------------------------------------------- faults

FAULT_VIEWS = [TEMPORAL[0], TEMPORAL[3]]
FAULT_TXN = "INSERT INTO t VALUES (2, 12, 3, 'q'), (9, 11, 1, 'a'); DELETE FROM t WHERE k = 1; INSERT INTO u VALUES (9, 'z')"


def _faulty(url):
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location

    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


def _snapshot(cat):
    return {n: bag(cat.sql(f"SELECT * FROM {n}")) for n in views(cat)}


def test_a_commit_with_temporal_views_failing_at_any_storage_call_is_all_or_nothing():
    from colmz.storage.base import Determinate, Indeterminate

    before, after = Catalog(), Catalog()
    setup([before, after], FAULT_VIEWS)
    after.execute(FAULT_TXN, time=10)
    # the commit jumps to 10: flips due at 5..10 are written with it
    models = (before, after)
    cat, plan = _faulty(f"mem://dtv-{uuid.uuid4().hex}")
    cat = Catalog(cat)
    setup([cat], FAULT_VIEWS)
    start = plan.calls
    cat.execute(FAULT_TXN, time=10)
    n_calls = plan.calls - start
    assert n_calls > 8
    outcomes = set()
    for n in range(1, n_calls + 1):
        url = f"mem://dtv-{uuid.uuid4().hex}"
        loc, plan = _faulty(url)
        cat = Catalog(loc)
        setup([cat], FAULT_VIEWS)
        plan.fail_at, plan.mode = plan.calls + n, "before" if n % 2 else "after"
        raised = None
        try:
            cat.execute(FAULT_TXN, time=10)
        except (Determinate, Indeterminate) as e:
            raised = e
        if isinstance(raised, Determinate):
            assert _snapshot(cat) == _snapshot(before), n  # the handle unchanged by the failed call
        again = reopen(url, len(views(before)))  # a crash: reopen from the store alone, restored
        landed = again.now == 10
        assert again.now == (10 if landed else before.now), n
        model = models[landed]
        assert _snapshot(again) == _snapshot(model), n
        outcomes.add(landed)
        # the restored filters step on, their held flips coming due as a catalog's never reopened
        again.execute("INSERT INTO u VALUES (3, 'w')", time=25)
        rec = Catalog()
        setup([rec], FAULT_VIEWS)
        if landed:
            rec.execute(FAULT_TXN, time=10)
        rec.execute("INSERT INTO u VALUES (3, 'w')", time=25)
        assert _snapshot(again) == _snapshot(rec), n
        assert again.changes("v0", 2, 26).to_pylist() == rec.changes("v0", 2, 26).to_pylist(), n
    assert outcomes == {True, False}


# ----------------------------------------------------------------------------- SIGKILL

QUERIES = {
    "w": "SELECT k, v FROM t WHERE mz_now() >= v AND mz_now() < v + 4",
    "j": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k WHERE mz_now() <= t.v + 2",
    "e": "SELECT k FROM t WHERE mz_now() = v + 1",
}

_WRITES = """
while True:
    k = rng.randrange(8)
    at = cat.now + rng.randrange(1, 4)  # time jumps: flips come due between commits
    v = at + rng.randrange(-2, 6)
    r = rng.random()
    if r < 0.2:
        cat.execute(f"DELETE FROM t WHERE k = {k}", time=at)
    elif r < 0.35:
        cat.execute(f"INSERT INTO u VALUES ({k}, {rng.randrange(100)})", time=at)
    elif r < 0.5:
        cat.execute("DELETE FROM u WHERE k = 99", time=at)  # no input changed: only flips
    else:
        cat.execute(f"INSERT INTO t VALUES ({k}, {v}), ({k + 1}, {v + 1})", time=at)
"""


def _contents(cat, name) -> Counter:
    return recomputed(cat, f"SELECT * FROM {name}")


def _sigkill_campaign(tmp_path, kills):
    for i, cat in killed_children(tmp_path, QUERIES, _WRITES, kills):
        # every view equals its query recomputed over the tables at now: nothing lost,
        # doubled or half, no flip missed
        for name, query in QUERIES.items():
            assert _contents(cat, name) == recomputed(cat, query), (i, name)
        assert cat.view_work == {"initialized": 0, "restored": len(QUERIES), "input_rows_read": 0}
        for gap in (1, 3, 5):  # the restored filters step on: flips come due at their times
            cat.execute("INSERT INTO u VALUES (1, 1000)", time=cat.now + gap)
            for name, query in QUERIES.items():
                assert _contents(cat, name) == recomputed(cat, query), (i, name, gap)


def test_sigkill_before_the_record_commit_leaves_temporal_views_and_held_flips_whole(tmp_path):
    _sigkill_campaign(tmp_path, 2)


@pytest.mark.slow
def test_sigkill_before_the_record_commit_leaves_temporal_views_and_held_flips_whole_long(tmp_path):
    _sigkill_campaign(tmp_path, 12)


def test_a_reopened_view_without_held_state_is_rebuilt(monkeypatch):
    """A store written without the filter's state (before it was kept): the view is rebuilt
    from its inputs once, then its state written and restored from then on."""
    url = f"mem://dtv-{uuid.uuid4().hex}"
    body = TEMPORAL[1]
    cat, rec = Catalog(url), Catalog(views="recompute")
    with monkeypatch.context() as m:
        m.setattr(Catalog, "_state_moves", lambda self, engine, store, mirror, defs, lazy, only=None: ([], [], {}))
        setup([cat, rec], [body])
        assert state_entries(url) == []
    again = Catalog(url)
    assert again.view_work["initialized"] == 1 and again.view_work["restored"] == 0
    assert len(state_entries(url)) == 1
    for c in (again, rec):
        with contextlib.suppress(SQLError):
            c.execute("INSERT INTO t VALUES (4, 1, 9, 'z')", time=c.now + 2)
    assert bag(again.sql("SELECT * FROM v0")) == bag(rec.sql("SELECT * FROM v0"))
    third = reopen(url, 1)
    for c in (third, rec):
        c.execute("DELETE FROM u WHERE k = 99", time=c.now + 9)
    assert bag(third.sql("SELECT * FROM v0")) == bag(rec.sql("SELECT * FROM v0"))
