"""A reopened durable table's retraction check reads what it checks, not the table.

A table keeps a row-count index (``MemoryCollection.keep_counts``) that refuses a change
leaving a row with a negative multiplicity. A durable catalog reopened loads a table's
contents only when a read needs them (``colmz.catalog.objects.load_collection``); until
then its index holds the changes after the load time and the contents' counts are point
lookups in the table's arrangement (``ArrangementCollection.counts``: the row groups whose
first column's statistics admit the rows). So reopening and deleting one row reads a
bounded number of rows (work counters), and the index agrees with the table and the views
with their queries after any step -- a reopen, a read loading the contents midway, a commit
failing at any storage call (``colmz.storage.faults``), a SIGKILL before the record's
compare-and-set.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import uuid
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colmz
import colmz.arrangement.lookups as lookups
import colmz.arrangement.part_writer as part_writer
from colmz.catalog.durable import Catalog
from colmz.errors import NegativeMultiplicity
from colmz.storage.url import open_location

VIEWS = {
    "s": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "j": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.uk = u.uk",
}


def _build(where, n: int) -> Catalog:
    cat = Catalog(where)
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT, uk BIGINT); CREATE TABLE u (uk BIGINT, w BIGINT)")
    i = np.arange(n)
    cat.append("t", pa.table({"k": i % max(n // 10, 1), "v": i, "uk": i % 50}))
    cat.append("u", pa.table({"uk": np.arange(50), "w": np.arange(50) * 2}))
    for name, q in VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} WITH (INCREMENTAL = 'require') AS {q}")
    return cat


def _row(k, v, uk, diff, time) -> colmz.Updates:
    return colmz.Updates({"k": [k], "v": [v], "uk": [uk]}, time=[time], diff=[diff])


def _rows(rows) -> colmz.Updates:
    k, v, uk = zip(*rows)
    return colmz.Updates({"k": list(k), "v": list(v), "uk": list(uk)}, time=[0] * len(rows), diff=[1] * len(rows))


def _table(cat) -> Counter:
    return Counter({tuple(r[:3]): r[4] for r in cat.read("t").to_pylist()})


def _view(cat, name) -> Counter:
    return Counter(tuple(r.values()) for r in cat.sql(f"SELECT * FROM {name}").to_pylist())


def _recomputed(cat, name) -> Counter:
    return Counter(tuple(r.values()) for r in cat.sql(VIEWS[name]).to_pylist())


def _check_views(cat) -> None:
    for name in VIEWS:
        assert _view(cat, name) == _recomputed(cat, name), name


def test_reopen_then_one_delete_reads_a_bounded_number_of_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 512)
    n = 40_000
    cat = _build(str(tmp_path / "c"), n)
    for i in range(3):
        cat.append("t", _row(1, n + i, 1, 1, cat.now + 1))
    read = [0]

    def counted(*args, **kwargs):
        stats, got = real(*args, **kwargs)
        read[0] += sum(len(u) for u in got.values())
        return stats, got

    real = lookups.read_groups
    monkeypatch.setattr(lookups, "read_groups", counted)
    again = Catalog(str(tmp_path / "c"))
    t = again.object("t").collection
    assert again.view_work["input_rows_read"] == 0 and t.base_pending
    again.append("t", _row(7, 7, 7, -1, again.now + 1))  # a row loaded with the table
    # nothing of the table was loaded or indexed: its counts came from a lookup of the
    # row groups that may hold (7, 7, 7) -- about one per run, not the 40,000 rows
    assert t.base_pending
    assert t.stats["counts_work"] < 50 and t.stats["base_lookups"] == 1
    assert 0 < read[0] <= 2 * 512 * 8 and read[0] < n // 10
    assert again.view_work["input_rows_read"] == 0
    with pytest.raises(NegativeMultiplicity, match=r"\(7, 7, 7\)"):
        again.append("t", _row(7, 7, 7, -1, again.now + 1))  # the last copy is gone
    table = _table(again)
    assert table[(7, 7, 7)] == 0 and table[(17, 17, 17)] == 1 and sum(table.values()) == n + 3 - 1
    _check_views(again)


def test_the_deletes_of_a_reopened_table_decode_it_at_most_once_in_all(tmp_path, monkeypatch):
    # Every delete until the table loads asks the arrangement; the row groups one lookup
    # read are kept indexed, so deletes spread over the whole table decode each group once:
    # all of them together decode at most the table per version of its parts (the
    # catalog's compaction of the table rewrites them once here; before: a group per run
    # per delete, whatever earlier deletes read), nothing is loaded, every count is right.
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 256)
    n = 4_000
    path = str(tmp_path / "c")
    _build(path, n)
    again = Catalog(path)
    t = again.object("t").collection
    dur = again._mirror.arrangements["t"].arrangement  # noqa: SLF001 - its work counters
    model = Counter({(i % (n // 10), i, i % 50): 1 for i in range(n)})
    rng = random.Random(46)
    victims = rng.sample(sorted(model), 60)
    for row in victims:  # spread over every row group of the table
        again.append("t", _row(*row, -1, again.now + 1))
        model[row] -= 1
    for row in victims[:5]:  # the last copy is gone: refused, from the index
        with pytest.raises(NegativeMultiplicity):
            again.append("t", _row(*row, -1, again.now + 1))
    assert t.base_pending and t.stats["base_lookups"] == 65
    restarts = dur.lookup_stats["restarts"]
    assert restarts <= 2 and dur.lookup_stats["rows_read"] <= n * (1 + restarts) < 65 * 256
    again.append("t", _row(*victims[0], 1, again.now + 1))
    model[victims[0]] += 1
    assert _table(again) == +model  # the read loads the table: the lookups' index is dropped
    assert not t.base_pending and len(dur._lookups) == 0  # noqa: SLF001
    _check_views(again)


def test_retraction_checks_agree_with_a_model_across_reopens_and_loads(tmp_path):
    path = str(tmp_path / "c")
    n = 300
    cat = _build(path, n)
    model = Counter({(i % (n // 10), i, i % 50): 1 for i in range(n)})
    rng = random.Random(39)
    for step in range(40):
        roll = rng.random()
        if roll < 0.15:
            cat = Catalog(path)  # reopened: the contents not loaded, counts looked up
        elif roll < 0.2:
            assert _table(cat) == +model  # a read loads the contents: the index takes them
        row = rng.choice([*model, (999, 1, 1), (3, 3, 3)]) if rng.random() < 0.7 else \
            (rng.randrange(30), rng.randrange(n), rng.randrange(50))
        diff = rng.choice([-2, -1, -1, 1, 2])
        if model[row] + diff < 0:
            with pytest.raises(NegativeMultiplicity):
                cat.append("t", _row(*row, diff, cat.now + 1))
        else:
            cat.append("t", _row(*row, diff, cat.now + 1))
            model[row] += diff
        if step % 10 == 9:
            assert _table(cat) == +model, step
            _check_views(cat)
    assert _table(Catalog(path)) == +model


# ----------------------------------------------------------------------------- faults


def _faulty(url):
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location

    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


def _fault_change(now: int) -> colmz.Updates:
    # deletes of rows loaded with the table (counts looked up), and an insert
    return colmz.Updates({"k": [3, 5, 9], "v": [3, 5, 99], "uk": [3, 5, 9]}, time=[now + 1] * 3, diff=[-1, -1, 1])


def _agrees(cat, model: Counter) -> None:
    """The table is ``model``; its index says so for every row of it and two absent ones
    (asked before anything loads the table), and the views equal their queries."""
    t = cat.object("t").collection
    asked = [*model, (3, 3, 3), (1234, 0, 0)]
    assert t.counts(_rows(asked)).tolist() == [model[r] for r in asked]
    assert _table(cat) == +model
    _check_views(cat)


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_reopened_delete_failing_at_any_storage_call_leaves_table_index_and_views_agreeing(mode):
    from colmz.storage.base import Determinate, Indeterminate

    n = 60
    before = Counter({(i % (n // 10), i, i % 50): 1 for i in range(n)})
    after = before.copy()
    after[(3, 3, 3)] -= 1
    after[(5, 5, 5)] -= 1
    after[(9, 99, 9)] += 1
    url = f"mem://rr-{uuid.uuid4().hex}"
    _build(url, n)
    loc, plan = _faulty(url)
    cat = Catalog(loc)
    start = plan.calls
    cat.append("t", _fault_change(cat.now))
    calls = plan.calls - start
    assert calls > 5
    outcomes = set()
    for k in range(1, calls + 1):
        url = f"mem://rr-{uuid.uuid4().hex}"
        _build(url, n)
        loc, plan = _faulty(url)
        cat = Catalog(loc)
        plan.fail_at, plan.mode = plan.calls + k, mode
        raised = None
        try:
            cat.append("t", _fault_change(cat.now))
        except (Determinate, Indeterminate) as e:
            raised = e
        if isinstance(raised, Determinate):  # the handle unchanged by the failed call
            assert _table(cat) == +before, k
        again = Catalog(url)  # a crash: reopen from the store alone
        got = after if _table(Catalog(url))[(9, 99, 9)] else before
        outcomes.add(got is after)
        _agrees(again, got)
        # the reopened catalog deletes on, its index refusing what the model refuses
        again.append("t", _row(4, 4, 4, -1, again.now + 1))
        with pytest.raises(NegativeMultiplicity):
            again.append("t", _row(4, 4, 4, -1, again.now + 1))
        _check_views(again)
    assert outcomes == {True, False}


# ----------------------------------------------------------------------------- SIGKILL

#: A child that reopens the catalog at argv[1] and writes (``rng`` seeded by argv[2]):
#: inserts, deletes of rows it inserted or of rows loaded with the table, over-deletes
#: (refused); it dies by SIGKILL at the argv[3]-th record commit, its parts written.
CHILD = """
import os, random, signal, sys
import colmz
from colmz.errors import NegativeMultiplicity
from colmz.storage.state import StateLog

path, seed, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cat = colmz.Catalog(path, maintain_every=3)
commit, calls = StateLog.commit, [0]


def commit_or_die(self, expected, state):
    calls[0] += 1
    if calls[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return commit(self, expected, state)


StateLog.commit = commit_or_die
rng = random.Random(seed)
mine = []
while True:
    r = rng.random()
    if r < 0.4 or not mine:
        row = (rng.randrange(6), rng.randrange(1000, 2000), rng.randrange(50))
        mine.append(row)
        d = 1
    elif r < 0.7:
        row, d = mine.pop(rng.randrange(len(mine))), -1
    else:
        i = rng.randrange(60)
        row, d = (i % 6, i, i % 50), -1  # loaded with the table: maybe deleted already
    u = colmz.Updates({"k": [row[0]], "v": [row[1]], "uk": [row[2]]}, time=[cat.now + 1], diff=[d])
    try:
        cat.append("t", u)
    except NegativeMultiplicity:
        pass
"""


def _sigkill_campaign(tmp_path, kills: int) -> None:
    store = str(tmp_path / "store")
    _build(store, 60)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(39)
    for i in range(kills):
        child = subprocess.run([sys.executable, str(script), store, str(i), str(rng.randrange(2, 14))],
                               capture_output=True, text=True, timeout=300)
        assert child.returncode == -signal.SIGKILL, child.stderr
        model = _table(Catalog(store))  # another handle: the table as the store holds it
        cat = Catalog(store)
        assert cat.view_work["input_rows_read"] == 0
        _agrees(cat, model)


def test_sigkill_before_the_record_commit_leaves_table_index_and_views_agreeing(tmp_path):
    _sigkill_campaign(tmp_path, 3)


@pytest.mark.slow
def test_sigkill_before_the_record_commit_leaves_table_index_and_views_agreeing_long(tmp_path):
    _sigkill_campaign(tmp_path, 12)
