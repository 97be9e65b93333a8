"""Durable views resume from their operators' durable state and never recompute.

A durable ``colmz.Catalog`` keeps each maintained view's operator state
(``colmz.dataflow.state``) as hidden arrangements committed in the catalog record's one
compare-and-set with the tables and views. Reopening restores the operators from them and
reads no input (``Catalog.view_work`` counts); a view with a Fallback, or whose state is
missing or behind the view, is rebuilt from its inputs. Checked against ``views="recompute"``
(the oracle) after reopening at every step of random scripts, under storage faults failing
each call of a commit in turn, and under SIGKILL between the parts' writes and the record's
compare-and-set.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from test_maintained import POOLS, contents, insert, script, setup, views_of

import colmz
from colmz.catalog.durable import SHARED_STATE, VIEW_STATE, Catalog
from colmz.catalog.store import CatalogStore
from colmz.dataflow.state import operator_states
from colmz.storage.url import open_location

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

#: View bodies whose operators all keep durable state (sum, global aggregate, join, min/max,
#: both reduce types, distinct, top-k, outer joins, a SQL segment, EXCEPT), and one Fallback.
RESUMABLE = [
    "SELECT k, sum(v) AS s, count(*) AS c, avg(v) AS a FROM t GROUP BY k",
    "SELECT count(*) AS n, sum(v) AS s, count(s) AS c FROM t",
    "SELECT t.k, t.s, u.w FROM t JOIN u ON t.k = u.k",
    "SELECT s, min(v) AS lo, max(k) AS hi FROM t GROUP BY s",
    "SELECT max(v) AS hi, k, sum(v) AS s, count(*) AS n FROM t GROUP BY k HAVING min(v) < 7",
    "SELECT DISTINCT k, s FROM t",
    "SELECT k, v, s FROM t ORDER BY v DESC, k LIMIT 3",
    "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k",
    "SELECT t.k AS tk, t.v, t.s, u.k AS uk, u.w FROM t FULL JOIN u ON t.k = u.k",
    "SELECT k + 1 AS j, upper(s) AS us FROM t WHERE v > 1 OR k = 2",
    "SELECT k FROM t EXCEPT SELECT k FROM r",
    "SELECT k, bool_and(b) AS a, bool_or(b) AS o FROM r GROUP BY k",
]
FALLBACK = "SELECT k, grouping(k) + 1 AS n FROM t GROUP BY ROLLUP (k)"


def resumable(cat: Catalog, name) -> bool:
    mv = cat.object(name).maintained
    return mv is not None and mv.pipeline is not None and operator_states(mv.pipeline) is not None


def state_entries(url: str) -> list[dict]:
    record = CatalogStore(open_location(url)).load()
    return [d for d in record["objects"] if d.get("kind") == VIEW_STATE]


def shared_entries(url: str) -> list[dict]:
    record = CatalogStore(open_location(url)).load()
    return [d for d in record["objects"] if d.get("kind") == SHARED_STATE]


def check_reopened(url: str, rec: Catalog, text: str = "", rebuilt: bool = False) -> Catalog:
    """Reopen ``url``: every view equals the recompute's, and the work counter says which
    views were restored (reading no input) and which rebuilt (all of them: ``rebuilt``)."""
    cat = Catalog(url)
    assert cat.now == rec.now
    assert views_of(cat) == views_of(rec)
    for n in views_of(cat):
        assert contents(cat, n) == contents(rec, n), f"view {n} after {text!r}"
    views = views_of(cat)
    restorable = [n for n in views if resumable(cat, n) and not rebuilt]
    work = cat.view_work
    assert work["restored"] == len(restorable), (text, work)
    assert work["initialized"] == len(views) - len(restorable), (text, work)
    if len(restorable) == len(views):
        assert work["input_rows_read"] == 0
    return cat


def run(cats, text):
    for cat in cats:
        with contextlib.suppress(colmz.sql.SQLError, ValueError, KeyError):
            cat.execute(text)


# ----------------------------------------------------------------------------- reopen


@settings(max_examples=us.examples(8), deadline=None)
@given(st.lists(st.sampled_from(RESUMABLE), min_size=1, max_size=4, unique=True),
       st.lists(script(), min_size=1, max_size=5))
def test_reopen_after_every_step_restores_and_equals_the_recompute(bodies, scripts):
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(views="recompute")]
    setup(cats, bodies)
    cats[0] = check_reopened(url, cats[1])
    for text in scripts:
        run(cats, text)
        cats[0] = check_reopened(url, cats[1], text)


@pytest.mark.slow
@settings(max_examples=us.examples(40), deadline=None)
@given(st.lists(st.sampled_from([*RESUMABLE, FALLBACK]), min_size=1, max_size=8, unique=True),
       st.lists(script(), min_size=1, max_size=12))
def test_reopen_after_every_step_restores_and_equals_the_recompute_long(bodies, scripts):
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(views="recompute")]
    setup(cats, bodies)
    for text in scripts:
        run(cats, text)
        cats[0] = check_reopened(url, cats[1], text)


def test_every_resumable_body_restores_reading_no_input():
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(views="recompute")]
    setup(cats, RESUMABLE)
    assert Catalog(url).view_work == {"initialized": 0, "restored": len(RESUMABLE), "input_rows_read": 0}
    run(cats, "DELETE FROM t WHERE k = 1; " + insert("t", POOLS["t"][4:]) + "; " + insert("r", POOLS["r"][4:]))
    cat = check_reopened(url, cats[1])
    assert cat.view_work["input_rows_read"] == 0
    run([cat, cats[1]], "UPDATE t SET v = v + 1 WHERE k = 2; DELETE FROM u WHERE w IS NULL")
    check_reopened(url, cats[1])


def test_a_view_with_a_fallback_is_rebuilt_and_counted():
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(views="recompute")]
    setup(cats, [RESUMABLE[0], FALLBACK])
    run(cats, insert("t", POOLS["t"][4:]))
    cat = check_reopened(url, cats[1])
    assert cat.view_work["restored"] == 1 and cat.view_work["initialized"] == 1
    assert cat.view_work["input_rows_read"] == len(cat.read("t"))  # the fallback's input, read whole
    assert {d["view"] for d in state_entries(url)} == {cat.identity("v0")}


def test_states_commit_with_the_view_and_drop_with_it():
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cat = Catalog(url)
    setup([cat], [RESUMABLE[0], RESUMABLE[2]])
    entries = state_entries(url)
    # the sum's accumulators; the join's two inputs arranged by k are the catalog's shared
    # arrangements (colmz.dataflow.shared): state objects of their own, not the view's
    assert Counter(d["view"] for d in entries) == {cat.identity("v0"): 1}
    shared = shared_entries(url)
    assert sorted(d["id"] for d in shared) == ['["t", ["k"]]', '["u", ["k"]]']
    store = CatalogStore(open_location(url))
    store.load()
    view_upper = store.arrangement(cat.identity("v1")).upper
    assert all(store.arrangement(d["key"]).upper == view_upper for d in entries + shared)
    cat.execute("DROP MATERIALIZED VIEW v1")
    assert {d["view"] for d in state_entries(url)} == {cat.identity("v0")}
    assert shared_entries(url) == []
    again = Catalog(url)
    assert again.view_work == {"initialized": 0, "restored": 1, "input_rows_read": 0}


def test_a_state_missing_or_behind_the_view_falls_back_to_rebuilding(monkeypatch):
    url = f"mem://dvs-{uuid.uuid4().hex}"
    cats = [Catalog(url), Catalog(views="recompute")]
    # a store written by a colmz without durable state: no state objects at all
    with monkeypatch.context() as m:
        m.setattr(Catalog, "_state_moves", lambda self, engine, store, mirror, defs, lazy, only=None: ([], [], {}))
        setup(cats, [RESUMABLE[0], RESUMABLE[5]])  # both with state of their own (not shared)
        run(cats, insert("t", POOLS["t"][4:]))
        assert state_entries(url) == []
    cat = check_reopened(url, cats[1], rebuilt=True)  # rebuilt (counted), then its states written
    assert cat.view_work == {"initialized": 2, "restored": 0, "input_rows_read": 2 * len(cat.read("t"))}
    assert len(state_entries(url)) == 2
    check_reopened(url, cats[1])  # now restored
    # a state whose upper lags the view's: the record names it, its changes were not written,
    # and the record has no catalog-wide upper (format 3: each arrangement at its own). With
    # that upper a lagging state is logically at it (colmz.catalog.store, "Lazy uppers").
    cat = Catalog(url)
    real_commit = CatalogStore.commit
    with monkeypatch.context() as m:
        m.setattr(Catalog, "_state_moves",
                  lambda self, engine, store, mirror, defs, lazy, only=None: (mirror.state_defs, [], mirror.states))
        m.setattr(CatalogStore, "commit", lambda self, objects, moves, upper=None: real_commit(self, objects, moves))
        run([cat, cats[1]], "DELETE FROM t WHERE k = 2")
    again = check_reopened(url, cats[1], rebuilt=True)
    assert again.view_work["restored"] == 0 and again.view_work["initialized"] == 2
    check_reopened(url, cats[1])


# ----------------------------------------------------------------------------- faults


def _faulty(url):
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location

    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


FAULT_VIEWS = [RESUMABLE[0], RESUMABLE[2], RESUMABLE[3]]
FAULT_TXN = "INSERT INTO t VALUES (2, 5, 'q'), (9, 1, 'a'); DELETE FROM t WHERE k = 1; INSERT INTO u VALUES (9, 'z')"


def _fault_setup(url):
    loc, plan = _faulty(url)
    cat = Catalog(loc)
    setup([cat], FAULT_VIEWS)
    return cat, plan


def _snapshot(cat):
    return {n: contents(cat, n) for n in views_of(cat)}


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_commit_with_views_failing_at_any_storage_call_is_all_or_nothing(mode):
    from colmz.storage.base import Determinate, Indeterminate

    before, after = Catalog(views="recompute"), Catalog(views="recompute")
    setup([before, after], FAULT_VIEWS)
    after.execute(FAULT_TXN)
    models = (_snapshot(before), _snapshot(after))
    cat, plan = _fault_setup(f"mem://dvs-{uuid.uuid4().hex}")
    start = plan.calls
    cat.execute(FAULT_TXN)
    n_calls = plan.calls - start
    assert n_calls > 8
    outcomes = set()
    for n in range(1, n_calls + 1):
        url = f"mem://dvs-{uuid.uuid4().hex}"
        cat, plan = _fault_setup(url)
        plan.fail_at, plan.mode = plan.calls + n, mode
        raised = None
        try:
            cat.execute(FAULT_TXN)
        except (Determinate, Indeterminate) as e:
            raised = e
        if isinstance(raised, Determinate):
            assert _snapshot(cat) == models[0], n  # the handle unchanged by the failed call
        again = Catalog(url)  # a crash: reopen from the store alone
        state = _snapshot(again)
        assert state in models, n
        outcomes.add(state == models[1])
        assert again.view_work["restored"] == len(FAULT_VIEWS) and again.view_work["input_rows_read"] == 0, n
        # the reopened catalog works on, its restored operators equal to the recompute
        rec = Catalog(views="recompute")
        setup([rec], FAULT_VIEWS)
        if state == models[1]:
            rec.execute(FAULT_TXN)
        run([again, rec], "INSERT INTO t VALUES (9, 7, 'b'); DELETE FROM u WHERE k = 1")
        assert _snapshot(again) == _snapshot(rec), n
    assert outcomes == {True, False}


# ----------------------------------------------------------------------------- SIGKILL

QUERIES = {
    "s": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "j": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    "m": "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    "d": "SELECT DISTINCT k FROM t",
    "o": "SELECT t.k, t.v, u.w FROM t LEFT JOIN u ON t.k = u.k",
}

#: A child that builds ``QUERIES``'s views (defined before it) in the catalog at argv[1] and
#: dies by SIGKILL at the argv[3]-th record commit of its writes, every part of the commit
#: (tables', views', operator states') written; its writes loop (``rng`` seeded by argv[2])
#: follows it.
KILLED_CHILD = """
import os, random, signal, sys
import colmz
from colmz.storage.state import StateLog

path, seed, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cat = colmz.Catalog(path, maintain_every=3)
commit, calls = StateLog.commit, [0, False]


def commit_or_die(self, expected, state):
    calls[0] += 1
    if calls[1] and calls[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return commit(self, expected, state)


StateLog.commit = commit_or_die
if "t" not in cat:
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)")
for name, query in QUERIES.items():  # a kill may have come between two CREATEs
    if name not in cat:
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
calls[:] = [0, True]  # the kill comes among the writes' commits (a CREATE's: the catalog tests')
rng = random.Random(seed)
"""

_WRITES = """
while True:
    k = rng.randrange(8)
    if rng.random() < 0.3:
        cat.execute(f"DELETE FROM t WHERE k = {k}")
    elif rng.random() < 0.2:
        cat.execute(f"INSERT INTO u VALUES ({k}, {rng.randrange(100)})")
    else:
        cat.execute(f"INSERT INTO t VALUES ({k}, {rng.randrange(100)}), ({k + 1}, {rng.randrange(100)})")
"""


def recomputed(cat, query) -> Counter:
    """The multiset of ``query``'s rows as the catalog recomputes it."""
    return Counter(tuple(r.values()) for r in cat.sql(query).to_pylist())


def killed_children(tmp_path, queries, writes, kills):
    """Runs :data:`KILLED_CHILD` with ``writes`` ``kills`` times on one store, each killed at a
    random record commit; yields ``(i, the store reopened)`` after each kill."""
    import random
    import signal
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(f"QUERIES = {queries!r}\n" + KILLED_CHILD + writes)
    store = tmp_path / "store"
    rng = random.Random(39)
    for i in range(kills):
        kill_at = rng.randrange(1, 16)
        child = subprocess.run([sys.executable, str(script), str(store), str(i), str(kill_at)],
                               capture_output=True, text=True, timeout=300)
        assert child.returncode == -signal.SIGKILL, child.stderr
        yield i, Catalog(store)


def _sigkill_campaign(tmp_path, kills):
    for i, cat in killed_children(tmp_path, QUERIES, _WRITES, kills):
        views = list(QUERIES)
        # every view equals its query recomputed over the tables: nothing lost, doubled or half
        for name in views:
            assert contents(cat, name) == recomputed(cat, QUERIES[name]), (i, name)
        assert cat.view_work == {"initialized": 0, "restored": len(views), "input_rows_read": 0}
        cat.execute("INSERT INTO t VALUES (1, 1000)")  # the restored operators step on
        for name in views:
            assert contents(cat, name) == recomputed(cat, QUERIES[name]), (i, name)


def test_sigkill_before_the_record_commit_leaves_views_and_states_whole(tmp_path):
    _sigkill_campaign(tmp_path, 2)


@pytest.mark.slow
def test_sigkill_before_the_record_commit_leaves_views_and_states_whole_long(tmp_path):
    _sigkill_campaign(tmp_path, 12)
