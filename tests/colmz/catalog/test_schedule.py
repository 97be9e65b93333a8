"""A commit steps what it touches (``colmz.catalog.schedule``): the readers of what changed,
the views come due, the tasks; every other object lags, logically at ``now + 1``.

Work counters (``Catalog.commit_work``, ``Catalog.save_work``), never the wall clock: a
one-row write to a table no view reads visits and keeps the same whether 1 or 30 views read
other tables. And whatever lags reads, subscribes, joins a commit at ``time=now`` and rolls
back as if its upper had moved at every commit.
"""

from __future__ import annotations

import pytest

import colmz


def _catalog(n: int, views: str = "incremental") -> colmz.Catalog:
    cat = colmz.Catalog(views=views)
    cat.execute("CREATE TABLE t (k BIGINT)")
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i}), (2, 1)")
        cat.execute(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k")
    cat.execute("INSERT INTO t VALUES (0)")
    return cat


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


def _cost(cat: colmz.Catalog, sql: str) -> tuple[dict, dict]:
    visits, saves = cat.commit_work, cat.save_work
    cat.execute(sql)
    return _delta(visits, cat.commit_work), _delta(saves, cat.save_work)


def _rows(cat, query: str, as_of=None) -> list:
    return sorted(tuple(r.values()) for r in cat.sql(query, as_of).to_pylist())


@pytest.mark.parametrize("views", ["incremental", "recompute"])
def test_a_write_no_view_reads_visits_and_keeps_the_same_however_many_views(views):
    few, many = _catalog(1, views), _catalog(30, views)
    a, b = _cost(few, "INSERT INTO t VALUES (1)"), _cost(many, "INSERT INTO t VALUES (1)")
    # t alone: written and kept; no view visited, none of their collections kept (each used
    # to cost its collection kept for its upper, and a look at whether it was idle)
    assert a == b == ({"commits": 1, "tables": 1, "visited": 0, "compared": 0}, {"calls": 1, "kept": 1, "copied": 0})
    # a write one view reads visits that view only
    visits, _ = _cost(many, "INSERT INTO src_7 VALUES (1, 5)")
    assert visits == {"commits": 1, "tables": 1, "visited": 1, "compared": 0}
    assert _rows(many, "SELECT * FROM v_7") == [(1, 12), (2, 1)]


@pytest.mark.parametrize("views", ["incremental", "recompute"])
def test_a_write_at_now_compares_only_the_derived_objects_the_commits_change(views):
    # A write at time=now checks that the derived objects come out at now unchanged: only
    # those the commit it joins changed and those it changes -- every other one has no change
    # at now -- so the check costs the same whether 1 or 30 views read other tables.
    for n in (1, 30):
        cat = _catalog(n, views)
        cat.execute("CREATE TABLE u (k BIGINT); CREATE MATERIALIZED VIEW tv AS SELECT count(*) AS c FROM t")
        visits, _ = _cost(cat, "INSERT INTO t VALUES (5)")  # a commit at now + 1 compares nothing
        assert visits["compared"] == 0
        now = cat.now
        # joining the commit at now would change tv at now: refused (tv compared), nothing changed
        before = cat.commit_work["compared"]
        with pytest.raises(ValueError, match="would revise materialized view 'tv'"):
            cat.execute("INSERT INTO t VALUES (6)", time=now)
        assert cat.commit_work["compared"] - before == 1
        assert cat.now == now and _rows(cat, "SELECT * FROM tv") == [(2,)]
        # a write no derived object reads joins it: tv compared (the joined commit changed it)
        before = cat.commit_work["compared"]
        cat.execute("INSERT INTO u VALUES (1)", time=now)
        assert cat.commit_work["compared"] - before == 1 and cat.now == now
        assert _rows(cat, "SELECT * FROM u") == [(1,)] and _rows(cat, "SELECT * FROM tv") == [(2,)]

    # a view the commit at now did not change but the joined one would: caught too
    cat = _catalog(3, views)
    cat.execute("INSERT INTO t VALUES (1)")
    now = cat.now
    before = cat.commit_work["compared"]
    with pytest.raises(ValueError, match="would revise materialized view 'v_1'"):
        cat.execute("INSERT INTO src_1 VALUES (1, 100)", time=now)
    assert cat.commit_work["compared"] - before == 1
    assert _rows(cat, "SELECT * FROM v_1") == [(1, 1), (2, 1)] and cat.now == now
    before = cat.commit_work["compared"]
    cat.execute("INSERT INTO t VALUES (2)", time=now)  # no derived object reads t: joins
    assert cat.commit_work["compared"] == before and cat.now == now
    assert _rows(cat, "SELECT * FROM t") == [(0,), (1,), (2,)]


def test_lagging_objects_read_and_subscribe_at_the_logical_upper():
    cat = _catalog(3)
    first = cat.now
    sub = cat.subscribe("v_1")
    for i in range(5):
        cat.execute(f"INSERT INTO t VALUES ({10 + i})")
    # the views and their tables lagged through those commits: every read sees now + 1
    assert cat.object("v_1").collection.upper == cat.object("src_2").collection.upper == cat.now + 1
    assert cat.read("v_1").to_pylist() == [(1, 1, cat.now, 1), (2, 1, cat.now, 1)]
    assert cat.read("v_2", as_of=first + 2).to_pylist() == [(1, 2, first + 2, 1), (2, 1, first + 2, 1)]
    assert _rows(cat, "SELECT v_0.s + v_2.s AS x FROM v_0 JOIN v_2 USING (k)") == [(2,), (2,)]
    assert cat.changes("v_1", first + 1, cat.now + 1).to_pylist() == []
    assert [b.to_pylist() for b in sub] == [[(1, 1, first, 1), (2, 1, first, 1)]]
    cat.execute("INSERT INTO src_1 VALUES (2, 4)")  # and a lagging view steps from where it is
    assert [b.to_pylist() for b in sub] == [[(2, 1, cat.now, -1), (2, 5, cat.now, 1)]]
    assert _rows(cat, "SELECT * FROM v_1") == _rows(cat, "SELECT k, sum(v) AS s FROM src_1 GROUP BY k")


def test_views_over_views_and_tasks_step_in_creation_order():
    cat = _catalog(2)
    cat.execute("CREATE MATERIALIZED VIEW w AS SELECT sum(s) AS total FROM v_0")
    cat.execute("CREATE MATERIALIZED VIEW x AS SELECT w.total + count(*) AS y FROM w, v_1 GROUP BY w.total")
    cat.execute("CREATE TABLE log (k BIGINT)")
    cat.execute("CREATE CONTINUAL TASK seen (k BIGINT, s BIGINT) ON INPUT log AS ("
                "INSERT INTO seen SELECT log.k, w.total FROM log, w)")
    for i in range(3):
        cat.execute(f"INSERT INTO t VALUES ({i})")  # w, x, v_1 and the task lag
    visits, _ = _cost(cat, "INSERT INTO src_0 VALUES (1, 10)")
    # v_0, then w, then x (a reader of w); not the task: w is its reference, not its input
    assert visits["visited"] == 3
    assert _rows(cat, "SELECT * FROM w") == [(11,)]  # v_0: (1, 10), (2, 1)
    assert _rows(cat, "SELECT * FROM x") == [(13,)]  # 11 + v_1's two rows
    cat.execute("INSERT INTO t VALUES (9)")  # w lags again
    cat.execute("INSERT INTO log VALUES (7)")  # the task reads w, which lagged
    assert _rows(cat, "SELECT * FROM seen") == [(7, 11)]


def test_a_temporal_view_steps_when_its_flip_comes_due_and_not_before():
    cat = _catalog(5)
    cat.execute("CREATE TABLE ev (k BIGINT)")
    cat.execute("INSERT INTO ev VALUES (8), (11)")
    cat.execute("CREATE MATERIALIZED VIEW live AS SELECT k FROM ev WHERE mz_now() < k")
    visited = []
    while cat.now < 13:
        visits, saves = _cost(cat, "INSERT INTO t VALUES (1)")
        visited.append((cat.now, visits["visited"], saves["kept"]))
        assert _rows(cat, "SELECT * FROM live") == [(k,) for k in (8, 11) if cat.now < k], cat.now
    # visited (and kept: the view and its operators) at the flips' times only
    assert [(now, v) for now, v, _ in visited if v] == [(8, 1), (11, 1)]
    assert {kept for _, v, kept in visited if not v} == {1}  # t's collection alone


def test_a_view_calling_mz_now_is_visited_at_every_commit():
    cat = _catalog(4, views="recompute")
    cat.execute("CREATE MATERIALIZED VIEW clock AS SELECT mz_now() AS t")
    for _ in range(3):
        visits, _ = _cost(cat, "INSERT INTO t VALUES (1)")
        assert visits["visited"] == 1
        assert _rows(cat, "SELECT t FROM clock") == [(cat.now,)]


def test_a_write_at_now_joins_a_commit_that_left_views_lagging():
    cat = _catalog(3)
    cat.execute("INSERT INTO t VALUES (5)")
    # read after the commit at now (moved to now + 1 from its lagging upper)
    assert cat.read("v_2").to_pylist() == [(1, 2, cat.now, 1), (2, 1, cat.now, 1)]
    # joins the commit at now (undone and redone with both writes): the views lag through it
    cat.execute("INSERT INTO t VALUES (6)", time=cat.now)
    assert cat.object("v_2").collection.upper == cat.now + 1
    assert cat.read("v_2").to_pylist() == [(1, 2, cat.now, 1), (2, 1, cat.now, 1)]
    assert _rows(cat, "SELECT * FROM t") == [(0,), (5,), (6,)]
    # a join revising a lagging view's sealed time is refused, everything left as it was
    upper = cat._engine.held("v_0").collection.upper
    with pytest.raises(ValueError, match="would revise materialized view 'v_0'"):
        cat.execute("INSERT INTO src_0 VALUES (1, 100)", time=cat.now)
    assert cat._engine.held("v_0").collection.upper == upper < cat.now + 1
    cat.execute("INSERT INTO t VALUES (7)", time=cat.now)  # the commit at now is still joinable
    cat.execute("INSERT INTO src_0 VALUES (1, 100)")
    assert _rows(cat, "SELECT * FROM v_0") == [(1, 100), (2, 1)]
    assert cat.changes("v_0", cat.now, cat.now + 1).to_pylist() == [(1, 0, cat.now, -1), (1, 100, cat.now, 1)]
    assert _rows(cat, "SELECT * FROM t") == [(0,), (5,), (6,), (7,)]


def test_a_failed_call_leaves_lagging_collections_where_they_were(monkeypatch):
    cat = _catalog(3)
    for i in range(3):
        cat.execute(f"INSERT INTO t VALUES ({i})")
    uppers = {n: cat._engine.held(n).collection.upper for n in cat.names}
    assert uppers["v_1"] < cat.now + 1  # lagging
    now = cat.now
    # a script whose query reads a lagging view (moved to now + 1 mid-call), then fails
    with pytest.raises(colmz.sql.SQLError):
        cat.execute("INSERT INTO src_0 VALUES (1, 1); SELECT * FROM v_1; SELECT * FROM nowhere")
    assert cat.now == now
    assert {n: cat._engine.held(n).collection.upper for n in cat.names} == uppers
    cat.execute("INSERT INTO src_1 VALUES (1, 1)")
    assert _rows(cat, "SELECT * FROM v_1") == [(1, 2), (2, 1)]
    assert _rows(cat, "SELECT * FROM v_0") == [(1, 0), (2, 1)]
