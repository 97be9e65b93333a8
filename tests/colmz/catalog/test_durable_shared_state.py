"""Arrangements shared between views are durable state objects of their own.

Two views of a durable catalog -- a join and a min/max on ``t`` by ``k`` -- share the
catalog's arrangement of ``t`` by ``k`` (``colmz.dataflow.shared``). Neither view exports it
as its state (``colmz.dataflow.state.operator_states`` treats it as a reference): the catalog
keeps it once, named by its ``arrangement_id`` (a record entry of kind ``SHARED_STATE``),
committed in the record's one compare-and-set, and a reopen restores it into the engine's
registry before the views are rendered -- once, holding exactly its relation's rows -- so the
views restore without reading any input (``view_work``, ``shared_work``). Checked against
``views="recompute"`` (the oracle) after reopening at every step of random change scripts;
DROP of one view keeps it, DROP of both removes it from the record; a store without it (or
with it behind) fills it from the relation; a temporal-filter view beside them is rebuilt.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.catalog.durable import SHARED_STATE, VIEW_STATE, Catalog
from colmz.catalog.store import CatalogStore
from colmz.dataflow.shared import arrangement_id
from colmz.dataflow.state import operator_states
from colmz.storage.url import open_location

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLES = "CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w BIGINT)"
VIEWS = {
    "j": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    "m": "SELECT k, min(v) AS lo, max(v) AS hi, count(*) AS n FROM t GROUP BY k",
}
T_BY_K = ("t", ("k",))


def _rows(values) -> str:
    return ", ".join(f"({'NULL' if a is None else a}, {'NULL' if b is None else b})" for a, b in values)


def setup(cats, views=VIEWS):
    for cat in cats:
        cat.execute(TABLES)
        cat.execute(f"INSERT INTO t VALUES {_rows([(1, 5), (1, 7), (2, 3), (None, 4), (3, 3)])}; "
                    f"INSERT INTO u VALUES {_rows([(1, 10), (2, 20), (2, 21), (None, 1)])}")
        for name, q in views.items():
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")


def contents(cat, name) -> Counter:
    return Counter(tuple(r.values()) for r in cat.sql(f"SELECT * FROM {name}").to_pylist())


def record(url: str, kind: str) -> list[dict]:
    return [d for d in CatalogStore(open_location(url)).load()["objects"] if d.get("kind") == kind]


def held(cat, relation: str, key) -> Counter:
    """The shared arrangement's rows, each as often as its multiplicity (``expand`` refuses
    a negative one)."""
    rows = colmz.rows.expand(cat._engine.shared.get(relation, key).snapshot())
    return Counter(zip(*(rows.column(c).to_pylist() for c in rows.column_names)))


def check(cat: Catalog, oracle, views) -> None:
    for name in views:
        assert contents(cat, name) == contents(oracle, name), name
    if views:  # the shared arrangement holds t's rows exactly once (not doubled)
        assert held(cat, *T_BY_K) == contents(cat, "t")
        assert cat._engine.shared.users(*T_BY_K) == len(views)


def reopen(url: str, oracle, views) -> Catalog:
    """Reopen: the views equal the oracle's; every view and shared arrangement was restored,
    reading no input, the arrangement of ``t`` by ``k`` once for both views."""
    cat = Catalog(url)
    check(cat, oracle, views)
    assert cat.view_work == {"initialized": 0, "restored": len(views), "input_rows_read": 0}
    assert cat.shared_work == {"filled": 0, "restored": len(cat._engine.shared)}
    if views:
        # every reader of t by k holds the one restored arrangement
        bases = {id(s.base) for n in views for s in cat.object(n).maintained.shared if s.ident == T_BY_K}
        assert bases == {id(cat._engine.shared.get(*T_BY_K))}
    return cat


# ----------------------------------------------------------------------------- sharing


def test_shared_state_is_one_object_not_the_views():
    url = f"mem://dsh-{uuid.uuid4().hex}"
    cat = Catalog(url)
    setup([cat])
    # the views hold the shared arrangements by reference: never exported as their state
    registry = {id(cat._engine.shared.get(*i)) for i in cat._engine.shared}
    assert len(registry) == 2
    own = {n: operator_states(cat.object(n).maintained.pipeline) for n in VIEWS}
    assert own["j"] == []  # both its inputs' arrangements are shared
    assert own["m"] and not {id(s.target) for s in own["m"]} & registry  # its count's accumulators, ...
    assert {d["view"] for d in record(url, VIEW_STATE)} == {cat.identity("m")}
    shared = record(url, SHARED_STATE)
    assert sorted(d["id"] for d in shared) == sorted([arrangement_id(*T_BY_K), arrangement_id("u", ["k"])])
    assert {d["relation"] for d in shared} == {cat.identity("t"), cat.identity("u")}
    store = CatalogStore(open_location(url))
    store.load()
    upper = store.arrangement(cat.identity("t")).upper
    assert all(store.arrangement(d["key"]).upper == upper for d in shared)
    oracle = colmz.Catalog(views="recompute")
    setup([oracle])
    again = reopen(url, oracle, list(VIEWS))
    assert again.shared_work == {"filled": 0, "restored": 2}
    # a view created after the reopen attaches to the restored arrangement: nothing filled
    again.execute("CREATE MATERIALIZED VIEW x AS SELECT k, max(v) AS hi FROM t GROUP BY k")
    oracle.execute("CREATE MATERIALIZED VIEW x AS SELECT k, max(v) AS hi FROM t GROUP BY k")
    assert again.shared_work["filled"] == 0 and again._engine.shared.users(*T_BY_K) == 3
    again.execute(f"INSERT INTO t VALUES {_rows([(1, 100), (9, 0)])}; DELETE FROM t WHERE k = 2")
    oracle.execute(f"INSERT INTO t VALUES {_rows([(1, 100), (9, 0)])}; DELETE FROM t WHERE k = 2")
    reopen(url, oracle, [*VIEWS, "x"])
    assert len(record(url, SHARED_STATE)) == 2  # still one per shared arrangement


_KEYS = st.one_of(st.none(), st.integers(0, 4))
_VALS = st.one_of(st.none(), st.integers(-3, 9))


@st.composite
def change(draw) -> str:
    """One call: inserts (duplicates, NULLs), deletes, updates, several at once, or a
    statement that fails (the call changes nothing)."""
    def one():
        kind = draw(st.sampled_from(["ins_t", "ins_u", "del_t", "del_u", "upd_t", "bad"]))
        k = draw(st.integers(0, 4))
        if kind == "ins_t":
            return f"INSERT INTO t VALUES {_rows(draw(st.lists(st.tuples(_KEYS, _VALS), min_size=1, max_size=4)))}"
        if kind == "ins_u":
            return f"INSERT INTO u VALUES {_rows(draw(st.lists(st.tuples(_KEYS, _VALS), min_size=1, max_size=3)))}"
        if kind == "del_t":
            return f"DELETE FROM t WHERE k = {k}" if draw(st.booleans()) else "DELETE FROM t WHERE k IS NULL"
        if kind == "del_u":
            return f"DELETE FROM u WHERE k = {k}"
        if kind == "upd_t":
            return f"UPDATE t SET v = v + 1 WHERE k = {k}"
        return "INSERT INTO t VALUES (1, 'not a number')"
    return "; ".join(one() for _ in range(draw(st.integers(1, 3))))


def run(cats, text):
    for cat in cats:
        with contextlib.suppress(colmz.sql.SQLError, ValueError, KeyError):
            cat.execute(text)


@settings(max_examples=us.examples(10), deadline=None)
@given(st.lists(change(), min_size=1, max_size=6), st.lists(st.booleans(), min_size=6, max_size=6))
def test_reopen_after_steps_restores_the_shared_arrangement_once(changes, reopens):
    url = f"mem://dsh-{uuid.uuid4().hex}"
    cat, oracle = Catalog(url), colmz.Catalog(views="recompute")
    setup([cat, oracle])
    cat = reopen(url, oracle, list(VIEWS))
    for text, again in zip(changes, reopens):
        run([cat, oracle], text)
        check(cat, oracle, list(VIEWS))
        if again:
            cat = reopen(url, oracle, list(VIEWS))
    reopen(url, oracle, list(VIEWS))


# ----------------------------------------------------------------------------- DROP


def test_drop_one_view_keeps_the_shared_state_drop_both_removes_it():
    url = f"mem://dsh-{uuid.uuid4().hex}"
    cat, oracle = Catalog(url), colmz.Catalog(views="recompute")
    setup([cat, oracle])
    run([cat, oracle], "DROP MATERIALIZED VIEW j")
    # u by k was the join's only: freed and out of the record; t by k is the min/max's still
    assert [d["id"] for d in record(url, SHARED_STATE)] == [arrangement_id(*T_BY_K)]
    cat = reopen(url, oracle, ["m"])
    assert cat.shared_work == {"filled": 0, "restored": 1}
    run([cat, oracle], f"INSERT INTO t VALUES {_rows([(2, -1), (None, None)])}")
    cat = reopen(url, oracle, ["m"])
    run([cat, oracle], "DROP MATERIALIZED VIEW m")
    assert record(url, SHARED_STATE) == []
    cat = reopen(url, oracle, [])
    assert len(cat._engine.shared) == 0 and cat.shared_work == {"filled": 0, "restored": 0}
    # the hidden arrangements' data is no longer named by the record
    live = {d["key"] for d in CatalogStore(open_location(url)).load()["objects"] if "key" in d}
    assert live == {cat.identity("t"), cat.identity("u")}


# ----------------------------------------------------------------------------- fallback


def test_without_durable_shared_state_it_is_filled_from_the_relation(monkeypatch):
    url = f"mem://dsh-{uuid.uuid4().hex}"
    cat, oracle = Catalog(url), colmz.Catalog(views="recompute")
    # a store written without shared state objects (as before they were kept)
    with monkeypatch.context() as m:
        m.setattr(Catalog, "_shared_moves", staticmethod(lambda engine, store, mirror, defs, lazy, only=None: ([], [], {})))
        setup([cat, oracle])
        run([cat, oracle], f"INSERT INTO t VALUES {_rows([(1, 1), (4, 4)])}")
        assert record(url, SHARED_STATE) == []
    cat = Catalog(url)
    check(cat, oracle, list(VIEWS))
    # the views restore (their own state is there); the arrangements are filled from t and u
    assert cat.view_work["restored"] == 2
    assert cat.shared_work == {"filled": 2, "restored": 0}
    assert cat.view_work["input_rows_read"] == len(cat.read("t")) + len(cat.read("u"))
    assert len(record(url, SHARED_STATE)) == 2  # written whole by the load's commit
    cat = reopen(url, oracle, list(VIEWS))  # now restored
    # a shared state behind its relation (its changes not written) in a record without a
    # catalog-wide upper (format 3: each arrangement at its own upper): filled from t again.
    # (With the record's upper, a lagging state is logically at it: nothing was left out.)
    real_commit = CatalogStore.commit
    with monkeypatch.context() as m:
        m.setattr(Catalog, "_shared_moves",
                  staticmethod(lambda engine, store, mirror, defs, lazy, only=None: (mirror.shared_defs, [], mirror.shared)))
        m.setattr(CatalogStore, "commit", lambda self, objects, moves, upper=None: real_commit(self, objects, moves))
        run([cat, oracle], "DELETE FROM t WHERE k = 1; INSERT INTO u VALUES (4, 40)")
    cat = Catalog(url)
    check(cat, oracle, list(VIEWS))
    assert cat.shared_work == {"filled": 2, "restored": 0}
    run([cat, oracle], f"INSERT INTO t VALUES {_rows([(4, 9), (2, 2)])}")  # steps on
    check(cat, oracle, list(VIEWS))
    reopen(url, oracle, list(VIEWS))


def test_temporal_filter_view_beside_shared_views_is_restored():
    temporal = {"live": "SELECT t.k, t.v FROM t JOIN u ON t.k = u.k WHERE t.v + 3 > mz_now()"}
    url = f"mem://dsh-{uuid.uuid4().hex}"
    cat, oracle = Catalog(url), colmz.Catalog(views="recompute")
    setup([cat, oracle], {**VIEWS, **temporal})
    # resumable: its held flips are its own state, the join's inputs the shared arrangements
    assert [s.name for s in operator_states(cat.object("live").maintained.pipeline)] == ["0.held"]
    for text in ["INSERT INTO t VALUES (1, 9)", "DELETE FROM t WHERE k = 2", "INSERT INTO u VALUES (3, 30)"]:
        run([cat, oracle], text)
        cat = Catalog(url)
        for name in [*VIEWS, "live"]:
            assert contents(cat, name) == contents(oracle, name), (text, name)
        assert held(cat, *T_BY_K) == contents(cat, "t")
        # every view restored, reading no input; the shared arrangements restored once for all three
        assert cat.view_work == {"initialized": 0, "restored": 3, "input_rows_read": 0}, cat.view_work
        assert cat.shared_work == {"filled": 0, "restored": 2}
        assert cat._engine.shared.users(*T_BY_K) == 3
