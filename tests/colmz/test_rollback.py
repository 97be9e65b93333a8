"""colmz.rollback: the one idiom for undoing a failed call.

The declaration test walks every class in colmz that declares ``ROLLBACK_FIELDS`` and ties
the declaration to the instance's fields (``vars()`` or ``__slots__``): a field that is
neither declared nor listed here as configuration/scratch fails it, so a new field cannot be
left out of rollbacks silently.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import deque

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import colmz
from colmz.buckets import BucketChain
from colmz.catalog import Catalog
from colmz.continual import MemoryCollection, NegativeMultiplicity, RowCounts, SinkState
from colmz.correction import Correction
from colmz.rollback import (
    Saved,
    covered,
    declared_fields,
    is_covered,
    roll_back,
    save,
    saved_value,
    undone_on_error,
)
from colmz.spine import Spine
from colmz.stage import Stage

# Per class: the fields that are not rolled back, and why they need not be.
NOT_ROLLED_BACK = {
    # configuration and the cumulative work counters
    "Correction": {"chain_proportionality", "chunk_size", "stage_size", "restore_fuel", "work"},
    # configuration, the per-call work scratch, the mass bound grown only after success
    "Spine": {"_effort", "_exert_logic", "_exert_name", "_auto_physical", "_call_work", "_mass_bound"},
    # configuration
    "BucketChain": {"split", "domain_bits"},
    "Stage": set(),
    # set at construction and never changed: the merge's inputs, layout and output buffer
    "_Merge": {"a", "b", "runs", "adv", "lower", "upper", "since", "layout", "out"},
    # the column types, whether its base comes consolidated and what answers counts in it
    # (configuration), and the counters of reads done (work that happened, kept)
    "MemoryCollection": {"_schema", "_base_consolidated", "_base_counts", "stats"},
    # its one field, the arrangement (its work counters are the arrangement's)
    "RowCounts": set(),
    "SinkState": set(),
    # definition and plan, set by the constructor: names, collections (rolled back by their
    # owner, a catalog), statements (compiled) and their union and lifted forms,
    # configuration; its DuckDB side (``duckdb``: the connection and the tables left
    # registered on it, which no roll back touches: rolling them back would make them lie
    # about what is registered)
    "ContinualTask": {"name", "input_name", "input", "references", "output", "schema",
                      "statements", "snapshot", "initial_as_of", "as_of", "reads_input",
                      "compiled", "duckdb", "_union", "_lifted"},
    # its definition
    "CatalogObject": {"name", "kind", "deps", "query", "uses_now",
                      # an empty batch of its columns, made once (an immutable value)
                      "empty"},
    # the catalog's engine: configuration (connection, whether it is driven durably, how views
    # are maintained, where a durable catalog keeps older history), the
    # time a reopen loaded at (set by loading only), and the per-call check of a reopened
    # commit (``_expect``, cleared by every roll back). The durable Catalog around it is
    # not rolled back: its engine, store and mirror of the record are replaced together by
    # a reload, and the mirror changes only once a commit succeeded
    # (tests/colmz/catalog/test_catalog_refresh.py)
    "Engine": {"_views", "_con", "_durable", "_reopened_at", "_expect", "history",
               # the views' load work counters, and the restore hooks set while loading only
               "view_work", "shared_work", "resume_view", "resume_shared",
               # the saves in progress (per-call scratch, emptied as each call ends) and
               # their cumulative work counters
               "_saves", "save_work",
               # which derived objects a commit steps (colmz.catalog.schedule: derived from the
               # objects, changed by DDL, its due times set again by a roll back, built after a
               # load or a roll back of DDL), the objects the running call changed (per-call
               # scratch, emptied as each call begins) and the commits' and the schedule's
               # cumulative work counters
               "_schedule", "_touched", "commit_work", "schedule_work",
               # an index of the definitions, rebuilt whenever the list it was built from is
               # not the engine's (a roll back puts another back) or has grown
               "_def_index"},
}


# colmz.dataflow: each operator's configuration (schemas, keys, aggregates, plans), set by
# its constructor, and cumulative work counters; the sink's collection, whose own calls
# leave it unchanged when they raise.
_ARRANGEMENT_CONFIG = {"schema", "key", "_key_pos", "_val_pos", "_key_specs", "_val_specs", "_key_kinds",
                       "_val_kinds", "rows_inserted", "keys_searched", "rows_found", "search_probes", "rows_indexed",
                       # the runs' key indexes by run serial: derived from runs that never change
                       "_key_index"}
NOT_ROLLED_BACK.update({
    "Clock": set(),
    "KeyedArrangement": _ARRANGEMENT_CONFIG,
    "Accumulators": {"kinds", "rows_inserted", "keys_searched"},
    # colmz.dataflow.fueled: how runs are sized and merged, the fuel (configuration), work
    # counters (its merges in progress are immutable values in the layers tuple)
    "FueledRuns": {"_size", "_begin", "_combine", "_serial", "effort", "min_fuel", "merges", "rows_merged",
                   "last_step_merged", "max_step_merged",
                   # what recent merges were made of: facts (serials are never reused)
                   "lineage"},
    "MapFilter": {"input_schema", "where", "select", "schema", "renames", "passes_through", "rows_consolidated",
                  "_projects"},
    "Union": {"input_schemas", "schema"},
    "Negate": {"schema"},
    # which inputs read shared arrangements (configuration; those are rolled back by the catalog)
    "DeltaJoin": {"input_schemas", "schema", "on", "_key_columns", "_paths", "_shared"},
    # the inner join's arrangements, rolled back in place through the inner join
    "OuterJoin": {"kind", "input_schemas", "schema", "_keys", "_orders", "_arranged", "_shared"},
    "AccumulableReduce": {"input_schema", "group_by", "aggregates", "_group_specs", "schema", "_slices",
                          "_count_slots", "rows_touched"},
    "MinMaxReduce": {"input_schema", "group_by", "aggregates", "_arranged_columns", "_group_specs", "schema",
                     "_shared", "plan", "buckets", "_bucket", "_child", "rows_reduced", "buckets_touched", "easy_groups",
                     "stage_rows"},
    # the catalog's shared arrangements, their users and indexes: all of it state; the
    # entries looked up (a work counter)
    "SharedArrangements": {"entries_examined"},
    "_ByCount": {"schema"},
    # its kept places per group (``_places``: offset + limit, configuration) and work counters
    "TopK": {"schema", "group_by", "order_by", "limit", "offset", "_group_specs", "_val_specs", "_val_index",
             "_empty_layout", "_places", "rows_ranked", "groups_reread"},
    "ViewSink": {"schema", "collection", "rows_consolidated", "rows_passed"},
    "Collation": {"group_by", "input_schemas", "schema", "_group_specs"},
    "CollatedReduce": {"schema"},
    # the plan, its tables and the rendered tree (whose operators are the rolled-back list),
    # its steps in preorder and the tree EXPLAIN prints (configuration, fixed at render)
    "Pipeline": {"plan", "tables", "_root", "schema", "_preorder", "_tree"},
    # a view's definition (schema, inputs, plan, why it is recomputed) and the last commit's
    # work counters (diagnostics), the operators' state structures found once (the same
    # objects, rolled back in place with the operators); its operators, recompute and sink
    # are rolled back in place
    # the ErrorGuard operators found once (the same objects, rolled back in place)
    "MaintainedView": {"schema", "inputs", "plan", "reasons", "uses_now", "last_work", "last_time", "_states",
                       "_guards"},
    # configuration, the evaluation callback, the last recompute's size (a work counter)
    "Recompute": {"schema", "reason", "_evaluate", "rows_recomputed"},
    # its SQL (text, translated), schemas, DuckDB session and runner (configuration), the
    # DuckDB calls made (a work counter)
    "SqlMapFilter": {"input_schema", "where", "select", "sql", "translated", "_run", "_con", "schema", "calls"},
    # its checked columns (configuration) and the values it has checked (a work counter)
    "JsonbCheck": {"schema", "columns", "values_checked"},
    # its columns and message (configuration)
    "ErrorGuard": {"schema", "output", "message"},
    # its rows (configuration); whether it has stepped is its clock
    "Constant": {"schema", "rows"},
    # its bounds, projection and held columns' names (configuration), the rows it has read and
    # the held updates it read back (work counters)
    "TemporalFilter": {"input_schema", "bounds", "select", "schema", "rows_seen", "rows_released", "_names"},
    # its SQL, key and native ranking if recognized (configuration), rows recomputed, ranked
    # and consolidated and DuckDB queries made (work counters)
    "GroupRecompute": {"input_schema", "group_by", "translated", "schema", "rows_recomputed", "queries",
                       "_group_specs", "_val_specs", "_empty_layout", "_key_leads",
                       "_shared", "_in_val_specs", "ranking", "rows_ranked", "rows_consolidated"},
    # a recursion's configuration (its columns, name, kind, bound, the tables its recursive
    # term reads, how to render an instance and the names it reads the working table by)
    # and work counters; its instances, contents and clock are rolled back in place
    "Iterate": {"schema", "name", "distinct", "limit", "tables", "_instance", "_work", "_all", "rows_touched",
                "instances_stepped", "last_instances_stepped"},
})


_DATAFLOW = {"Clock", "KeyedArrangement", "Accumulators", "FueledRuns", "MapFilter", "Union", "Negate", "DeltaJoin", "OuterJoin",
             "AccumulableReduce", "MinMaxReduce", "_ByCount", "TopK", "ViewSink", "Collation", "CollatedReduce",
             "Pipeline", "MaintainedView", "Recompute", "SqlMapFilter", "JsonbCheck", "ErrorGuard", "Constant",
             "TemporalFilter", "GroupRecompute", "SharedArrangements", "Iterate"}


def _dataflow_example(name: str):
    from colmz import dataflow as df
    from colmz.dataflow import plan
    from colmz.dataflow.collate import Collation
    from colmz.dataflow.fueled import FueledRuns, Merge
    from colmz.dataflow.guard import ErrorGuard
    from colmz.dataflow.jsonbcheck import JsonbCheck
    from colmz.dataflow.maintained import Recompute
    from colmz.dataflow.recompute import INPUT_RELATION, GroupRecompute
    from colmz.dataflow.shared import SharedArrangements
    from colmz.dataflow.sqlmap import SqlMapFilter
    from colmz.dataflow.step import Clock
    from colmz.sql.translate import translate

    k = {"k": pa.int64(), "v": pa.int64()}
    return {
        "Clock": Clock,
        "KeyedArrangement": lambda: df.KeyedArrangement(k, ["k"]),
        "Accumulators": lambda: df.Accumulators(["int", "float"]),
        "FueledRuns": lambda: FueledRuns(len, Merge),
        "MapFilter": lambda: df.MapFilter(k, where=[df.IsNull("v")]),
        "Union": lambda: df.Union([k, k]),
        "Negate": lambda: df.Negate(k),
        "DeltaJoin": lambda: df.DeltaJoin([k, {"uk": pa.int64()}], on=[("k", "uk")]),
        "OuterJoin": lambda: df.OuterJoin([k, {"uk": pa.int64()}], on=[("k", "uk")], kind="full"),
        "AccumulableReduce": lambda: df.AccumulableReduce(k, ["k"], {"s": df.Sum("v")}),
        "MinMaxReduce": lambda: df.MinMaxReduce(k, ["k"], {"m": df.Min("v")}),
        "_ByCount": lambda: df.Distinct(k),
        "TopK": lambda: df.TopK(k, ["k"], ["v"], limit=1),
        "ViewSink": lambda: df.ViewSink(k),
        "Collation": lambda: Collation([k, {"k": pa.int64(), "m": pa.int64()}], ["k"]),
        "CollatedReduce": lambda: plan.CollatedReduce(
            k, ("k",), (plan.Aggregate("s", "sum", "v", "accumulable"), plan.Aggregate("m", "max", "v", "hierarchical"))),
        "Pipeline": lambda: plan.render(plan.plan("SELECT k, sum(v) FROM t GROUP BY k", {"t": k})),
        "MaintainedView": lambda: _maintained(k),
        "Recompute": lambda: Recompute(k, "why", lambda t: colmz.Updates.empty(k)),
        "SqlMapFilter": lambda: SqlMapFilter(k, ['"colmz_c0" % 2 = 0'], [('"colmz_c1" + 1', "w")]),
        "JsonbCheck": lambda: JsonbCheck(k, [1]),
        "ErrorGuard": lambda: ErrorGuard(k, k, "boom"),
        "Constant": lambda: df.Constant(k, [(1, 2)]),
        "TemporalFilter": lambda: df.TemporalFilter(k, [df.Bound("v", "<=", 2)]),
        "SharedArrangements": SharedArrangements,
        "GroupRecompute": lambda: GroupRecompute(k, ["k"], translate(f"SELECT k, sum(v) AS s FROM {INPUT_RELATION} GROUP BY k")),
        "Iterate": lambda: plan.render(plan.plan(
            "WITH RECURSIVE c(n) AS (SELECT k FROM t UNION SELECT n + 1 FROM c WHERE n < 3) SELECT n FROM c",
            {"t": k})).operators[1],
    }[name]()


def _maintained(k):
    from colmz.dataflow.maintained import MaintainedView

    schema = (colmz.order.ColumnSpec("k", pa.int64()), colmz.order.ColumnSpec("s", pa.int64()))
    mv = MaintainedView.create("SELECT k, sum(v) AS s FROM t GROUP BY k", schema, {"t": k},
                               MemoryCollection(schema, since=1, upper=1))
    mv.initialize(1, {"t": colmz.Updates({"k": [1], "v": [2]}, time=[1], diff=[1])})
    return mv


def _declaring_classes() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(colmz.__path__, "colmz."):
        if info.name.startswith(("colmz.spark", "colmz.kernels")):
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and "ROLLBACK_FIELDS" in vars(cls):
                found[cls.__name__] = cls
    return found


def _instance_fields(obj) -> set[str]:
    if hasattr(obj, "__dict__"):
        return set(vars(obj))
    return {s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())}


def _example(name: str):
    if name == "_Merge":
        s = Spine(auto_physical=False)
        for t in range(4):
            s.insert(colmz.Updates({"k": [t, 100 + t]}, time=[t, t], diff=[1, 1]), t, t + 1)
        s.set_physical_compaction(4)
        merges = [st for st in s._layers if type(st).__name__ == "_Merge"]
        assert merges, "the example should hold a merge"
        return merges[0]
    if name in _DATAFLOW:
        return _dataflow_example(name)
    if name in ("Engine", "CatalogObject", "ContinualTask"):
        cat = _catalog()
        return {"Engine": cat._engine, "CatalogObject": cat.object("ct"), "ContinualTask": cat.object("ct").task}[name]
    return {"Correction": Correction, "Spine": Spine, "Stage": Stage,
            "BucketChain": lambda: BucketChain([1, 2], lambda b, mid: (b, b, 0), domain_bits=4),
            "MemoryCollection": lambda: MemoryCollection({"k": pa.int64()}),
            "RowCounts": RowCounts, "SinkState": SinkState}[name]()


def _catalog() -> Catalog:
    cat = Catalog()
    cat.execute("CREATE TABLE t (k INT, v INT); CREATE TABLE w (x INT)")
    cat.execute("""CREATE CONTINUAL TASK ct (k INT, v INT) ON INPUT t AS (
        DELETE FROM ct WHERE k IN (SELECT k FROM t);
        INSERT INTO ct SELECT k, max(v) FROM t GROUP BY k)""")
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, count(*) AS n FROM t GROUP BY k")
    cat.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    cat.execute("DELETE FROM t WHERE k = 2")  # a retraction: t's counts() index is built
    return cat


def test_every_declaring_class_is_known_here():
    assert set(_declaring_classes()) == set(NOT_ROLLED_BACK)


def _check_declaration(name, obj):
    fields = _instance_fields(obj)
    declared = set(declared_fields(obj))
    assert declared <= fields, f"{name} declares fields it does not have: {declared - fields}"
    assert fields - NOT_ROLLED_BACK[name] == declared, (
        f"{name}: fields neither declared for rollback nor listed as configuration: "
        f"{fields - NOT_ROLLED_BACK[name] - declared}"
    )


@pytest.mark.parametrize("name", sorted(NOT_ROLLED_BACK))
def test_declared_fields_cover_every_field(name):
    _check_declaration(name, _example(name))


@pytest.mark.parametrize("name", ["MemoryCollection", "ContinualTask", "Engine"])
def test_a_field_added_undeclared_fails_the_declaration_test(name):
    obj = _example(name)
    obj.added_later = 0  # what a new field forgotten in ROLLBACK_FIELDS looks like
    with pytest.raises(AssertionError, match="added_later"):
        _check_declaration(name, obj)


class _Holder:
    ROLLBACK_FIELDS = ("items", "table", "queue", "arr", "inner", "n", "seen")

    def __init__(self):
        self.items = [1, 2]
        self.table = {"a": 1}
        self.queue = deque([3])
        self.arr = np.arange(4)
        self.inner = Stage()
        self.n = 0
        self.seen = {1}


def test_roll_back_copies_containers_and_keeps_shared_structures_in_place():
    h = _Holder()
    inner, arr = h.inner, h.arr
    saved = save(h)
    h.items.append(3)
    h.table["b"] = 2
    h.queue.popleft()
    h.arr[:] = 9
    h.inner.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    h.n = 5
    h.seen.add(2)
    roll_back(h, saved)
    assert h.seen == {1}
    assert (h.items, h.table, list(h.queue), h.arr.tolist(), len(h.inner), h.n) == (
        [1, 2], {"a": 1}, [3], [0, 1, 2, 3], 0, 0)
    assert h.inner is inner and h.arr is arr  # whoever shares them sees the rollback
    h.items.append(7)
    roll_back(h, saved)  # a saved state can be rolled back to again
    assert h.items == [1, 2]


def test_a_container_mixing_plain_and_declaring_elements_saves_the_declaring_ones():
    st = Stage()
    items = [1, "batch", st, 2.0]
    saved = save(_Holder())  # warm: a holder of plain containers
    assert saved.values[0].inner == []
    h = _Holder()
    h.items = items
    saved = save(h)
    st.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    h.items.append(3)
    roll_back(h, saved)
    assert h.items == [1, "batch", st, 2.0] and h.items[2] is st and len(st) == 0


def test_undone_on_error_rolls_back_and_reraises_and_keeps_success():
    h = _Holder()
    with pytest.raises(KeyError), undone_on_error(h) as saved:
        assert isinstance(saved, Saved)
        h.items.append(3)
        raise KeyError("x")
    assert h.items == [1, 2]
    with undone_on_error(h):
        h.items.append(4)
    assert h.items == [1, 2, 4]


def test_errors_name_the_classes():
    with pytest.raises(TypeError, match="int declares no ROLLBACK_FIELDS"):
        save(3)
    with pytest.raises(TypeError, match="a saved Stage cannot roll back a _Holder"):
        roll_back(_Holder(), save(Stage()))


def test_a_failed_spine_call_leaves_merges_in_progress_as_they_were():
    s = Spine(auto_physical=False)
    for t in range(8):
        s.insert(colmz.Updates({"k": [t, 100 + t]}, time=[t, t], diff=[1, 1]), t, t + 1)
    s.set_physical_compaction(8)
    merges = [st for st in s._layers if type(st).__name__ == "_Merge" and st.cursor is not None]
    assert merges, "the example should hold a merge in progress"
    before = [(m.cursor.copy(), m.complete, m.result) for m in merges]
    saved = save(s)
    for _ in range(3):
        s.exert(4)
    roll_back(s, saved)
    after = [(m.cursor, m.complete, m.result) for m in merges]
    for (c0, done0, r0), (c1, done1, r1) in zip(before, after):
        assert c0.tolist() == c1.tolist() and done0 == done1 and r0 is r1
    assert s.check_invariants(deep=True) == []


# ----------------------------------------------------------------------------- the catalog


def _visible(cat: Catalog, keys: bool = True) -> dict:
    """What the declared fields of a catalog, its objects, their collections and tasks show:
    names, now, each collection's frontiers, history and counts index, each task's progress,
    each view's contents."""
    out = {"names": cat.names, "now": cat.now, "at_now": cat._engine._at_now is not None,
           "defs": [{k: v for k, v in d.items() if keys or k != "key"} for d in cat._engine._defs]}
    for name in cat.names:
        o = cat.object(name)
        c = o.collection
        out[name] = {
            "since": c.since, "upper": c.upper, "times": c.times(), "base": c.base_pending,
            "history": c.updates(c.since, None).to_pylist(),
            "counts": None if c._counts is None else [(k.tolist(), d.tolist()) for k, d in c._counts.runs()],
            "contents": None if o.contents is None else o.contents.to_pylist(),
        }
        if o.task is not None:
            t, sk = o.task, o.task._sink
            out[name]["task"] = (
                t._next, t._pending_snapshot_as_of, None if t._view is None else t._view.to_pylist(), dict(t.stats),
                sorted(sk.append_times), sk.append_times_progress, [u.to_pylist() for u in sk.to_append],
                sk.to_append_progress, sk.output_progress)
    return out


@pytest.mark.parametrize(("script", "error"), [
    # the write commits (the task and the view run) before the failing query
    ("INSERT INTO t VALUES (3, 3), (1, 9); SELECT * FROM ct; SELECT * FROM no_such_table", "no_such_table"),
    # two tables written, the task read, then a statement DuckDB refuses while running
    ("INSERT INTO t VALUES (3, 3); INSERT INTO w VALUES (1); SELECT * FROM ct; SELECT CAST('y' AS INT)",
     "invalid input syntax for type integer"),
    # DDL after a commit, then a failing statement: the new object goes too
    ("INSERT INTO t VALUES (4, 4); CREATE TABLE u (x INT); SELECT * FROM no_such_table", "no_such_table"),
    # the view refreshed, then the failure
    ("INSERT INTO t VALUES (5, 5); SELECT * FROM mv; SELECT CAST('x' AS INT)", "invalid input syntax for type integer"),
])
def test_a_failed_execute_leaves_the_catalog_as_it_was(script, error):
    cat = _catalog()
    objects = {n: (cat.object(n), cat.object(n).collection, cat.object(n).task) for n in cat.names}
    before = _visible(cat)
    with pytest.raises(Exception, match=error):
        cat.execute(script)
    assert _visible(cat) == before
    # rolled back in place: the task still writes the collection the catalog holds
    assert {n: (cat.object(n), cat.object(n).collection, cat.object(n).task) for n in cat.names} == objects
    assert cat.object("ct").task.output is cat.object("ct").collection
    # and the catalog goes on as one that never ran the failed script
    ref = _catalog()
    for c in (cat, ref):
        c.execute("INSERT INTO t VALUES (1, 7), (6, 6)")
    assert _visible(cat, keys=False) == _visible(ref, keys=False)  # storage keys are random


def test_a_failed_write_at_now_puts_the_reopened_commit_back():
    # time=now reopens the commit that sealed now (rolled back to the state saved before
    # it); the failing call rolls back to the state it saved first, which holds that commit.
    cat = _catalog()
    before = _visible(cat)
    with pytest.raises(Exception, match="no_such_table"):
        cat.execute("INSERT INTO w VALUES (7); SELECT * FROM w; SELECT * FROM no_such_table", time=cat.now)
    assert _visible(cat) == before
    cat.execute("INSERT INTO w VALUES (7)", time=cat.now)  # the commit can still be joined
    ref = _catalog()
    ref.execute("INSERT INTO w VALUES (7)", time=ref.now)
    assert _visible(cat, keys=False) == _visible(ref, keys=False)
    assert cat.now == 2 and cat.read("w").to_pylist() == [(7, 2, 1)]


def test_a_failed_append_at_now_leaves_the_catalog_and_its_counts_index_as_they_were():
    # The retraction check reads t's counts index (built by _catalog) after the reopened
    # commit rolled it back; the refusal rolls everything back to before the append.
    cat = _catalog()
    before = _visible(cat)
    assert before["t"]["counts"] is not None
    with pytest.raises(NegativeMultiplicity, match="multiplicity -1"):
        cat.append("t", colmz.Updates({"k": [1, 8], "v": [1, 8]}, time=[0, 0], diff=[-2, 1]), time=cat.now)
    assert _visible(cat) == before


# ----------------------------------------------------------------------------- append-only


class _History:
    ROLLBACK_FIELDS = ("log", "n")
    ROLLBACK_APPEND_ONLY = ("log",)

    def __init__(self, n: int = 0):
        self.log = [f"batch {i}" for i in range(n)]
        self.n = n


def test_an_append_only_list_is_saved_as_its_length_and_truncated_back():
    h = _History(3)
    log = h.log
    saved = save(h)
    assert saved.copied == 0
    h.log.extend(["batch 3", "batch 4"])
    h.n = 5
    roll_back(h, saved)
    assert h.log is log and h.log == ["batch 0", "batch 1", "batch 2"] and h.n == 3
    h.log.append("again")  # saved stays usable
    roll_back(h, saved)
    assert h.log == ["batch 0", "batch 1", "batch 2"]


def test_a_rewrite_assigns_a_new_list_and_the_roll_back_puts_the_old_one_back():
    h = _History(3)
    log = h.log
    saved = save(h)
    h.log.append("batch 3")  # appended in place, then rewritten (compaction)
    h.log = ["compacted", *h.log[2:]]
    roll_back(h, saved)
    assert h.log is log and h.log == ["batch 0", "batch 1", "batch 2"]


@pytest.mark.parametrize("breach", ["overwrite the end", "truncate", "insert in front"])
def test_an_in_place_change_other_than_appending_is_refused(breach):
    h = _History(3)
    saved = save(h)
    if breach == "overwrite the end":
        h.log[-1] = "other"
    elif breach == "truncate":
        del h.log[1:]
    else:
        h.log.insert(0, "front")
    with pytest.raises(RuntimeError, match="append-only field 'log'"):
        roll_back(h, saved)


def test_roll_back_with_copy_leaves_the_lists_whole_for_a_later_save():
    # The catalog's join of the commit at now: roll back to before that commit (copies),
    # run, fail, roll back to the state saved at the call's start (which holds the commit).
    h = _History(2)
    before = save(h)
    h.log.append("commit at now")
    at_start = save(h)
    roll_back(h, before, copy=True)
    assert h.log == ["batch 0", "batch 1"]
    h.log.append("the joined commit")
    roll_back(h, at_start)
    assert h.log == ["batch 0", "batch 1", "commit at now"]


def test_exclude_and_the_append_only_declaration_are_checked():
    h = _History(1)
    saved = save(h, exclude=("n",))
    h.n, h.log = 7, []
    roll_back(h, saved)
    assert (h.n, h.log) == (7, ["batch 0"])  # n neither saved nor rolled back
    with pytest.raises(ValueError, match="does not declare"):
        save(h, exclude=("nope",))

    class Bad:
        ROLLBACK_FIELDS = ("a",)
        ROLLBACK_APPEND_ONLY = ("b",)

    with pytest.raises(TypeError, match="undeclared fields"):
        save(Bad())
    h.log = (1, 2)
    with pytest.raises(TypeError, match="must be a list"):
        save(h)


def _collection(times: int) -> MemoryCollection:
    c = MemoryCollection({"k": pa.int64()})
    for t in range(times):
        c.compare_and_append(colmz.Updates({"k": [t]}, time=[t], diff=[1]), t, t + 1)
    c.counts(colmz.Updates({"k": [0]}, time=[0], diff=[1]))  # the counts index, built
    return c


def test_a_save_copies_the_same_elements_whatever_the_history():
    # Work counter: elements a save copies. A collection of 20 or 2,000 times costs the same,
    # as a shallow copy of its history (what a save did before) would not.
    short, long = _collection(20), _collection(2000)
    assert len(long.times()) == 2000
    assert save(short).copied == save(long).copied == 0
    assert saved_value(long._times).copied == 2000  # the copy append-only saves avoid
    # A catalog: its state (objects, their collections and tasks) after 5 or 200 commits.
    costs = []
    for commits in (5, 200):
        cat = _catalog()
        for i in range(commits):
            cat.execute(f"INSERT INTO t VALUES ({i}, {i})")
        # A maintained view's sink holds a correction buffer, empty between commits: its
        # bucket chain (a fixed number of buckets over the time domain, a few more or fewer
        # as its since moves) is saved whole -- bounded, not history: counted apart.
        buffers = [save(cat.object(n).maintained.sink.correction).copied for n in cat.names
                   if cat.object(n).maintained is not None]
        assert buffers and max(buffers) <= 256
        costs.append(save(cat._engine).copied - sum(buffers))
        assert len(cat.object("t").collection.times()) > commits
    assert costs[0] == costs[1]


def test_saved_states_do_not_chain_across_commits():
    # Each in-memory commit keeps the state saved before it (to join it at time=now); that
    # state must not hold the previous commit's saved state, and so on back to the first.
    import gc

    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, Saved) for o in gc.get_objects())

    cat = _catalog()
    for i in range(5):
        cat.execute(f"INSERT INTO t VALUES ({i}, 1)")
    few = alive()
    for i in range(60):
        cat.execute(f"INSERT INTO t VALUES ({i}, 2)")
    assert alive() == few
    assert "_at_now" not in cat._engine._at_now[0].fields


# ----------------------------------------------------------------------------- durable


def _storage(path) -> dict:
    """Every blob (key and bytes) of a store directory and its catalog record's version."""
    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    loc = open_location(str(path))
    blobs = {k: loc.blob.get(k) for k in loc.blob.list_keys()}
    return {"blobs": blobs, "record": CatalogStore(loc).head_seqno()}


def _durable_catalog(path) -> Catalog:
    cat = Catalog(path)  # the in-memory _catalog's objects, on a store
    cat.execute("CREATE TABLE t (k INT, v INT); CREATE TABLE w (x INT)")
    cat.execute("""CREATE CONTINUAL TASK ct (k INT, v INT) ON INPUT t AS (
        DELETE FROM ct WHERE k IN (SELECT k FROM t);
        INSERT INTO ct SELECT k, max(v) FROM t GROUP BY k)""")
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, count(*) AS n FROM t GROUP BY k")
    cat.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    return cat


def _contents(cat: Catalog) -> dict:
    return {"now": cat.now, **{n: sorted(cat.read(n).to_pylist()) for n in cat.names}}


@pytest.mark.parametrize(("script", "error"), [
    # statements fail mid-transaction: after the writes committed in memory and the task ran
    ("INSERT INTO t VALUES (3, 3), (1, 9); SELECT * FROM ct; SELECT * FROM no_such_table", "no_such_table"),
    ("INSERT INTO t VALUES (3, 3); INSERT INTO w VALUES (1); SELECT * FROM mv; SELECT CAST('y' AS INT)",
     "invalid input syntax for type integer"),
    # a rejected column name, after a commit and DDL in the same script
    ("INSERT INTO t VALUES (4, 4); CREATE TABLE u (x INT); CREATE TABLE z (k INT, time INT)",
     "column 'time' is reserved"),
])
def test_a_failed_durable_execute_leaves_memory_and_storage_unchanged(tmp_path, script, error):
    cat = _durable_catalog(tmp_path)
    memory, storage = _visible(cat), _storage(tmp_path)
    with pytest.raises(Exception, match=error):
        cat.execute(script)
    assert _visible(cat) == memory
    assert _storage(tmp_path) == storage
    cat.execute("INSERT INTO t VALUES (1, 7)")  # and it goes on as if never called
    ref = _durable_catalog(tmp_path.parent / f"{tmp_path.name}-ref")  # beside the store, not in it
    ref.execute("INSERT INTO t VALUES (1, 7)")
    assert _contents(Catalog(tmp_path)) == _contents(cat) == _contents(ref)


def test_a_durable_execute_that_loses_every_compare_and_set_keeps_nothing(tmp_path, monkeypatch):
    import colmz.catalog.durable as catalog_mod
    from colmz.storage.state import CommitConflict, StateLog

    monkeypatch.setattr(catalog_mod, "RETRY_BACKOFF", 0.0)
    monkeypatch.setattr(catalog_mod, "RETRIES", 2)
    cat = _durable_catalog(tmp_path)
    record = cat._store.log.key  # the catalog record's consensus key
    contents, storage = _contents(cat), _storage(tmp_path)
    real = StateLog.commit
    lost = []

    def lose(self, expected, state):
        # The record's compare-and-set loses, as if another handle won each time; the
        # intent's blobs are written before it (and must be deleted after).
        if self.key == record:
            lost.append(expected)
            raise CommitConflict(self.key, expected, None)
        return real(self, expected, state)

    monkeypatch.setattr(StateLog, "commit", lose)
    with pytest.raises(CommitConflict):
        cat.execute("INSERT INTO t VALUES (3, 3), (1, 9); INSERT INTO w VALUES (5)")
    assert len(lost) == 3 and cat.stats["retries"] == 2
    # Memory: refreshed from the store before each retry, holding none of the call.
    assert _contents(cat) == contents
    assert _storage(tmp_path) == storage  # the intent's blobs were deleted
    monkeypatch.setattr(StateLog, "commit", real)
    cat.execute("INSERT INTO t VALUES (1, 7)")
    ref = _durable_catalog(tmp_path.parent / f"{tmp_path.name}-ref")  # beside the store, not in it
    ref.execute("INSERT INTO t VALUES (1, 7)")
    assert _contents(Catalog(tmp_path)) == _contents(cat) == _contents(ref)


# ----------------------------------------------------------------------------- a model


_OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.integers(0, 6), min_size=0, max_size=4), st.integers(1, 3)),
    st.tuples(st.just("retract"), st.integers(0, 6), st.integers(1, 3)),
    st.tuples(st.just("advance"), st.integers(0, 3)),
    st.tuples(st.just("counts"), st.integers(0, 6)),
    st.tuples(st.just("snapshot"), st.integers(0, 3)),
), max_size=8)


def _apply(c: MemoryCollection, op) -> None:
    kind = op[0]
    if kind == "append":
        _, ks, step = op
        t = c.upper
        c.compare_and_append(colmz.Updates({"k": pa.array(ks, pa.int64())}, time=[t] * len(ks),
                                           diff=[1] * len(ks)), t, t + step)
    elif kind == "retract":
        _, k, step = op
        t = c.upper
        c.compare_and_append(colmz.Updates({"k": [k]}, time=[t], diff=[-1]), t, t + step)
    elif kind == "advance":
        c.advance_since(max(c.since, min(c.upper - 1, c.since + op[1])))
    elif kind == "counts" and c.upper > c.since:
        c.counts(colmz.Updates({"k": [op[1]]}, time=[0], diff=[1]))
    elif kind == "snapshot" and c.upper > c.since:
        c.snapshot(max(c.since, c.upper - 1 - op[1]))


def _observed(c: MemoryCollection) -> tuple:
    ks = colmz.Updates({"k": list(range(7))}, time=[0] * 7, diff=[1] * 7)
    snaps = [c.snapshot(t).to_pylist() for t in range(c.since, c.upper)]
    return (c.since, c.upper, c.times(), c.updates(0, None).to_pylist(), snaps, c.base_pending,
            c.counts(ks).tolist() if c.upper > c.since else None)


@settings(max_examples=60, deadline=None)
@given(_OPS, _OPS, _OPS, st.booleans())
# the base loaded by a failed read, in front of appends made before the save
@example([("append", [2], 1)], [("snapshot", 0), ("append", [3], 1)], [("counts", 2)], True)
# compaction and the counts index built inside the failed calls
@example([("append", [1], 1), ("append", [1], 2)], [("advance", 2), ("counts", 1)], [("append", [4], 1)], False)
def test_a_collection_rolled_back_is_the_collection_that_never_ran_the_calls(before, failed, after, base):
    # The failed calls (appends, compaction, loading the base, building the counts index)
    # rolled back leave a collection equal, now and under later calls, to one that never ran
    # them; the lists it shares with the saved state are only ever appended to.
    def make():
        if not base:
            return MemoryCollection({"k": pa.int64()})
        return MemoryCollection({"k": pa.int64()}, since=0, upper=1,
                                base=lambda: colmz.Updates({"k": [1, 1, 5]}, time=[0] * 3, diff=[1] * 3))

    c, ref = make(), make()
    for op in before:
        _apply(c, op)
        _apply(ref, op)
    seen = _observed(ref)
    saved = save(c)
    assert saved.copied == 0 or c._counts is not None  # only the counts index's few runs
    for op in failed:
        _apply(c, op)
    roll_back(c, saved)
    assert _observed(c) == seen
    for op in after:
        _apply(c, op)
        _apply(ref, op)
    assert _observed(c) == _observed(ref)


def test_covered_calls_save_nothing_and_leave_the_roll_back_to_the_caller(monkeypatch):
    import colmz.rollback as rollback

    s = Stage()
    outer = save(s)
    calls = []
    real = rollback.save
    monkeypatch.setattr(rollback, "save", lambda obj, exclude=(): calls.append(obj) or real(obj, exclude))
    batch = colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode()
    with pytest.raises(ValueError, match="boom"), covered():
        assert is_covered()
        with undone_on_error(s) as inner:
            assert inner is None
            s.push(batch)
            raise ValueError("boom")
    assert not is_covered() and calls == [] and len(s) == 1  # not rolled back by the inner call
    roll_back(s, outer)
    assert len(s) == 0
    with pytest.raises(ValueError, match="boom"), undone_on_error(s):  # outside: saves, rolls back
        s.push(batch)
        raise ValueError("boom")
    assert calls == [s] and len(s) == 0


def test_saved_without_drops_fields_and_shares_the_rest():
    s = Stage()
    whole = save(s)
    less = whole.without("count")
    assert less.fields == ("parts",) and less.values[0] is whole.values[0]
    s.push(colmz.Updates({"k": [1]}, time=[0], diff=[1]).encode())
    n = s.count
    roll_back(s, less)
    assert s.count == n and not s.parts  # count kept (not saved), parts rolled back
    roll_back(s, whole)
    assert s.count == 0
