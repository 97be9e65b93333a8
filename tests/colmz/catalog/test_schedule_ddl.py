"""What keeps the schedule (``colmz.catalog.schedule``) and the shared arrangements' registry
(``colmz.dataflow.shared``) costs: DDL and commits pay for what they touch.

Work counters, never the wall clock: ``Engine.schedule_work`` (entries the schedule was built
or changed by) and ``Catalog.save_work`` (elements its save copied) for each DDL statement,
``SharedArrangements.entries_examined`` for a commit's
feed and a DROP's release, ``Catalog.commit_work`` for the continual tasks a commit runs --
each the same with 1 or 30 unrelated objects. And what no longer runs still answers
exactly: tasks against the model run at every time, due times after a failed call.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.continual import ContinualTask, MemoryCollection
from colmz.errors import NegativeMultiplicity


def _catalog(n: int) -> colmz.Catalog:
    """``n`` unrelated groups: a table, a view sharing an arrangement of it (``min``), and a
    continual task on it; then a table ``t`` nothing reads."""
    cat = colmz.Catalog()
    for i in range(n):
        cat.execute(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT); INSERT INTO src_{i} VALUES (1, {i})")
        cat.execute(f"CREATE MATERIALIZED VIEW lo_{i} AS SELECT k, min(v) AS m FROM src_{i} GROUP BY k")
        cat.execute(f"CREATE CONTINUAL TASK log_{i} (k BIGINT) ON INPUT src_{i} AS "
                    f"(INSERT INTO log_{i} SELECT k FROM src_{i})")
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); INSERT INTO t VALUES (0, 0)")
    return cat


DDL = [
    "CREATE TABLE z (k BIGINT, v BIGINT)",
    "CREATE MATERIALIZED VIEW zv AS SELECT k, max(v) AS m FROM z GROUP BY k",
    "CREATE MATERIALIZED VIEW zw AS SELECT m, count(*) AS c FROM zv GROUP BY m",
    "CREATE CONTINUAL TASK zt (k BIGINT) ON INPUT z AS (INSERT INTO zt SELECT k FROM z)",
    "INSERT INTO z VALUES (1, 1)",
    "DROP CONTINUAL TASK zt",
    "DROP MATERIALIZED VIEW zw",
    "CREATE CONTINUAL TASK zt (k BIGINT) ON INPUT zv AS (INSERT INTO zt SELECT k FROM zv)",
    "DROP TABLE z CASCADE",
]


def _schedule_cost(cat: colmz.Catalog, sql: str) -> dict:
    eng = cat._engine
    before, shared, copied = dict(eng.schedule_work), eng.shared.entries_examined, eng.save_work["copied"]
    cat.execute(sql)
    out = {k: eng.schedule_work[k] - before[k] for k in before}
    out["shared_examined"] = eng.shared.entries_examined - shared
    if not sql.startswith("INSERT"):
        # what the call's save copied: nothing (the registry of the n shared arrangements
        # is saved by reference, copy-on-write; it used to be copied, each arrangement too)
        out["copied"] = eng.save_work["copied"] - copied
    return out


def test_ddl_changes_the_schedule_and_saves_what_it_touches_whatever_the_objects_elsewhere():
    few, many = _catalog(1), _catalog(30)
    for cat in (few, many):
        cat.execute("INSERT INTO t VALUES (1, 1)")  # the schedule exists (built once, on first use)
    costs = []
    for sql in DDL:
        a, b = _schedule_cost(few, sql), _schedule_cost(many, sql)
        assert a == b, sql  # flat in the 90 unrelated objects
        assert a["built"] == 0, sql  # changed in place, never built again
        assert a.get("copied", 0) == 0, sql
        costs.append(a["entries"])
    # a CREATE adds its object and its edges (a table 1; zv: 1 + its input as reader and
    # user; zt: 1 + z as reader and user), a DROP removes them; the INSERT changes nothing
    assert costs == [1, 3, 3, 3, 0, 3, 3, 3, 7]
    assert "z" not in many and "zv" not in many and "zt" not in many
    # and the schedule after all that is the one built from scratch
    eng = many._engine
    built = colmz.catalog.schedule.Schedule(eng._order, eng._objects)
    assert eng._scheduled().readers == built.readers and eng._scheduled().users == built.users
    assert [k for k, _ in sorted(eng._scheduled().rank.items(), key=lambda kv: kv[1])] == eng.names


def test_a_commit_feeds_and_a_drop_releases_the_shared_arrangements_of_what_they_touch():
    few, many = _catalog(1), _catalog(30)
    assert len(many._engine.shared) == 30  # one per src_i (by k), each fed at its commits
    for sql in ["INSERT INTO src_0 VALUES (1, -5)", "DROP MATERIALIZED VIEW lo_0",
                "INSERT INTO t VALUES (2, 2)"]:
        assert _schedule_cost(few, sql)["shared_examined"] == _schedule_cost(many, sql)["shared_examined"], sql
    assert len(many._engine.shared) == 29 and len(few._engine.shared) == 0
    assert sorted(many.sql("SELECT * FROM lo_1").to_pylist(), key=repr) == [{"k": 1, "m": 1}]


def _visits(cat: colmz.Catalog, sql: str) -> int:
    before = cat.commit_work["visited"]
    cat.execute(sql)
    return cat.commit_work["visited"] - before


def test_a_commit_runs_the_tasks_whose_input_changed_only():
    few, many = _catalog(1), _catalog(30)
    # a write nothing reads runs no task (every task used to run at every commit)
    assert _visits(few, "INSERT INTO t VALUES (5, 5)") == _visits(many, "INSERT INTO t VALUES (5, 5)") == 0
    # a write to src_3 steps its view and runs its task, nothing else
    assert _visits(many, "INSERT INTO src_3 VALUES (2, 7)") == 2
    # a delete is a change of the input: the task runs, and writes nothing (inserts only)
    assert _visits(many, "DELETE FROM src_3 WHERE k = 2") == 2
    assert sorted(r["k"] for r in many.sql("SELECT * FROM log_3").to_pylist()) == [1, 2]
    # a lagging task reads at now + 1 like any object
    task = many.object("log_5").collection
    assert task.upper == many.now + 1 and many.read("log_5").to_pylist() == [(1, many.now, 1)]


# -- continual tasks triggered by their input: exactly the model run at every time ------------------

TASK = ("CREATE CONTINUAL TASK up (k BIGINT, v BIGINT, w BIGINT) ON INPUT ins AS ("
        "DELETE FROM up WHERE k IN (SELECT k FROM ins); "
        "INSERT INTO up SELECT ins.k, max(ins.v), max(ref.w) FROM ins JOIN ref ON ins.k = ref.k GROUP BY ins.k)")


def _model() -> tuple[dict, ContinualTask]:
    colls = {"ins": MemoryCollection({"k": "bigint", "v": "bigint"}),
             "ref": MemoryCollection({"k": "bigint", "w": "bigint"})}
    task = ContinualTask("up", {"ins": colls["ins"]}, [
        "DELETE FROM up WHERE k IN (SELECT k FROM ins)",
        "INSERT INTO up SELECT ins.k, max(ins.v), max(ref.w) FROM ins JOIN ref ON ins.k = ref.k GROUP BY ins.k",
    ], references={"ref": colls["ref"]}, columns={"k": "bigint", "v": "bigint", "w": "bigint"}, as_of=1)
    return colls, task


# (table, rows, diff) per commit: inserts into the input, reference changes between input
# times, input deletes only, commits touching neither
STEPS = [("ins", [(1, 10), (2, 20)], 1), ("ref", [(1, 100)], 1), ("t", [(0, 0)], 1),
         ("ins", [(1, 11)], 1), ("ref", [(2, 200), (1, 101)], 1), ("ins", [(1, 10)], -1),
         ("t", [(1, 1)], 1), ("ins", [(2, 21), (1, 12), (3, 30)], 1), ("ref", [(3, 300)], 1),
         ("ins", [(3, 31)], 1), ("t", [(2, 2)], 1)]


def test_tasks_run_only_at_input_changes_give_the_model_run_at_every_time():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE ins (k BIGINT, v BIGINT); CREATE TABLE ref (k BIGINT, w BIGINT); "
                "CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute("INSERT INTO t VALUES (9, 9)")  # now = 1
    cat.execute(TASK)
    colls, model = _model()
    model.run()
    ran = []
    for table, rows, diff in STEPS:
        values = ", ".join(f"({a}, {b})" for a, b in rows)
        sql = f"INSERT INTO {table} VALUES {values}" if diff > 0 else \
            f"DELETE FROM {table} WHERE (k, v) IN (VALUES {values})"
        before = cat.object("up").task.stats["times_processed"]
        visits = _visits(cat, sql)
        ran.append(visits)
        t = cat.now
        for name, coll in colls.items():  # the model's collections, every one sealed at every time
            change = colmz.Updates({c.name: [r[i] for r in rows] for i, c in enumerate(coll.schema)},
                                   time=[t] * len(rows), diff=[diff] * len(rows)) if name == table else \
                colmz.Updates.empty(coll.schema)
            coll.compare_and_append(change, coll.upper, t + 1)
        model.run()
        assert cat.read("up").to_pylist() == model.output.snapshot(t).to_pylist(), (t, table)
        assert cat.object("up").task.stats["times_processed"] - before == (1 if table == "ins" and diff > 0 else 0)
    # run at the input's changes (inserts and the delete) only
    assert ran == [1 if table == "ins" else 0 for table, _, _ in STEPS]
    assert cat.changes("up", 2, cat.now + 1).to_pylist() == model.output.updates(2, cat.now + 1).to_pylist()


def test_a_task_reading_a_task_sees_its_write_at_the_same_time():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE ev (k BIGINT); CREATE TABLE t (k BIGINT)")
    cat.execute("CREATE CONTINUAL TASK a (k BIGINT) ON INPUT ev AS (INSERT INTO a SELECT k * 10 FROM ev)")
    cat.execute("CREATE CONTINUAL TASK b (k BIGINT) ON INPUT a AS (INSERT INTO b SELECT k + 1 FROM a)")
    cat.execute("CREATE CONTINUAL TASK c (k BIGINT, n BIGINT) ON INPUT ev AS "
                "(INSERT INTO c SELECT ev.k, count(*) FROM ev, a GROUP BY ev.k)")
    assert _visits(cat, "INSERT INTO t VALUES (1)") == 0
    assert _visits(cat, "INSERT INTO ev VALUES (1), (2)") == 3
    assert _visits(cat, "INSERT INTO t VALUES (1)") == 0
    assert _visits(cat, "INSERT INTO ev VALUES (3)") == 3
    assert sorted(r["k"] for r in cat.sql("SELECT * FROM b").to_pylist()) == [11, 21, 31]
    # c reads a (a reference) at T, with a's write at T: 2 then 3 rows
    assert sorted(tuple(r.values()) for r in cat.sql("SELECT * FROM c").to_pylist()) == [(1, 2), (2, 2), (3, 3)]


# -- roll backs put the schedule's due times back -----------------------------------------------------


def test_a_view_due_at_a_failed_commit_comes_due_at_the_next():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE log (k BIGINT); CREATE TABLE ev (k BIGINT); CREATE TABLE t (k BIGINT)")
    # a task created before the view (stepped first) that fails on a negative input value:
    # its two DELETEs retract one row twice
    cat.execute("CREATE CONTINUAL TASK ct (k BIGINT) ON INPUT log AS (INSERT INTO ct SELECT k FROM log WHERE k > 0; "
                "DELETE FROM ct WHERE k IN (SELECT -k FROM log); DELETE FROM ct WHERE k IN (SELECT -k FROM log))")
    cat.execute("INSERT INTO ev VALUES (4), (6); INSERT INTO log VALUES (1)")
    cat.execute("CREATE MATERIALIZED VIEW live AS SELECT k FROM ev WHERE mz_now() < k")
    while cat.now < 3:
        cat.execute("INSERT INTO t VALUES (0)")
    # the commit at 4 takes live (its flip is due), then fails in ct before stepping it
    with pytest.raises(NegativeMultiplicity):
        cat.execute("INSERT INTO log VALUES (-1)")
    assert cat.now == 3 and cat.sql("SELECT * FROM live").num_rows == 2
    visits = _visits(cat, "INSERT INTO t VALUES (0)")  # at 4: live is due still
    assert visits == 1 and sorted(r["k"] for r in cat.sql("SELECT * FROM live").to_pylist()) == [6]
    # a failed DDL script (the schedule followed its CREATE): built again, and right
    with pytest.raises(colmz.sql.SQLError):
        cat.execute("CREATE MATERIALIZED VIEW w AS SELECT count(*) AS n FROM ev; SELECT * FROM nowhere")
    assert "w" not in cat
    while cat.now < 6:
        cat.execute("INSERT INTO t VALUES (0)")
    assert cat.sql("SELECT * FROM live").num_rows == 0
    assert sorted(r["k"] for r in cat.sql("SELECT * FROM ct").to_pylist()) == [1]


def test_a_write_at_now_joins_a_commit_that_stepped_a_due_view():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE ev (k BIGINT); CREATE TABLE t (k BIGINT)")
    cat.execute("INSERT INTO ev VALUES (3), (5)")
    cat.execute("CREATE MATERIALIZED VIEW live AS SELECT k FROM ev WHERE mz_now() < k")
    while cat.now < 3:
        cat.execute("INSERT INTO t VALUES (0)")  # at 3: live's flip of 3
    cat.execute("INSERT INTO t VALUES (1)", time=cat.now)  # joins it: undone (live too) and redone
    assert sorted(r["k"] for r in cat.sql("SELECT * FROM live").to_pylist()) == [5]
    assert cat.changes("live", 3, 4).to_pylist() == [(3, 3, -1)]
    while cat.now < 5:
        cat.execute("INSERT INTO t VALUES (0)")
    assert cat.sql("SELECT * FROM live").num_rows == 0


# -- the schedule DDL keeps is the one built from scratch ---------------------------------------------

_OPS = st.lists(st.tuples(st.sampled_from(["table", "view", "task", "drop", "cascade", "write", "fail"]),
                          st.integers(0, 7)), min_size=1, max_size=14)


def _built(eng):
    return colmz.catalog.schedule.Schedule(eng._order, eng._objects)


@settings(max_examples=25, deadline=None)
@given(_OPS)
def test_the_schedule_kept_by_ddl_equals_the_one_built_from_the_objects(ops):
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t0 (k BIGINT, v BIGINT); INSERT INTO t0 VALUES (1, 1)")
    for made, (op, i) in enumerate(ops):
        names = cat.names
        pick = names[i % len(names)] if names else None
        try:
            if op == "table":
                cat.execute(f"CREATE TABLE t{made + 1} (k BIGINT, v BIGINT)")
            elif op == "view" and pick is not None:
                cat.execute(f"CREATE MATERIALIZED VIEW v{made + 1} AS SELECT k, count(*) AS v FROM {pick} GROUP BY k")
            elif op == "task" and pick is not None:
                cat.execute(f"CREATE CONTINUAL TASK c{made + 1} (k BIGINT, v BIGINT) ON INPUT {pick} AS "
                            f"(INSERT INTO c{made + 1} SELECT k, v FROM {pick})")
            elif op in ("drop", "cascade") and pick is not None:
                kind = cat.object(pick).kind.upper()
                cat.execute(f"DROP {kind} {pick}{' CASCADE' if op == 'cascade' else ''}")
            elif op == "write":
                tables = [n for n in names if cat.object(n).kind == "table"]
                if tables:
                    cat.execute(f"INSERT INTO {tables[i % len(tables)]} VALUES ({i}, {i})")
            elif op == "fail" and pick is not None:  # a DDL script rolled back
                cat.execute(f"CREATE MATERIALIZED VIEW f AS SELECT * FROM {pick}; SELECT * FROM nowhere")
        except (colmz.sql.SQLError, ValueError, KeyError):
            pass  # refused (a name taken, a view over a view with no k column, RESTRICT): unchanged
        eng = cat._engine
        sched, built = eng._scheduled(), _built(eng)
        assert sched.readers == built.readers and sched.users == built.users
        assert sorted(sched.rank, key=sched.rank.get) == eng.names
        assert sched._due == built._due
