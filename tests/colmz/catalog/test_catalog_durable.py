"""``colmz.Catalog(path)``: durable catalogs over ``colmz.Arrangement``; reopen and resume."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.arrangement import Arrangement
from colmz.catalog import ArrangementCollection
from colmz.continual import NegativeMultiplicity

UPSERT = """CREATE CONTINUAL TASK upsert (key INT, val INT) ON INPUT append_only AS (
    DELETE FROM upsert WHERE key IN (SELECT key FROM append_only);
    INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key)"""


def q(cat, sql, as_of=None):
    return sorted(tuple(r.values()) for r in cat.sql(sql, as_of=as_of).to_pylist())


def key_of(path, name):
    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    record = CatalogStore(open_location(str(path))).load()
    return next(d["key"] for d in record["objects"] if d["name"] == name)


def test_memory_url_catalog_reopens():
    import uuid

    url = f"mem://catalog-{uuid.uuid4().hex}"
    cat = colmz.Catalog(url)
    cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1), (2)")
    again = colmz.Catalog(url)
    assert again.now == 1 and q(again, "SELECT * FROM t") == [(1,), (2,)]
    with pytest.raises(ValueError, match="needs a path"):
        colmz.Catalog(consensus="sqlite:///x")


def test_reopen_keeps_objects_contents_and_time(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE append_only (key INT, val INT)")
    cat.execute(UPSERT)
    cat.execute("CREATE MATERIALIZED VIEW n AS SELECT count(*) AS c FROM upsert")
    cat.execute("INSERT INTO append_only VALUES (1, 2), (1, 1)")
    cat.execute("INSERT INTO append_only VALUES (1, 3), (2, 4)")
    again = colmz.Catalog(tmp_path)
    assert again.now == 2 and again.names == ["append_only", "upsert", "n"]
    assert q(again, "SELECT * FROM upsert") == [(1, 3), (2, 4)]
    assert q(again, "SELECT * FROM n") == [(2,)]
    again.execute("INSERT INTO append_only VALUES (3, 9), (1, 0)")
    assert q(again, "SELECT * FROM upsert") == [(1, 0), (2, 4), (3, 9)]
    assert q(again, "SELECT * FROM n") == [(3,)]
    third = colmz.Catalog(tmp_path)
    assert third.now == 3 and q(third, "SELECT * FROM upsert") == q(again, "SELECT * FROM upsert")
    assert third.object("upsert").schema == (colmz.ColumnSpec("key", pa.int32()), colmz.ColumnSpec("val", pa.int32()))
    # Reads before the reopen time are gone from memory; at it they work.
    assert q(third, "SELECT * FROM upsert", as_of=3) == [(1, 0), (2, 4), (3, 9)]


def test_failed_commit_persists_nothing(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("""CREATE CONTINUAL TASK ct (k INT) ON INPUT t AS (
        INSERT INTO ct SELECT k FROM t WHERE k > 0;
        DELETE FROM ct WHERE k IN (SELECT -k FROM t);
        DELETE FROM ct WHERE k = 1 AND EXISTS (SELECT 1 FROM t WHERE k < 0))""")
    cat.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(NegativeMultiplicity):
        cat.execute("INSERT INTO t VALUES (-1)")
    again = colmz.Catalog(tmp_path)
    assert again.now == 1 and q(again, "SELECT * FROM t") == [(1,)] and q(again, "SELECT * FROM ct") == [(1,)]


def test_drop_and_create_survive_reopen(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE a (k INT); CREATE TABLE b (k TEXT)")
    cat.execute("INSERT INTO a VALUES (1); INSERT INTO b VALUES ('x')")
    cat.execute("DROP TABLE a")
    cat.execute("CREATE TABLE a (k BIGINT)")
    cat.execute("INSERT INTO a VALUES (7)")
    again = colmz.Catalog(tmp_path)
    assert again.names == ["b", "a"]
    assert q(again, "SELECT * FROM a") == [(7,)] and q(again, "SELECT * FROM b") == [("x",)]


@pytest.mark.parametrize("history", [5, 60])
def test_reopen_resumes_tasks_without_reading_input_history(tmp_path, history):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE append_only (key INT, val INT)")
    cat.execute(UPSERT)
    for t in range(history):
        cat.execute(f"INSERT INTO append_only VALUES ({t % 4}, {t})")
    now = cat.now
    upper = now + 1
    # While the catalog is down, the input receives three more times (as after a crash
    # between the input's commit and the task's).
    table = ArrangementCollection(Arrangement.open(str(tmp_path), None, name=key_of(tmp_path, "append_only")))
    for t in range(upper, upper + 3):
        u = colmz.Updates({"key": pa.array([9], pa.int32()), "val": pa.array([t], pa.int32())}, time=[t], diff=[1])
        table.compare_and_append(u, t, t + 1)
    again = colmz.Catalog(tmp_path)
    assert again.now == upper + 2
    task_out = again.object("upsert").collection
    assert task_out.times()[-3:] == [upper, upper + 1, upper + 2]  # first write at A + 1
    assert q(again, "SELECT * FROM upsert WHERE key = 9") == [(9, upper + 2)]
    # Work: the input's durable reads are the three new updates, whatever its history; the
    # task's own state is read once: each update its arrangement holds, fetched once (and
    # merged in memory to its contents, at most 4 keys).
    dur_in = again._mirror.arrangements["append_only"].stats  # noqa: SLF001 - white-box work counter
    assert dur_in["updates_read"] == 3
    out = again._mirror.arrangements["upsert"]  # noqa: SLF001
    assert out.stats["updates_read"] == len(out.arrangement.read_unmerged(task_out.since))
    assert len(task_out.snapshot(task_out.since)) <= 4


@settings(max_examples=10, deadline=None)
@given(
    batches=st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9)), max_size=3), min_size=1, max_size=8),
    reopen_at=st.sets(st.integers(0, 7), max_size=3),
)
def test_durable_catalog_with_reopens_matches_memory(tmp_path_factory, batches, reopen_at):
    path = tmp_path_factory.mktemp("cat")
    ddl = ["CREATE TABLE append_only (key INT, val INT)", UPSERT,
           "CREATE MATERIALIZED VIEW n AS SELECT count(*) AS c, sum(val)::BIGINT AS s FROM upsert",
           "CREATE CONTINUAL TASK log FROM TRANSFORM append_only USING (SELECT key FROM append_only)"]
    mem, dur = colmz.Catalog(), colmz.Catalog(path, maintain_every=2)
    for s in ddl:
        mem.execute(s)
        dur.execute(s)
    for i, rows in enumerate(batches):
        if i in reopen_at:
            dur = colmz.Catalog(path, maintain_every=2)
            # read before any write: each object's rows straight from its fetched runs
            # (merged only where a retraction was read)
            for name in ("append_only", "upsert", "n", "log"):
                assert q(dur, f"SELECT * FROM {name}") == q(mem, f"SELECT * FROM {name}"), name
        sql = "DELETE FROM append_only WHERE key = 0" if not rows else \
            "INSERT INTO append_only VALUES " + ", ".join(f"({k}, {v})" for k, v in rows)
        mem.execute(sql)
        dur.execute(sql)
        assert dur.now == mem.now
        for name in ("append_only", "upsert", "n", "log"):
            assert q(dur, f"SELECT * FROM {name}") == q(mem, f"SELECT * FROM {name}"), name


def test_maintenance_compacts_durable_history(tmp_path):
    cat = colmz.Catalog(tmp_path, maintain_every=4)
    cat.execute("CREATE TABLE append_only (key INT, val INT)")
    cat.execute(UPSERT)
    for t in range(40):
        cat.execute(f"INSERT INTO append_only VALUES ({t % 3}, {t})")
    arr = cat._mirror.arrangements["upsert"].arrangement  # noqa: SLF001 - white-box: the durable layout
    assert arr.since() >= 36 and len(arr.unsealed_batches) <= 4
    again = colmz.Catalog(tmp_path)
    assert q(again, "SELECT * FROM upsert") == [(0, 39), (1, 37), (2, 38)]
    with pytest.raises(ValueError, match="maintain_every"):
        colmz.Catalog(tmp_path, maintain_every=-1)


# ----------------------------------------------------------------------------- transactions


def _faulty(url):
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location, open_location

    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


TXN = "INSERT INTO a VALUES (2); INSERT INTO b VALUES (20), (21); DELETE FROM a WHERE k = 1"


def _setup(url):
    loc, plan = _faulty(url)
    cat = colmz.Catalog(loc)
    cat.execute("CREATE TABLE a (k INT); CREATE TABLE b (k INT)")
    cat.execute("CREATE CONTINUAL TASK log ON INPUT b AS (INSERT INTO log SELECT * FROM b)")
    cat.execute("INSERT INTO a VALUES (1)")
    return cat, plan


@pytest.mark.parametrize("mode", ["before", "after"])
def test_multi_table_write_is_all_or_nothing_at_every_failing_call(mode):
    import uuid

    from colmz.storage.base import Determinate, Indeterminate

    # Count the storage calls of the transaction, then fail each one in turn.
    cat, plan = _setup(f"mem://txn-{uuid.uuid4().hex}")
    start = plan.calls
    cat.execute(TXN)
    n_calls = plan.calls - start
    assert n_calls > 4
    outcomes = set()
    for n in range(1, n_calls + 1):
        url = f"mem://txn-{uuid.uuid4().hex}"
        cat, plan = _setup(url)
        plan.fail_at, plan.mode = plan.calls + n, mode
        with contextlib.suppress(Determinate, Indeterminate):
            cat.execute(TXN)
        again = colmz.Catalog(url)  # a crash: reopen from the store alone
        state = (q(again, "SELECT * FROM a"), q(again, "SELECT * FROM b"), q(again, "SELECT * FROM log"))
        assert state in (
            ([(1,)], [], []),  # none of the transaction
            ([(2,)], [(20,), (21,)], [(20,), (21,)]),  # all of it (the task resumed)
        ), (n, state)
        outcomes.add(state[1] == [])
        assert again.now == (1 if state[1] == [] else 2)
        again.execute("INSERT INTO a VALUES (5)")  # the reopened catalog works on
        assert (5,) in q(again, "SELECT * FROM a")
    assert outcomes == {True, False}  # both sides of the intent's commit were hit


_CHILD = """
import sys
import colmz
cat = colmz.Catalog(sys.argv[1], maintain_every=4)
if "a" not in cat:
    cat.execute("CREATE TABLE a (k INT); CREATE TABLE b (k INT)")
i = cat.now
print("ready", flush=True)
while True:
    i += 1
    cat.execute(f"INSERT INTO a VALUES ({i}); INSERT INTO b VALUES ({i}), ({-i})")
"""


def test_sigkill_mid_transaction_reopens_all_or_nothing(tmp_path):
    import random

    from child_kills import kill_when_ready

    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    store = tmp_path / "store"
    rng = random.Random(11)
    for _ in range(2):
        kill_when_ready(script, store, rng.uniform(0.3, 1.2))
        cat = colmz.Catalog(store)
        a = [r[0] for r in q(cat, "SELECT * FROM a")]
        b = [r[0] for r in q(cat, "SELECT * FROM b")]
        # Every transaction wrote i to a and i, -i to b at time i: all of each or none.
        assert sorted(b) == sorted(a + [-k for k in a])
        assert a == list(range(1, cat.now + 1)) and a  # no time lost, some committed


_KILL_AFTER_COMMIT = """
import os, signal, sys
import colmz
from colmz.catalog.store import CatalogStore

path, kill_at = sys.argv[1], int(sys.argv[2])
cat = colmz.Catalog(path)
if "a" not in cat:
    cat.execute("CREATE TABLE a (k INT); CREATE TABLE b (k BIGINT);"
                "CREATE CONTINUAL TASK log ON INPUT b AS (INSERT INTO log SELECT * FROM b)")
commit, commits = CatalogStore.commit, [0]


def commit_then_die(self, objects, moves, upper=None):
    seqno = commit(self, objects, moves, upper)  # the record's compare-and-set landed
    commits[0] += 1
    if commits[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)  # before the apply
    return seqno


CatalogStore.commit = commit_then_die
i = cat.now
while True:
    i += 1
    cat.execute(f"INSERT INTO a VALUES ({i}); INSERT INTO b SELECT {i} * 1000 + g FROM generate_series(0, 99) s(g)")
"""


def test_sigkill_between_the_record_commit_and_the_apply_lands_the_intent_whole(tmp_path):
    import signal
    import subprocess
    import sys

    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    script = tmp_path / "child.py"
    script.write_text(_KILL_AFTER_COMMIT)
    store = tmp_path / "store"
    for kill_at in (1, 4, 2):
        child = subprocess.run([sys.executable, str(script), str(store), str(kill_at)], capture_output=True,
                               text=True, timeout=300)
        assert child.returncode == -signal.SIGKILL, child.stderr
        # The record names an intent the arrangements do not hold yet: runs of checked parts.
        cs = CatalogStore(open_location(str(store)))
        state = cs.load()
        pending = [e for e in state["intent"]["entries"] if cs.arrangement(e["key"]).upper == e["lower"]]
        assert pending and all(c for e in pending for r in e["runs"] for c in r["checks"])
        cat = colmz.Catalog(store)  # lands it whole
        a = [r[0] for r in q(cat, "SELECT * FROM a")]
        b = [r[0] for r in q(cat, "SELECT * FROM b")]
        assert a == list(range(1, cat.now + 1)) and a  # every committed time, the last one too
        assert b == sorted(i * 1000 + g for i in a for g in range(100))
        assert [r[0] for r in q(cat, "SELECT * FROM log")] == b
        assert all(cs.arrangement(e["key"]).arrangement.refresh() is None for e in pending)
        assert all(cs.arrangement(e["key"]).upper == e["upper"] for e in pending)


def test_durable_catalog_refuses_time_now(tmp_path):
    cat = colmz.Catalog(tmp_path / "c")
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1)", time=5)
    with pytest.raises(ValueError, match="durable catalog has persisted time 5 sealed"):
        cat.execute("INSERT INTO t VALUES (2)", time=5)
    with pytest.raises(ValueError, match="time=4 is before cat.now=5"):
        cat.execute("INSERT INTO t VALUES (2)", time=4)
    cat.execute("INSERT INTO t VALUES (3)", time=6)
    assert q(colmz.Catalog(tmp_path / "c"), "SELECT * FROM t") == [(1,), (3,)]


def test_first_query_after_reopening_does_not_consolidate_the_durable_read_again(tmp_path, monkeypatch):
    # The contents a reopened catalog loads come from Arrangement.read, consolidated
    # already: the first query keeps them as they come (work counter: no consolidate call
    # in colmz.continual.model) and answers as before.
    import colmz.continual.model as continual_mod

    cat = colmz.Catalog(str(tmp_path / "c"))
    cat.execute("CREATE TABLE t (k BIGINT, v TEXT)")
    for i in range(3):
        cat.execute(f"INSERT INTO t VALUES ({i}, 'x{i}'), ({i + 10}, 'y')")
    cat.execute("DELETE FROM t WHERE k = 1")
    want = sorted(cat.sql("SELECT k, v FROM t").to_pylist(), key=lambda r: r["k"])
    calls = []
    real = continual_mod.consolidate
    monkeypatch.setattr(continual_mod, "consolidate", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    again = colmz.Catalog(str(tmp_path / "c"))
    got = sorted(again.sql("SELECT k, v FROM t").to_pylist(), key=lambda r: r["k"])
    assert got == want and len(got) == 5
    assert calls == []


def test_a_query_reads_an_insert_only_table_without_merging_its_batches(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k BIGINT, v TEXT)")
    rows = []
    for i in range(6):  # six appends: six runs of one durable arrangement, keys interleaved
        batch = [(j * 6 + i, f"v{j % 3}") for j in range(50)] + [(1, "dup")]
        cat.append("t", colmz.Updates({"k": [r[0] for r in batch], "v": [r[1] for r in batch]},
                                      time=[0] * len(batch), diff=[1] * len(batch)), time=cat.now + 1)
        rows += batch
    again = colmz.Catalog(tmp_path)
    table = again.object("t").collection
    durable = again._mirror.arrangements["t"]  # noqa: SLF001 - white-box work counter
    got = again.sql("SELECT k, v FROM t")
    assert sorted(map(tuple, (r.values() for r in got.to_pylist()))) == sorted(rows)
    assert q(again, "SELECT count(*) AS n, count(DISTINCT k) AS d FROM t WHERE v = 'dup'") == [(6, 1)]
    # Answered from the fetched runs: the contents were never merged (the base is still to
    # load), and storage was read once for both queries.
    assert table.base_pending
    assert durable.stats["reads"] == 1 + 1  # the snapshot's fetch, and the load's updates()
    # After a write the contents are the base and the change: the base is merged then --
    # from what was fetched, not read again.
    again.execute("INSERT INTO t VALUES (1, 'dup')")
    assert q(again, "SELECT count(*) AS n FROM t WHERE k = 1") == [(8,)]  # (1, v0), 7 dups
    assert not table.base_pending
    assert durable.stats["reads"] == 2


def test_a_query_over_a_table_with_retractions_merges_it(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1), (2), (2), (3)")
    cat.execute("DELETE FROM t WHERE k = 2")
    cat.execute("INSERT INTO t VALUES (4)")
    again = colmz.Catalog(tmp_path)
    durable = again._mirror.arrangements["t"]  # noqa: SLF001 - white-box work counter
    assert q(again, "SELECT k FROM t ORDER BY k") == [(1,), (3,), (4,)]  # merged to know
    reads = durable.stats["reads"]
    # the contents, consolidated, come from that merge: storage is not read again
    assert [(k, d) for k, _, d in again.read("t").to_pylist()] == [(1, 1), (3, 1), (4, 1)]
    assert durable.stats["reads"] == reads
