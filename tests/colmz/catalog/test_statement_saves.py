"""What a statement pays to be undone, and that it is undone: a catalog call saves what it
touches (``colmz.rollback``'s saves on touch, ``Engine._keep``), not every object's state.

Work counters (``Catalog.save_work``), never the wall clock: a one-row write to a table no
view reads keeps and copies the same whether 1 or 60 views read other tables (their uppers
lag, logically at now + 1: nothing of theirs is kept); a write to a table that k views read
grows with k only. And a statement that fails after some views were stepped -- a later
view's step raising, or any storage call of the durable commit failing -- leaves every
object, operator and shared arrangement as it was: the catalog then goes on exactly as one
that never ran it.
"""

from __future__ import annotations

import contextlib
import uuid

import pytest

import colmz

ON_O = "SELECT k, sum(v) AS s FROM o WHERE k > {i} GROUP BY k"
ON_S = [
    "SELECT k, sum(v) AS s, count(*) AS c FROM s GROUP BY k",
    "SELECT s.k, s.v, o.v AS w FROM s JOIN o ON s.k = o.k",
    "SELECT k, max(v) AS m FROM s GROUP BY k",
    "SELECT DISTINCT k FROM s WHERE v > 1",
]


def _catalog(others: int, readers: int, where=None) -> colmz.Catalog:
    """Tables t (read by no view), s (read by ``readers`` views) and o (read by ``others``
    views and by the join over s)."""
    cat = colmz.Catalog() if where is None else colmz.Catalog(where)
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE s (k BIGINT, v BIGINT); "
                "CREATE TABLE o (k BIGINT, v BIGINT)")
    cat.execute("INSERT INTO o VALUES (1, 2), (2, 3), (3, 4); INSERT INTO s VALUES (1, 5), (2, 6), (2, 7)")
    for i in range(others):
        cat.execute(f"CREATE MATERIALIZED VIEW o{i} AS {ON_O.format(i=i % 3)}")
    for i in range(readers):
        cat.execute(f"CREATE MATERIALIZED VIEW s{i} AS {ON_S[i % len(ON_S)]}")
    cat.execute("INSERT INTO t VALUES (0, 0); INSERT INTO s VALUES (9, 9)")  # every view stepped once
    return cat


def _cost(cat: colmz.Catalog, sql: str) -> dict[str, int]:
    before = cat.save_work
    cat.execute(sql)
    return {k: cat.save_work[k] - before[k] for k in before}


def test_a_write_no_view_reads_saves_the_same_whatever_the_views():
    few, many = _catalog(1, 2), _catalog(60, 2)
    a, b = _cost(few, "INSERT INTO t VALUES (1, 1)"), _cost(many, "INSERT INTO t VALUES (1, 1)")
    # the same elements copied: no view's operators or sink saved (they used to be, each of
    # the 60: thousands of elements)
    assert a["copied"] == b["copied"]
    # and the same structures kept: t's collection alone (the views on o lag, they used to
    # cost one collection kept each, for their uppers)
    assert a["kept"] == b["kept"] == 1
    for cat in (few, many):  # and the views are right
        _oracle(cat)
        assert sorted(cat.sql("SELECT * FROM o0").to_pylist(), key=repr) == \
            sorted(cat.sql(ON_O.format(i=0)).to_pylist(), key=repr)


def test_a_write_saves_what_the_views_reading_it_hold_not_the_others():
    # readers of s: k = 2 with 1 or 40 views on o copy the same; k = 4 copies more
    k2, k2_many, k4 = _catalog(1, 2), _catalog(40, 2), _catalog(1, 4)
    sql = "INSERT INTO s VALUES (2, 8)"
    a, b, c = _cost(k2, sql), _cost(k2_many, sql), _cost(k4, sql)
    assert a["copied"] == b["copied"] and a["kept"] == b["kept"]
    assert c["copied"] > a["copied"] and c["kept"] > a["kept"]


DDL = ["CREATE TABLE z (k BIGINT, v BIGINT)",
       "CREATE MATERIALIZED VIEW zs AS SELECT s.k, max(o.v) AS m FROM s JOIN o ON s.k = o.k GROUP BY s.k",
       "CREATE CONTINUAL TASK zt (k BIGINT) ON INPUT z AS (INSERT INTO zt SELECT k FROM z)",
       "INSERT INTO z VALUES (1, 1)",
       "DROP CONTINUAL TASK zt", "DROP MATERIALIZED VIEW zs", "DROP TABLE z"]


def test_ddl_saves_what_it_touches_not_every_object():
    # Each statement keeps and copies the same with 1 or 60 views elsewhere: the shared
    # arrangements' registry, the inputs a CREATE reads (every object used to be kept, each
    # view's operators and sink copied).
    few, many = _catalog(1, 2), _catalog(60, 2)
    for sql in DDL:
        assert _cost(few, sql) == _cost(many, sql), sql
    _oracle(many)


def test_a_failed_ddl_script_rolls_back_what_its_creates_touched():
    cat, ref = _catalog(2, 4), _catalog(2, 4)
    before = _state(cat)
    with pytest.raises(colmz.sql.SQLError):
        cat.execute("CREATE MATERIALIZED VIEW lo AS SELECT k, min(v) AS m FROM o GROUP BY k; "
                    "CREATE MATERIALIZED VIEW j2 AS SELECT s.k, o.v FROM s JOIN o ON s.k = o.k; "
                    "DROP MATERIALIZED VIEW s1; CREATE MATERIALIZED VIEW bad AS SELECT nope FROM s")
    assert _state(cat) == before
    for sql in [SCRIPT, "CREATE MATERIALIZED VIEW lo AS SELECT k, min(v) AS m FROM o GROUP BY k", *LATER]:
        cat.execute(sql)
        ref.execute(sql)
        assert _state(cat) == _state(ref)
        _oracle(cat)


def _state(cat: colmz.Catalog) -> dict:
    """Every object's contents, upper and since, each view's operators' state (each
    arrangement's rows and bytes), its sink's correction, and the shared arrangements."""
    out = {"now": cat.now, "names": list(cat.names)}
    for name in cat.names:
        o = cat.object(name)
        c = o.collection
        mv = o.maintained
        out[name] = (sorted(cat.read(name).to_pylist()), c.upper, c.since, len(c.times()),
                     None if mv is None else [(type(a).__name__, len(a), a.nbytes) for a in mv.arrangements()],
                     None if mv is None else len(mv.sink.correction))
    eng = cat._engine
    out["shared"] = sorted((str(i), len(eng.shared.get(*i)), eng.shared.get(*i).nbytes) for i in eng.shared)
    return out


def _oracle(cat: colmz.Catalog) -> None:
    """Every view equals its query recomputed (the operators' state was right)."""
    for i in range(len(ON_S)):
        if f"s{i}" in cat:
            got = sorted(cat.sql(f"SELECT * FROM s{i}").to_pylist(), key=repr)
            assert got == sorted(cat.sql(ON_S[i]).to_pylist(), key=repr), f"s{i}"


SCRIPT = "INSERT INTO s VALUES (1, 9), (4, 4); DELETE FROM s WHERE v = 6; INSERT INTO o VALUES (4, 1)"
LATER = ["INSERT INTO s VALUES (1, 1); DELETE FROM s WHERE v = 7", "INSERT INTO o VALUES (2, 2)",
         "DELETE FROM s WHERE k = 1"]


@pytest.mark.parametrize("failing", ["s2", "s3", "o1"])
def test_a_statement_failing_in_a_later_view_rolls_every_view_back(monkeypatch, failing):
    cat, ref = _catalog(2, 4), _catalog(2, 4)
    before = _state(cat)
    stepped = []
    mv = cat.object(failing).maintained
    real = type(mv).step

    def step(self, time, deltas):
        stepped.append(self)
        if self is mv:
            raise RuntimeError(f"injected: {failing}'s step fails")
        return real(self, time, deltas)

    monkeypatch.setattr(type(mv), "step", step)
    with pytest.raises(RuntimeError, match="injected"):
        cat.execute(SCRIPT)
    monkeypatch.undo()
    assert len(stepped) > 1 and stepped[-1] is mv  # views before it were stepped, then it failed
    assert _state(cat) == before
    # and it goes on as the catalog that never ran the script: the operators' state (sums,
    # join arrangements, the shared arrangement of o) was rolled back, not fed twice
    for sql in [SCRIPT, *LATER]:
        cat.execute(sql)
        ref.execute(sql)
        assert _state(cat) == _state(ref)
        _oracle(cat)


def test_a_failed_write_at_now_with_views_puts_the_reopened_commit_back(monkeypatch):
    # time=now reopens the last commit (its views' operators rolled back to before it) and
    # redoes it with a write no view reads; a later view fails while the views of s are fed
    # again: the call leaves the catalog with that commit in place
    cat, ref = _catalog(2, 4), _catalog(2, 4)
    before = _state(cat)
    mv = cat.object("s3").maintained
    real = type(mv).step
    monkeypatch.setattr(type(mv), "step", lambda self, time, deltas: (_ for _ in ()).throw(
        RuntimeError("injected")) if self is mv else real(self, time, deltas))
    with pytest.raises(RuntimeError, match="injected"):
        cat.execute("INSERT INTO t VALUES (5, 5)", time=cat.now)
    monkeypatch.undo()
    assert _state(cat) == before
    for c in (cat, ref):
        c.execute("INSERT INTO t VALUES (5, 5)", time=c.now)
        c.execute(LATER[0])
    assert _state(cat) == _state(ref)
    _oracle(cat)


def _faulty(url):
    from colmz.storage.faults import FaultPlan, FaultyBlob, FaultyConsensus
    from colmz.storage.url import Location, open_location

    loc = open_location(url)
    plan = FaultPlan()
    return Location(FaultyBlob(loc.blob, plan), FaultyConsensus(loc.consensus, plan), loc.url), plan


def test_a_durable_write_failing_at_any_storage_call_leaves_memory_and_storage_unchanged():
    from colmz.storage.base import Determinate

    url = f"mem://saves-{uuid.uuid4().hex}"
    loc, plan = _faulty(url)
    cat = _catalog(2, 4, loc)
    start = plan.calls
    cat.execute(SCRIPT)
    n_calls = plan.calls - start
    assert n_calls > 4
    ref = _catalog(2, 4)
    ref.execute(SCRIPT)
    ref.execute(LATER[0])
    for n in range(1, n_calls + 1):
        url = f"mem://saves-{uuid.uuid4().hex}"
        loc, plan = _faulty(url)
        cat = _catalog(2, 4, loc)
        before, record = _state(cat), cat._store.head_seqno()
        plan.fail_at, plan.mode = plan.calls + n, "before"
        with contextlib.suppress(Determinate):
            cat.execute(SCRIPT)
        failed = plan.injected and plan.injected[0][0] == plan.fail_at
        assert failed, n
        if cat._store.head_seqno() == record:  # the commit did not land: nothing of it kept
            assert _state(cat) == before, n
            cat.execute(SCRIPT)
        cat.execute(LATER[0])
        again = colmz.Catalog(url)  # and the store alone says the same
        assert _state(cat)["now"] == _state(ref)["now"]
        for name in ref.names:
            assert sorted(cat.read(name).to_pylist()) == sorted(ref.read(name).to_pylist()), (n, name)
            assert sorted(again.read(name).to_pylist()) == sorted(ref.read(name).to_pylist()), (n, name)
        _oracle(cat)
        _oracle(again)
