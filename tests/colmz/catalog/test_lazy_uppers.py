"""A durable catalog's commit moves only the arrangements of what it changes: the others
lag, logically at the record's catalog-wide upper (``colmz.catalog.store``, "Lazy uppers").
Work counters say a commit's store work does not grow with untouched views; faults at every
storage call, SIGKILL and a reopen after every step say nothing is lost or doubled and every
view equals its query over the reopened tables."""

from __future__ import annotations

import contextlib
import random
import uuid

import pytest
from child_kills import kill_when_ready
from hypothesis import example, given, settings
from hypothesis import strategies as st

import colmz
from colmz.catalog.store import CatalogStore
from colmz.storage.base import Determinate, Indeterminate
from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
from colmz.storage.url import Location, open_location

VIEWS = {
    "vs": "SELECT k, sum(v) AS s, count(*) AS c FROM s GROUP BY k",
    "vm": "SELECT k, min(v) AS m FROM s GROUP BY k",  # a shared arrangement of s by k
    "vx": "SELECT k, max(v) AS m FROM s GROUP BY k",  # the same one
    "vj": "SELECT s.k, s.v, u.w FROM s JOIN u ON s.k = u.k",
}


def rows(cat, query: str) -> list:
    return sorted(tuple(r.values()) for r in cat.sql(query).to_pylist())


def check_views(cat) -> None:
    """Every view holds its query over the tables as they are."""
    for name, query in VIEWS.items():
        if name in cat:
            assert rows(cat, f"SELECT * FROM {name}") == rows(cat, query), name


def faulty(url: str):
    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


def setup(cat) -> None:
    cat.execute("CREATE TABLE t (k BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)")
    cat.execute("INSERT INTO s VALUES (1, 10), (1, 11), (2, 20); INSERT INTO u VALUES (1, 100), (2, 200)")
    for name, query in VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    for i in range(3):  # the views' arrangements and states lag from here on
        cat.execute(f"INSERT INTO t VALUES ({i})")


# ----------------------------------------------------------------------------- work


def _commit_work(n: int) -> tuple[dict, int]:
    """Store work and storage calls of one one-row INSERT into a table no view reads, in a
    catalog with ``n`` views over other tables."""
    loc, plan = faulty(f"mem://lazy-{uuid.uuid4().hex}")
    cat = colmz.Catalog(loc, maintain_every=0)
    cat.execute("CREATE TABLE t (k BIGINT)")
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i})")
        cat.execute(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k")
    cat.execute("INSERT INTO t VALUES (0)")
    before, calls = cat.store_work, plan.calls
    cat.execute("INSERT INTO t VALUES (1)")
    after = cat.store_work
    return {k: after[k] - before[k] for k in after}, plan.calls - calls


def test_a_commit_moves_only_what_it_changes_however_many_views():
    one, calls_one = _commit_work(1)
    many, calls_many = _commit_work(30)
    assert one["commits"] == many["commits"] == 1
    # t's arrangement alone: not the 30 views', their operator states' or their tables'
    assert one["entries_applied"] == many["entries_applied"] == 1
    assert one["runs_written"] == many["runs_written"] == 1
    assert calls_one == calls_many  # every blob and consensus call of the commit


def _examined(n: int) -> tuple[dict, dict]:
    """What a durable commit examined (``Catalog.commit_work``) for a one-row INSERT into a
    table no view reads, then into a table two views read (one through a shared
    arrangement), in a catalog with ``n`` such pairs of views."""
    cat = colmz.Catalog(f"mem://examined-{uuid.uuid4().hex}", maintain_every=0)
    cat.execute("CREATE TABLE t (k BIGINT)")
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i})")
        cat.execute(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k; "
                    f"CREATE MATERIALIZED VIEW m_{i} AS SELECT k, min(v) AS m FROM src_{i} GROUP BY k")
    cat.execute("INSERT INTO t VALUES (0)")
    out = []
    for sql in ("INSERT INTO t VALUES (1)", "INSERT INTO src_0 VALUES (1, 7), (2, 8)"):
        before = cat.commit_work
        cat.execute(sql)
        out.append({k: cat.commit_work[k] - before[k] for k in before})
    assert rows(cat, "SELECT * FROM m_0") == [(1, 0), (2, 8)]
    assert rows(cat, "SELECT * FROM v_0") == [(1, 7), (2, 8)]
    return out[0], out[1]


def test_a_commit_examines_what_it_changed_however_many_views():
    # Not every view, operator state and shared arrangement for a change of its own (each
    # used to be looked at by every commit): those of what the call changed.
    (t_one, src_one), (t_many, src_many) = _examined(1), _examined(30)
    assert t_one == t_many == {"commits": 1, "tables": 1, "visited": 0, "compared": 0, "objects_examined": 1,
                               "views_examined": 0, "shared_examined": 0}
    assert src_one == src_many == {"commits": 1, "tables": 1, "visited": 2, "compared": 0, "objects_examined": 3,
                                   "views_examined": 2, "shared_examined": 1}


def _maintained_after_reopen(n: int) -> tuple[int, int]:
    """Arrangements the first maintenance after a reopen compacted (``Catalog.stats``), of a
    catalog with ``n`` tables and views compacted before it closed; and those it holds."""
    url = f"mem://maintained-{uuid.uuid4().hex}"
    cat = colmz.Catalog(url, maintain_every=2)
    cat.execute("CREATE TABLE t (k BIGINT)")
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i}), (2, 2)")
        cat.execute(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k")
    for i in range(4):  # maintenance compacts what the set-up wrote
        cat.execute(f"INSERT INTO t VALUES ({i})")
    again = colmz.Catalog(url, maintain_every=2)
    before = again.stats["maintained"]
    for i in range(2):  # the second commit maintains
        again.execute(f"INSERT INTO t VALUES ({10 + i})")
    assert rows(again, "SELECT * FROM v_0") == [(1, 0), (2, 2)]
    held = len(CatalogStore(open_location(url)).load()["objects"])
    return again.stats["maintained"] - before, held


def test_the_first_maintenance_after_a_reopen_compacts_what_was_written_since():
    # t alone (written since): every arrangement -- 30 tables, views and their states -- was
    # compacted once after each reopen
    (one, held_one), (many, held_many) = _maintained_after_reopen(1), _maintained_after_reopen(30)
    assert one == many == 1
    assert held_many > held_one + 60


def test_lagging_arrangements_reopen_at_the_catalogs_upper(tmp_path):
    cat = colmz.Catalog(tmp_path, maintain_every=4)
    setup(cat)
    for i in range(10):
        cat.execute(f"INSERT INTO t VALUES ({100 + i})")
    store = CatalogStore(open_location(str(tmp_path)))
    state = store.load()
    assert store.upper == cat.now + 1
    keys = [d["key"] for d in state["objects"] if "key" in d]
    lagging = [k for k in keys if store.arrangement(k).upper < store.upper]
    assert len(lagging) >= len(VIEWS) + 2  # the views, their states, s and u
    assert all(store.logical_upper(k) == store.upper for k in keys)
    again = colmz.Catalog(tmp_path)
    assert again.now == cat.now
    # every view's operators restored from their lagging states, no input read
    assert again.view_work == {"initialized": 0, "restored": len(VIEWS), "input_rows_read": 0}
    assert again.shared_work["filled"] == 0 and again.shared_work["restored"] >= 1
    check_views(again)
    # the lagging arrangements take their next change from where they were
    again.execute("INSERT INTO s VALUES (1, 5), (3, 30); DELETE FROM u WHERE k = 2; INSERT INTO u VALUES (3, 300)")
    check_views(again)
    third = colmz.Catalog(tmp_path)
    assert third.view_work["input_rows_read"] == 0
    check_views(third)
    assert rows(third, "SELECT * FROM vs") == [(1, 26, 3), (2, 20, 1), (3, 30, 1)]
    # reads as of the load time and after it
    assert third.read("vm", third.now).to_pylist() == [(1, 5, third.now, 1), (2, 20, third.now, 1),
                                                       (3, 30, third.now, 1)]
    # the states the last commit changed were written: the restored operators step on the
    # same keys from where they were (a state left behind would show here)
    third.execute("INSERT INTO t VALUES (7)")  # and lag again
    third.execute("DELETE FROM s WHERE v = 5; INSERT INTO s VALUES (2, 1); INSERT INTO u VALUES (1, 101)")
    check_views(third)
    fourth = colmz.Catalog(tmp_path)
    fourth.execute("INSERT INTO s VALUES (1, 1), (2, 2), (3, 3); DELETE FROM u WHERE w = 100")
    check_views(fourth)
    assert rows(fourth, "SELECT * FROM vs") == [(1, 22, 3), (2, 23, 3), (3, 33, 2)]


# ----------------------------------------------------------------------------- faults

TXNS = [
    "INSERT INTO t VALUES (50)",  # touches no view: every view lags
    "INSERT INTO s VALUES (2, 7), (4, 40); DELETE FROM s WHERE k = 1 AND v = 10; INSERT INTO u VALUES (4, 400)",
]


@pytest.mark.parametrize("mode", ["before", "after"])
@pytest.mark.parametrize("txn", TXNS)
def test_a_failed_storage_call_in_a_commit_with_lagging_views_keeps_all_or_none(txn, mode):
    loc, plan = faulty(f"mem://lazyf-{uuid.uuid4().hex}")
    cat = colmz.Catalog(loc)
    setup(cat)
    start = plan.calls
    cat.execute(txn)
    n_calls = plan.calls - start
    after = {n: rows(cat, f"SELECT * FROM {n}") for n in ("t", "s", "u")}
    outcomes = set()
    for n in range(1, n_calls + 1):
        url = f"mem://lazyf-{uuid.uuid4().hex}"
        loc, plan = faulty(url)
        cat = colmz.Catalog(loc)
        setup(cat)
        before = {k: rows(cat, f"SELECT * FROM {k}") for k in ("t", "s", "u")}
        now = cat.now
        plan.fail_at, plan.mode = plan.calls + n, mode
        with contextlib.suppress(Determinate, Indeterminate):
            cat.execute(txn)
        again = colmz.Catalog(url)  # a crash: the store alone
        got = {k: rows(again, f"SELECT * FROM {k}") for k in ("t", "s", "u")}
        assert got in (before, after), n
        assert again.now == (now if got == before else now + 1), n
        outcomes.add(got == after)
        check_views(again)
        # steps on, on the keys the commit wrote (a state left behind would show here)
        again.execute("INSERT INTO s VALUES (1, 9), (2, 9), (4, 9); INSERT INTO u VALUES (1, 90)")
        check_views(again)
        last = colmz.Catalog(url)
        last.execute("DELETE FROM s WHERE v = 9; INSERT INTO u VALUES (2, 90)")
        check_views(last)
    assert outcomes == {True, False}  # both sides of the commit point were hit


# ----------------------------------------------------------------------------- SIGKILL

_CHILD = """
import sys
import colmz
cat = colmz.Catalog(sys.argv[1], maintain_every=3)
if "t" not in cat:
    cat.execute("CREATE TABLE t (k BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)")
    for name, query in {views!r}.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {{name}} AS {{query}}")
i = cat.now
print("ready", flush=True)
while True:
    i += 1
    if i % 3:  # most commits touch no view
        cat.execute(f"INSERT INTO t VALUES ({{i}})")
    else:
        cat.execute(f"INSERT INTO s VALUES ({{i % 5}}, {{i}}); INSERT INTO u VALUES ({{i % 5}}, {{i}}); "
                    f"INSERT INTO t VALUES ({{i}})")
"""


def test_sigkill_with_lagging_views_loses_nothing_and_doubles_nothing(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(views=VIEWS))
    store = tmp_path / "store"
    rng = random.Random(39)
    for _ in range(3):
        kill_when_ready(script, store, rng.uniform(0.5, 1.5))
        cat = colmz.Catalog(store)
        t = [r[0] for r in rows(cat, "SELECT * FROM t")]
        # each commit i wrote i into t (and, every third, a row into s and u): none lost,
        # none doubled, no time skipped
        assert t and t == list(range(cat.now - len(t) + 1, cat.now + 1))
        s = rows(cat, "SELECT * FROM s")
        assert s == sorted((i % 5, i) for i in t if i % 3 == 0)
        check_views(cat)
        assert cat.view_work["input_rows_read"] == 0  # resumed, not rebuilt


# ----------------------------------------------------------------------------- reopen after every step

STEPS = st.lists(st.one_of(
    st.tuples(st.just("t"), st.integers(0, 9)),
    st.tuples(st.just("s"), st.integers(0, 4), st.integers(-5, 5)),
    st.tuples(st.just("u"), st.integers(0, 4), st.integers(0, 9)),
    st.tuples(st.just("del_s"), st.integers(0, 4)),
    st.tuples(st.just("drop"), st.sampled_from(sorted(VIEWS))),
    st.tuples(st.just("create"), st.sampled_from(sorted(VIEWS))),
), min_size=1, max_size=8)


def _sql(step) -> str:
    kind = step[0]
    if kind == "t":
        return f"INSERT INTO t VALUES ({step[1]})"
    if kind == "s":
        return f"INSERT INTO s VALUES ({step[1]}, {step[2]})"
    if kind == "u":
        return f"INSERT INTO u VALUES ({step[1]}, {step[2]})"
    if kind == "del_s":
        return f"DELETE FROM s WHERE k = {step[1]}"
    if kind == "drop":
        return f"DROP MATERIALIZED VIEW IF EXISTS {step[1]}"
    return f"CREATE MATERIALIZED VIEW IF NOT EXISTS {step[1]} AS {VIEWS[step[1]]}"


@settings(max_examples=8, deadline=None)
@given(STEPS)
@example([("s", 1, 5), ("t", 0), ("s", 1, 3), ("del_s", 1), ("create", "vm"), ("s", 1, 2), ("t", 1), ("s", 1, 4)])
def test_reopen_after_every_step_of_a_random_script(steps):
    url = f"mem://lazyr-{uuid.uuid4().hex}"
    cat = colmz.Catalog(url)
    model = colmz.Catalog()  # the tables, in memory
    for c in (cat, model):
        c.execute("CREATE TABLE t (k BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)")
    cat.execute(f"CREATE MATERIALIZED VIEW vs AS {VIEWS['vs']}")
    for step in steps:
        cat.execute(_sql(step))
        if step[0] not in ("drop", "create"):
            model.execute(_sql(step))
        cat = colmz.Catalog(url)
        assert cat.view_work["input_rows_read"] == 0  # every view resumed, lagging or not
        for name in ("t", "s", "u"):
            assert rows(cat, f"SELECT * FROM {name}") == rows(model, f"SELECT * FROM {name}"), (step, name)
        check_views(cat)


# ----------------------------------------------------------------------------- readers


def test_a_reader_reads_each_object_at_the_catalogs_upper_not_its_arrangements(tmp_path):
    cat = colmz.Catalog(tmp_path)
    setup(cat)
    # s, u and the views lag: their arrangements, opened directly, end before the catalog's upper
    direct = {n: colmz.Arrangement.open(str(tmp_path), name=cat.identity(n), create=False).get_seal()
              for n in ("t", "s", "vs")}
    assert direct["t"] == cat.now + 1 and direct["s"] < cat.now + 1 and direct["vs"] < cat.now + 1
    reader = colmz.Catalog(tmp_path, create=False)  # as another process opens it
    for n in ("t", "s", "vs"):
        since, upper = reader.frontiers(n)
        assert upper == reader.now + 1 == cat.now + 1 and since <= reader.now, n
        assert reader.read(n, reader.now).to_pylist() == cat.read(n).to_pylist(), n
    check_views(reader)
    # the writer commits: the reader's next call catches up to the new upper
    cat.execute("INSERT INTO t VALUES (99)")
    assert reader.frontiers("vs")[1] == cat.now + 1
    assert reader.frontiers("s")[1] == cat.frontiers("s")[1] == cat.now + 1
    with pytest.raises(KeyError, match="no object 'nope'"):
        reader.frontiers("nope")


def test_a_committed_transaction_not_yet_applied_is_read_through_the_catalog_only():
    # A crash after the commit point leaves the record ahead of the arrangements the commit
    # changes: the catalog reads the commit, an arrangement opened directly does not.
    txn = TXNS[1]  # changes s, u and every view
    changed = ("s", "u", *VIEWS)
    loc, plan = faulty(f"mem://lazyr-{uuid.uuid4().hex}")
    cat = colmz.Catalog(loc)
    setup(cat)
    start = plan.calls
    cat.execute(txn)
    n_calls = plan.calls - start
    after = {n: rows(cat, f"SELECT * FROM {n}") for n in changed}
    pending = 0
    for n in range(1, n_calls + 1):
        url = f"mem://lazyr-{uuid.uuid4().hex}"
        loc, plan = faulty(url)
        cat = colmz.Catalog(loc)
        setup(cat)
        keys = {name: cat.identity(name) for name in changed}
        # an outage from the n-th call on: the handle's commit stops there (a crash)
        plan.fail_at, plan.mode, plan.count = plan.calls + n, "before", 10**6
        with contextlib.suppress(Determinate, Indeterminate):
            cat.execute(txn)
        seals = {name: colmz.Arrangement.open(open_location(url), name=k, create=False).get_seal()
                 for name, k in keys.items()}
        reader = colmz.Catalog(url)  # applies the record's intent, as a reopen does
        if {name: rows(reader, f"SELECT * FROM {name}") for name in changed} != after:
            continue  # failed before the commit point
        behind = [name for name in changed if seals[name] < reader.frontiers(name)[1]]
        if behind:  # committed, not in these arrangements: only the catalog's read has it
            pending += 1
            assert all(reader.frontiers(name)[1] == reader.now + 1 for name in behind)
            check_views(reader)
    assert pending >= 1
