"""``colmz.ContinualTask``: worked examples, upstream vectors, edge cases, restarts, oracle."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.continual import (
    ContinualTask,
    Delete,
    Insert,
    MemoryCollection,
    NegativeMultiplicity,
    RowCounts,
    SinkState,
    UpperMismatch,
)
from colmz.frontier import MAX_TIME
from colmz.rollback import roll_back, save

KV = {"key": pa.int64(), "val": pa.int64()}


def kv(rows, t, diff=1):
    """Updates of (key, val) rows at time t."""
    diffs = [diff] * len(rows) if isinstance(diff, int) else diff
    return colmz.Updates(
        {"key": pa.array([r[0] for r in rows], pa.int64()), "val": pa.array([r[1] for r in rows], pa.int64())},
        time=[t] * len(rows), diff=diffs,
    )


def push(coll, t, updates=None):
    """Append updates at time t to coll (empty times in between) and seal t."""
    updates = updates if updates is not None else colmz.Updates.empty(coll.schema)
    coll.compare_and_append(updates, coll.upper, t + 1)


def contents(coll, t):
    return sorted((r[:-2], r[-1]) for r in coll.snapshot(t).to_pylist())


def rows(coll, t):
    out = []
    for *data, _, d in coll.snapshot(t).to_pylist():
        out += [tuple(data)] * d
    return sorted(out)


UPSERT_SQL = [
    "DELETE FROM upsert WHERE key IN (SELECT key FROM append_only)",
    "INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key",
]


def upsert_callables():
    def delete(ins, refs, me):
        keys = set(ins["append_only"].column("key").to_pylist())
        return me.filter(pa.array([k in keys for k in me.column("key").to_pylist()], pa.bool_()))

    def insert(ins, refs, me):
        return ins["append_only"].group_by("key").aggregate([("val", "max")])

    return [Delete(delete), Insert(insert)]


# ----------------------------------------------------------------------------- worked examples


@pytest.mark.parametrize("form", ["sql", "callables"])
def test_upsert_worked_example(form):
    # The UPSERT table: times 1..4 with time 3 carrying no input, then (3, 8).
    inp = MemoryCollection(KV)
    body = UPSERT_SQL if form == "sql" else upsert_callables()
    task = ContinualTask("upsert", {"append_only": inp}, body, columns=KV, as_of=0)
    push(inp, 0)
    push(inp, 1, kv([(1, 2), (1, 1)], 1))
    task.run()
    assert rows(task.output, 1) == [(1, 2)]
    push(inp, 2, kv([(1, 3), (2, 4)], 2))
    task.run()
    assert rows(task.output, 2) == [(1, 3), (2, 4)]
    push(inp, 3)
    task.run()
    assert task.output.upper == 4 and 3 not in task.output.times()
    assert rows(task.output, 3) == [(1, 3), (2, 4)]
    push(inp, 4, kv([(1, 5), (2, 6), (3, 7)], 4))
    task.run()
    assert rows(task.output, 4) == [(1, 5), (2, 6), (3, 7)]
    push(inp, 5, kv([(3, 8)], 5))
    task.run()
    assert rows(task.output, 5) == [(1, 5), (2, 6), (3, 8)]
    # The documented "bug": last batch wins per key; deletes in the input do nothing.
    push(inp, 6, kv([(1, 0)], 6))
    push(inp, 7, kv([(2, 6)], 7, -1))
    task.run()
    assert rows(task.output, 7) == [(1, 0), (2, 6), (3, 8)]
    assert task.output.times() == [1, 2, 4, 5, 6]


def test_audit_log_worked_example():
    # anomalies (an MV in the example) changes: T1 +5; T2 -5 +7; T3 none; T4 +9.
    anomalies = MemoryCollection({"count": pa.int64()})
    push(anomalies, 0)
    task = ContinualTask("audit_log", {"anomalies": anomalies},
                         ["INSERT INTO audit_log SELECT * FROM anomalies"],
                         columns={"count": "INT8"})
    one = lambda vals, t, d: colmz.Updates({"count": pa.array(vals, pa.int64())}, time=[t] * len(vals), diff=d)  # noqa: E731
    push(anomalies, 1, one([5], 1, [1]))
    push(anomalies, 2, one([5, 7], 2, [-1, 1]))
    push(anomalies, 3)
    push(anomalies, 4, one([9], 4, [1]))
    task.run()
    log = lambda t: sorted(r[0] for r in rows(task.output, t))  # noqa: E731
    assert [log(t) for t in (1, 2, 3, 4)] == [[5], [5, 7], [5, 7], [5, 7, 9]]
    assert sorted(r[0] for r in rows(anomalies, 4)) == [7, 9]
    assert task.output.times() == [1, 2, 4]


# ----------------------------------------------------------------------------- upstream vector


def test_ct_sink_state_vector():
    # src/compute/src/render/continual_task.rs, test ct_sink_state, as data.
    def data(pairs):
        return colmz.Updates({"k": [p[0] for p in pairs]}, time=[p[1] for p in pairs],
                             diff=[p[2] for p in pairs])

    def write(s, upper, keys):
        r = s.process()
        assert r is not None, "expected a write"
        new_upper, u = r
        assert new_upper == upper
        assert ([] if u is None else [row[0] for row in u.to_pylist()]) == keys

    s = SinkState()
    assert s.process() is None
    s.to_append.append(data([("a", 1, 1), ("b", 1, 1)]))
    assert s.process() is None
    s.to_append_progress = 2
    assert s.process() is None
    s.append_times.add(1)
    assert s.process() is None
    s.append_times.add(0)  # out of order; also the == case of time vs progress
    assert s.process() is None
    s.append_times_progress = 3
    write(s, 1, [])
    s.output_progress = 1
    write(s, 2, ["a", "b"])
    s.output_progress = 2
    write(s, 3, [])
    s.output_progress = 3
    assert s.process() is None
    s.append_times.add(5)
    s.append_times_progress = 6
    write(s, 5, [])
    s.output_progress = 5
    s.to_append.append(data([("a", 5, -1), ("c", 5, 1)]))
    s.to_append_progress = 6
    write(s, 6, ["b", "c"])


# ----------------------------------------------------------------------------- edge cases


def _copy_task(inp, snapshot, as_of, body=("INSERT INTO ct SELECT * FROM inp",)):
    return ContinualTask("ct", {"inp": inp}, list(body), columns=KV, snapshot=snapshot, as_of=as_of)


@pytest.mark.parametrize("snapshot", [True, False])
def test_snapshot_modes_at_initial_as_of(snapshot):
    inp = MemoryCollection(KV)
    push(inp, 3, kv([(1, 1)], 1))
    push(inp, 5, kv([(2, 2)], 5))  # a write exactly at I = 5
    task = _copy_task(inp, snapshot, 5)
    assert task.output.upper == 5  # bootstrap [0] -> [I]
    push(inp, 6, kv([(3, 3)], 6))
    task.run()
    if snapshot:
        assert rows(task.output, 5) == [(1, 1), (2, 2)]
        assert task.output.times() == [5, 6]
    else:
        assert rows(task.output, 5) == []
        assert task.output.times() == [6]
    assert rows(task.output, 6)[-1] == (3, 3)
    assert task.output.upper == 7


def test_empty_output_bootstrap_before_input_is_ready():
    inp = MemoryCollection(KV)  # upper 0: nothing complete
    task = _copy_task(inp, True, 4)
    assert task.output.upper == 4 and len(task.output.snapshot(3)) == 0
    task.run()
    assert task.output.upper == 4  # waits for the input
    push(inp, 4, kv([(1, 1)], 4))
    task.run()
    assert rows(task.output, 4) == [(1, 1)]


def test_self_reference_at_initial_time_is_empty():
    inp = MemoryCollection(KV)
    push(inp, 0, kv([(1, 1)], 0))
    seen = []

    def ins(i, r, me):
        seen.append(me.num_rows)
        return i["inp"]

    task = ContinualTask("ct", {"inp": inp}, [Insert(ins)], columns=KV, as_of=0)
    task.run()
    push(inp, 1, kv([(2, 2)], 1))
    task.run()
    assert seen == [0, 1]
    # A SQL self-reference too: count of own rows as of T-1.
    inp2 = MemoryCollection(KV)
    push(inp2, 0, kv([(1, 1)], 0))
    t2 = ContinualTask("ct", {"inp": inp2},
                       ["INSERT INTO ct SELECT key, (SELECT count(*) FROM ct) FROM inp"], columns=KV, as_of=0)
    t2.run()
    push(inp2, 1, kv([(2, 0)], 1))
    t2.run()
    assert rows(t2.output, 1) == [(1, 0), (2, 1)]


def test_input_deletions_are_ignored_and_duplicates_keep_multiplicity():
    inp = MemoryCollection(KV)
    task = _copy_task(inp, True, 0)
    push(inp, 1, kv([(1, 1), (1, 1), (2, 2)], 1, [1, 2, 1]))
    push(inp, 2, kv([(1, 1)], 2, -3))
    push(inp, 3, kv([(3, 3), (3, 3)], 3, [-1, 2]))  # consolidates to +1 at 3
    task.run()
    assert contents(task.output, 2) == [((1, 1), 3), ((2, 2), 1)]
    assert contents(task.output, 3) == [((1, 1), 3), ((2, 2), 1), ((3, 3), 1)]
    assert task.output.times() == [1, 3]


def test_references_changing_between_input_times_write_nothing():
    inp = MemoryCollection(KV)
    small = MemoryCollection({"key": pa.int64(), "name": pa.string()})
    push(inp, 0)
    push(small, 0, colmz.Updates({"key": [1], "name": ["v0"]}, time=[0], diff=[1]))
    task = ContinualTask("stj", {"big": inp},
                         ["INSERT INTO stj SELECT b.key, s.name FROM big b JOIN small s ON b.key = s.key"],
                         references={"small": small}, as_of=0)
    push(inp, 1, kv([(1, 0)], 1))
    push(small, 1)
    task.run()
    upd = colmz.Updates({"key": [1, 1], "name": ["v0", "v1"]}, time=[2, 2], diff=[-1, 1])
    push(small, 2, upd)
    push(inp, 2)
    task.run()
    assert task.output.times() == [1] and task.output.upper == 3
    push(inp, 3, kv([(1, 0)], 3))
    push(small, 3)
    task.run()
    assert rows(task.output, 3) == [(1, "v0"), (1, "v1")]


def test_reference_must_be_complete_before_a_time_is_processed():
    inp = MemoryCollection(KV)
    ref = MemoryCollection(KV)
    task = ContinualTask("ct", {"inp": inp}, ["INSERT INTO ct SELECT * FROM ref WHERE EXISTS (SELECT 1 FROM inp)"],
                         references={"ref": ref}, columns=KV, as_of=0)
    push(inp, 0)
    push(inp, 1, kv([(1, 1)], 1))
    push(ref, 0)
    task.run()
    assert task.output.upper == 1  # ref complete only below 1
    push(ref, 1, kv([(9, 9)], 1))  # a reference write at T is seen at T
    task.run()
    assert rows(task.output, 1) == [(9, 9)]


def test_two_deletes_of_one_row_raise_and_change_nothing():
    inp = MemoryCollection(KV)
    task = ContinualTask("ct", {"inp": inp}, [
        "INSERT INTO ct SELECT * FROM inp WHERE key = 1",
        "DELETE FROM ct WHERE key IN (SELECT key - 1 FROM inp WHERE key = 2)",
        "DELETE FROM ct WHERE val = 7 AND key IN (SELECT 1 FROM inp WHERE key = 2)",
    ], columns=KV, as_of=0)
    push(inp, 1, kv([(1, 7)], 1))
    task.run()
    push(inp, 2, kv([(2, 0)], 2))
    before = (task.output.upper, task.output.times())
    with pytest.raises(NegativeMultiplicity, match="multiplicity -1"):
        task.run()
    assert (task.output.upper, task.output.times()) == before
    # The sequential reading lets the second DELETE see the first's change.
    inp2 = MemoryCollection(KV)
    seq = ContinualTask("ct", {"inp": inp2}, [
        "INSERT INTO ct SELECT * FROM inp WHERE key = 1",
        "DELETE FROM ct WHERE key IN (SELECT key - 1 FROM inp WHERE key = 2)",
        "DELETE FROM ct WHERE val = 7 AND key IN (SELECT 1 FROM inp WHERE key = 2)",
    ], columns=KV, as_of=0, statements="sequential")
    push(inp2, 1, kv([(1, 7)], 1))
    push(inp2, 2, kv([(2, 0)], 2))
    seq.run()
    assert rows(seq.output, 2) == []


def test_insert_then_delete_of_the_same_row_is_independent():
    inp = MemoryCollection(KV)
    body = ["INSERT INTO ct SELECT * FROM inp", "DELETE FROM ct WHERE key IN (SELECT key FROM inp)"]
    task = ContinualTask("ct", {"inp": inp}, body, columns=KV, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    task.run()
    # The DELETE sees O@0 = {} so the insert stands.
    assert rows(task.output, 1) == [(1, 1)]
    push(inp, 2, kv([(1, 1)], 2))
    task.run()
    # Now the DELETE removes the old (1, 1) and the INSERT adds a new one.
    assert rows(task.output, 2) == [(1, 1)]
    # Sequentially, the DELETE also sees the INSERT of the same time.
    inp2 = MemoryCollection(KV)
    seq = ContinualTask("ct", {"inp": inp2}, body, columns=KV, as_of=0, statements="sequential")
    push(inp2, 1, kv([(1, 1)], 1))
    seq.run()
    assert rows(seq.output, 1) == []


def test_delete_of_an_absent_row_contributes_nothing():
    inp = MemoryCollection(KV)
    task = ContinualTask("ct", {"inp": inp}, ["DELETE FROM ct WHERE key IN (SELECT key FROM inp)"],
                         columns=KV, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    task.run()
    assert rows(task.output, 1) == [] and task.output.upper == 2


def test_callable_delete_of_rows_not_held_raises():
    inp = MemoryCollection(KV)
    task = ContinualTask("ct", {"inp": inp}, [Delete(lambda i, r, me: i["inp"])], columns=KV, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    with pytest.raises(NegativeMultiplicity, match="does not hold"):
        task.run()
    assert task.output.upper == 1


def test_statements_that_never_read_the_input_never_write():
    inp = MemoryCollection(KV)
    task = ContinualTask("ct", {"inp": inp}, ["INSERT INTO ct SELECT 1::INT8, 2::INT8"], columns=KV, as_of=0)
    assert not task.reads_input
    push(inp, 3, kv([(1, 1)], 1))
    task.run()
    assert task.output.times() == [] and task.output.upper == 4


def test_reference_to_another_task_sees_its_write_at_the_same_time():
    inp = MemoryCollection(KV)
    first = ContinualTask("first", {"inp": inp}, ["INSERT INTO first SELECT * FROM inp"], columns=KV, as_of=0)
    second = ContinualTask("second", {"inp": inp}, ["INSERT INTO second SELECT * FROM first WHERE EXISTS (SELECT 1 FROM inp)"],
                           references={"first": first.output}, columns=KV, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    first.run()
    second.run()
    assert rows(second.output, 1) == [(1, 1)]
    push(inp, 2, kv([(2, 2)], 2))
    second.run()  # `first` has not written at 2 yet: second must wait
    assert second.output.upper == 2
    first.run()
    second.run()
    assert rows(second.output, 2) == [(1, 1), (1, 1), (2, 2)]


def test_two_replicas_racing_write_each_time_once():
    inp = MemoryCollection(KV)
    out = MemoryCollection(KV)
    a = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, output=out, as_of=0)
    b = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, output=out, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    push(inp, 2, kv([(1, 2)], 2))
    a.run()
    b.run()
    assert b.stats["times_processed"] == 0 and b.stats["writes"] == 0
    push(inp, 3, kv([(2, 5)], 3))
    b.run()
    a.run()
    assert a.stats["times_processed"] == 2 and b.stats["times_processed"] == 1  # b wrote 3
    assert rows(out, 3) == [(1, 2), (2, 5)]
    assert out.times() == [1, 2, 3]


def test_guard_rails():
    inp = MemoryCollection(KV)
    with pytest.raises(ValueError, match="not allowed to be its input"):
        ContinualTask("inp", {"inp": inp}, [Insert(lambda i, r, m: i["inp"])], columns=KV)
    with pytest.raises(ValueError, match="not allowed to be its input"):
        ContinualTask("ct", {"inp": inp}, [Insert(lambda i, r, m: i["inp"])], columns=KV, output=inp)
    with pytest.raises(ValueError, match="exactly one"):
        ContinualTask("ct", {"a": inp, "b": inp}, [], columns=KV)
    with pytest.raises(colmz.SchemaError, match="query columns did not match"):
        ContinualTask("ct", {"inp": inp}, ["INSERT INTO ct SELECT * FROM inp"], columns={"key": "BOOL", "val": "INT8"})
    with pytest.raises(colmz.SchemaError, match="query columns did not match"):
        ContinualTask("ct", {"inp": inp}, ["INSERT INTO ct SELECT key FROM inp"], columns=KV)
    with pytest.raises(ValueError, match="statements must be"):
        ContinualTask("ct", {"inp": inp}, [], columns=KV, statements="fixpoint")
    with pytest.raises(ValueError, match="writes only its output"):
        ContinualTask("ct", {"inp": inp}, ["INSERT INTO other SELECT * FROM inp"], columns=KV)
    with pytest.raises(ValueError, match="columns= is required"):
        ContinualTask("ct", {"inp": inp}, [Insert(lambda i, r, m: i["inp"])])
    # A callable returning the wrong columns fails at its time, writing nothing.
    task = ContinualTask("ct", {"inp": inp}, [Insert(lambda i, r, m: i["inp"].select(["key"]))],
                         columns=KV, as_of=0)
    push(inp, 1, kv([(1, 1)], 1))
    with pytest.raises(colmz.SchemaError):
        task.run()
    assert task.output.upper == 1


def test_time_past_the_last_raises_overflow():
    inp = MemoryCollection(KV)
    task = _copy_task(inp, True, MAX_TIME - 1)
    inp.compare_and_append(kv([(1, 1)], MAX_TIME - 1), 0, MAX_TIME)
    task.run()
    assert rows(task.output, MAX_TIME - 1) == [(1, 1)]
    inp.compare_and_append(kv([(2, 2)], MAX_TIME), MAX_TIME, None)
    with pytest.raises(OverflowError, match="2\\*\\*64-1"):
        task.run()
    assert task.output.upper == MAX_TIME and task.output.times() == [MAX_TIME - 1]


def test_compare_and_append_checks_the_upper():
    c = MemoryCollection(KV)
    with pytest.raises(UpperMismatch) as e:
        c.compare_and_append(kv([], 0), 3, 4)
    assert e.value.current == 0
    with pytest.raises(ValueError, match="outside"):
        c.compare_and_append(kv([(1, 1)], 5), 0, 5)
    with pytest.raises(ValueError, match="not complete"):
        c.snapshot(0)


# ----------------------------------------------------------------------------- restarts


def _history(n_times, per_time=3):
    inp = MemoryCollection(KV)
    for t in range(1, n_times + 1):
        push(inp, t, kv([(t % 5, t)] * per_time, t))
    return inp


@pytest.mark.parametrize("history", [20, 400])
def test_restart_reads_output_snapshot_and_new_input_only(history):
    inp = _history(history)
    task = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, columns=KV, as_of=0)
    task.run()
    out = task.output
    assert out.upper == history + 1
    # Restart: the input gets three more times; the new task reads O@A once and the input
    # from A + 1 on, and never replays a snapshot.
    out.advance_since(history)  # compaction, as a durable output's would be
    inp.stats.update(updates_read=0, reads=0)
    out.stats.update(updates_read=0, reads=0)
    restarted = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, output=out)
    assert restarted.initial_as_of is None and restarted.as_of == history
    for t in range(history + 1, history + 4):
        push(inp, t, kv([(7, t)], t))
    restarted.run()
    assert inp.stats["updates_read"] == 3  # the three new updates, whatever the history
    assert out.stats["reads"] == 1 and out.stats["updates_read"] == 5  # O@A: the 5 keys
    assert out.times()[-3:] == [history + 1, history + 2, history + 3]
    assert rows(out, history + 3)[-1] == (7, history + 3)


def test_restart_with_nothing_new_writes_nothing_and_keeps_state():
    inp = _history(5)
    task = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, columns=KV, as_of=0)
    task.run()
    before = rows(task.output, 5)
    again = ContinualTask("upsert", {"append_only": inp}, UPSERT_SQL, output=task.output, snapshot=True)
    again.run()
    assert again.stats["times_processed"] == 0 and rows(task.output, 5) == before


# ----------------------------------------------------------------------------- oracle

def _summed(pairs):
    out = Counter()
    for row, m in pairs:
        out[row] += m
    return out


# Statements over inp(key, val), ref(key, val) and the output ct(key, val): SQL for the task,
# a Counter function for the model (rows of the input at T, ref at T, output at T-1).
POOL = {
    "copy": ("INSERT INTO ct SELECT key, val FROM inp",
             lambda i, r, o: (+1, Counter(i)), True),
    "del_keys": ("DELETE FROM ct WHERE key IN (SELECT key FROM inp)",
                 lambda i, r, o: (-1, Counter({row: m for row, m in o.items() if row[0] in {k for k, _ in i}})), True),
    "max": ("INSERT INTO ct SELECT key, max(val) FROM inp GROUP BY key",
            lambda i, r, o: (+1, Counter({(k, max(v for kk, v in i if kk == k)): 1 for k, _ in i})), True),
    "join": ("INSERT INTO ct SELECT i.key, f.val FROM inp i JOIN ref f ON i.key = f.key",
             lambda i, r, o: (+1, _summed(((a[0], b[1]), m * n) for a, m in i.items() for b, n in r.items() if a[0] == b[0])), True),
    "del_big": ("DELETE FROM ct WHERE val > 5",
                lambda i, r, o: (-1, Counter({row: m for row, m in o.items() if row[1] > 5})), False),
    "self": ("INSERT INTO ct SELECT key, val + 1 FROM ct WHERE key IN (SELECT key FROM inp)",
             lambda i, r, o: (+1, Counter({(row[0], row[1] + 1): m for row, m in o.items() if row[0] in {k for k, _ in i}})), True),
    "distinct": ("INSERT INTO ct SELECT DISTINCT key, 0::INT8 FROM inp",
                 lambda i, r, o: (+1, Counter({(k, 0): 1 for k, _ in i})), True),
}


def naive(input_hist, ref_hist, start, snapshot, names, mode, end, pool=None):
    """Re-evaluate every statement (of ``pool``, :data:`POOL` by default) over the full
    histories at every time: the output at each time, and the time a multiplicity would go
    negative (None: none does)."""
    pool = POOL if pool is None else pool
    out, history = Counter(), {}
    reads = any(pool[n][2] for n in names)
    for t in range(start, end):
        x = Counter()
        for s, ch in input_hist.items():
            if (s <= t if (t == start and snapshot) else s == t):
                x.update(ch)
        if t == start and not snapshot:
            x = Counter()
        ins = Counter({row: m for row, m in x.items() if m > 0})
        if not ins or not reads:
            history[t] = Counter(out)
            continue
        ref = Counter()
        for s, ch in ref_hist.items():
            if s <= t:
                ref.update(ch)
        ref = Counter({k: v for k, v in ref.items() if v})
        delta, view = Counter(), Counter(out)
        for n in names:
            sign, rows_ = pool[n][1](ins, ref, view if mode == "sequential" else out)
            for row, m in rows_.items():
                delta[row] += sign * m
                if mode == "sequential":
                    view[row] += sign * m
            if mode == "sequential" and any(v < 0 for v in view.values()):
                return history, t
        new = Counter(out)
        for row, m in delta.items():
            new[row] += m
        if any(v < 0 for v in new.values()):
            return history, t
        out = Counter({k: v for k, v in new.items() if v})
        history[t] = Counter(out)
    return history, None


changes = st.dictionaries(
    st.tuples(st.integers(0, 3), st.integers(0, 9)), st.sampled_from([-1, 1, 1, 2]), max_size=4
)


def _output(backend, url):
    """The task's output: in memory, or a durable Arrangement reopened from ``url``."""
    if backend == "memory":
        return None
    from colmz.arrangement import Arrangement
    from colmz.catalog import ArrangementCollection

    return ArrangementCollection(Arrangement.open(url, KV, name="ct"))


@pytest.mark.parametrize("backend", ["memory", "arrangement"])
@settings(max_examples=20)
@given(
    names=st.lists(st.sampled_from(sorted(POOL)), min_size=1, max_size=3),
    mode=st.sampled_from(["independent", "sequential"]),
    snapshot=st.booleans(),
    start=st.integers(0, 2),
    input_hist=st.dictionaries(st.integers(0, 8), changes, max_size=7),
    ref_hist=st.dictionaries(st.integers(0, 8), st.dictionaries(
        st.tuples(st.integers(0, 3), st.integers(0, 9)), st.just(1), max_size=2), max_size=4),
    restarts=st.sets(st.integers(1, 9), max_size=3),
    runs=st.sets(st.integers(0, 9), max_size=6),
)
def test_oracle_random_tasks_with_restarts(backend, names, mode, snapshot, start, input_hist, ref_hist,
                                          restarts, runs):
    import uuid

    url = f"mem://ct-oracle-{uuid.uuid4().hex}"
    end = 10
    inp, ref = MemoryCollection(KV), MemoryCollection(KV)
    body = [POOL[n][0] for n in names]

    def feed(coll, hist, t):
        ch = hist.get(t, {})
        push(coll, t, kv(list(ch), t, list(ch.values())) if ch else None)

    for t in range(0, start + 1):
        feed(inp, input_hist, t)
        feed(ref, ref_hist, t)
    task = ContinualTask("ct", {"inp": inp}, body, references={"ref": ref}, columns=KV,
                         snapshot=snapshot, statements=mode, as_of=start, output=_output(backend, url))
    expected, fails_at = naive(input_hist, ref_hist, start, snapshot, names, mode, end)
    failed = False
    for t in range(start, end):
        if t > start:
            feed(inp, input_hist, t)
            feed(ref, ref_hist, t)
        if t in restarts and not failed:
            out = task.output if backend == "memory" else _output(backend, url)
            task = ContinualTask("ct", {"inp": inp}, body, references={"ref": ref}, snapshot=snapshot,
                                 statements=mode, output=out, as_of=start)
        if t in runs or t == end - 1:
            try:
                task.run()
            except NegativeMultiplicity:
                failed = True
                break
    if fails_at is not None:
        assert failed
        assert task.output.upper == fails_at
    else:
        assert not failed
        assert task.output.upper == end
    for t in range(start, task.output.upper):
        assert Counter(dict(contents(task.output, t))) == expected[t], t


def test_memory_collection_compaction_keeps_reads_at_and_after_since():
    c = MemoryCollection(KV)
    for t in range(6):
        push(c, t, kv([(t % 2, 0)], t, 1 if t < 4 else -1))
    before = {t: contents(c, t) for t in range(3, 6)}
    c.advance_since(3)
    assert c.times() == [3, 4, 5]
    assert {t: contents(c, t) for t in range(3, 6)} == before
    with pytest.raises(ValueError, match="before the since"):
        c.snapshot(2)
    with pytest.raises(ValueError, match="before the current since"):
        c.advance_since(1)
    assert [r[2] for r in c.updates(0, None).to_pylist()] == [3, 3, 4, 5]


def test_inputs_as_updates_and_statement_forms():
    # A complete history given as Updates; statements as Insert(query text), Delete(predicate)
    # and a callable returning a pandas frame.
    hist = colmz.concat([kv([(1, 1), (2, 2)], 1), kv([(1, 5)], 2), kv([(3, 3)], 3)])
    pd_rows = lambda ins, refs, me: ins["inp"].to_pandas().assign(val=lambda d: d.val * 10)  # noqa: E731
    task = ContinualTask("ct", {"inp": hist}, [
        Insert("SELECT key, val FROM inp"),
        Delete("key IN (SELECT key FROM inp)"),
        Insert(pd_rows),
    ], columns=KV, as_of=1)
    assert task.input.upper == 4
    task.run()
    assert rows(task.output, 1) == [(1, 1), (1, 10), (2, 2), (2, 20)]
    assert rows(task.output, 3) == [(1, 5), (1, 50), (2, 2), (2, 20), (3, 3), (3, 30)]
    with pytest.raises(TypeError, match="collection"):
        ContinualTask("ct", {"inp": [1, 2]}, [], columns=KV)
    with pytest.raises(TypeError, match="must return"):
        t2 = ContinualTask("ct", {"inp": hist}, [Insert(lambda i, r, m: [1])], columns=KV, as_of=1)
        t2.run()


def test_memory_collection_roll_back_drops_appends_and_compaction_since_save():
    c = MemoryCollection(KV)
    push(c, 1, kv([(1, 1)], 1))
    before = (contents(c, 1), c.times())
    saved = save(c)
    push(c, 2, kv([(2, 2)], 2))
    push(c, 4, kv([(3, 3)], 4))
    assert contents(c, 4) == [((1, 1), 1), ((2, 2), 1), ((3, 3), 1)]
    roll_back(c, saved)
    assert (contents(c, 1), c.times(), c.upper) == (*before, 2)
    push(c, 2, kv([(9, 9)], 2))
    assert contents(c, 2) == [((1, 1), 1), ((9, 9), 1)]
    # Compaction is rolled back too (the history lists are saved, not only the upper).
    saved = save(c)
    c.advance_since(2)
    assert (c.since, c.times()) == (2, [2])
    roll_back(c, saved)
    assert (c.since, c.times(), contents(c, 1)) == (0, [1, 2], [((1, 1), 1)])


def test_memory_collection_roll_back_after_counts_built_keeps_the_index_right():
    # counts() builds its index on first use; appends update it in place. A roll back
    # must put the index back with the history, not leave the rolled-back rows counted.
    c = MemoryCollection(KV)
    push(c, 1, kv([(1, 1), (1, 1)], 1))
    probe = kv([(1, 1), (2, 2)], 0)
    assert c.counts(probe).tolist() == [2, 0]
    index = c._counts
    saved = save(c)
    push(c, 2, kv([(2, 2), (1, 1)], 2))
    assert c.counts(probe).tolist() == [3, 1]
    roll_back(c, saved)
    assert c._counts is index  # rolled back in place, not rebuilt
    work = c._counts.work
    assert c.counts(probe).tolist() == [2, 0]
    assert c._counts.work - work <= 2 * 2  # a lookup, not a rebuild of the index
    push(c, 2, kv([(1, 1)], 2))
    assert c.counts(probe).tolist() == [3, 0]


def test_row_counts_merges_with_fuel_never_the_whole_index_in_one_add():
    # Work counters: after a large batch, many one-row adds merge a bounded number of rows
    # each (fueled spine layers), never the large run with the small ones at once (an
    # eager binary counter merges both halves, 2n rows, on the add that fills a level).
    import numpy as np

    from colmz.dataflow.fueled import SPACE_FACTOR

    n = 8192
    r = RowCounts()
    r.add(colmz.Updates({"k": np.arange(n, dtype=np.int64)}, time=np.zeros(n, np.uint64),
                        diff=np.ones(n, np.int64)))
    for i in range(2 * n):
        r.add(colmz.Updates({"k": pa.array([n + i], pa.int64())}, time=[0], diff=[1]))
    # the fuel's constant, not n: a merge's fuel is at most SPACE_FACTOR // 2 + 1 times its
    # layer's (the oldest run's merge, colmz.dataflow.fueled), plus the introduced layer
    assert r.max_add_merged <= 1024 * (SPACE_FACTOR // 2 + 1) + 2 * 1024, r.max_add_merged
    probe = colmz.Updates({"k": pa.array([0, n, 3 * n - 1, 3 * n], pa.int64())}, time=[0] * 4, diff=[1] * 4)
    assert r.counts(probe).tolist() == [1, 1, 1, 0]


def test_keep_counts_builds_the_index_at_append_not_at_the_first_count():
    c = MemoryCollection(KV)
    c.keep_counts()
    push(c, 1, kv([(1, 1), (1, 1), (2, 2)], 1))
    work = c.stats["counts_work"]
    assert work >= 2  # the append added its (two distinct) rows to the index
    assert c.counts(kv([(1, 1)], 0)).tolist() == [2]
    assert c._counts.work - work <= 2  # the count searched, built nothing


def test_memory_collection_roll_back_puts_a_lazy_base_back_unloaded():
    loads = []

    def base():
        loads.append(1)
        return kv([(5, 5)], 0)

    c = MemoryCollection(KV, since=0, upper=1, base=base)
    saved = save(c)
    assert contents(c, 0) == [((5, 5), 1)] and not c.base_pending
    roll_back(c, saved)
    assert c.base_pending and c.times() == []  # consistent: loaded again on the next read
    assert contents(c, 0) == [((5, 5), 1)] and len(loads) == 2


# ----------------------------------------------------------------------------- batches

# Statements for the batch-versus-loop comparison: every form the batched path lifts (inserts
# from the input and references, mz_now(), LIMIT and window functions per time, DELETEs by
# semi-join on one or two columns, row-local DELETEs with qualified columns and subqueries)
# and forms it must refuse (an INSERT or DELETE reading the output as a whole).
BATCH_POOL = {
    **{k: v[0] for k, v in POOL.items()},
    "del_pair": "DELETE FROM ct WHERE (key, ct.val) IN (SELECT key, val FROM inp)",
    "del_qual": "DELETE FROM ct WHERE ct.val < (SELECT min(val) FROM inp)",
    "retain": "DELETE FROM ct WHERE ct.key + 3 < mz_now()",
    "ins_now": "INSERT INTO ct SELECT key, mz_now()::INT8 FROM inp",
    "del_ref": "DELETE FROM ct WHERE key IN (SELECT key FROM ref WHERE val > 2)",
    "limit": "INSERT INTO ct SELECT key, val FROM inp ORDER BY val DESC, key LIMIT 1",
    "window": "INSERT INTO ct SELECT key, row_number() OVER (ORDER BY key, val)::INT8 FROM inp",
    "del_max": "DELETE FROM ct WHERE val = (SELECT max(val) FROM ct)",
}
NOT_BATCHABLE = {"self", "del_max"}


def _feed_all(hist, upto):
    coll = MemoryCollection(KV)
    for t in range(upto):
        ch = hist.get(t, {})
        push(coll, t, kv(list(ch), t, list(ch.values())) if ch else None)
    return coll


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(st.sampled_from(sorted(BATCH_POOL)), min_size=1, max_size=3),
    snapshot=st.booleans(),
    input_hist=st.dictionaries(st.integers(0, 9), changes, max_size=8),
    ref_hist=st.dictionaries(st.integers(0, 9), st.dictionaries(
        st.tuples(st.integers(0, 3), st.integers(0, 9)), st.just(1), max_size=2), max_size=4),
    runs=st.sets(st.integers(0, 11), max_size=3),
)
def test_batched_equals_time_by_time(names, snapshot, input_hist, ref_hist, runs):
    end = 12
    inp, ref = _feed_all(input_hist, 1), _feed_all(ref_hist, 1)
    body = [BATCH_POOL[n] for n in names]
    tasks = {b: ContinualTask("ct", {"inp": inp}, body, references={"ref": ref}, columns=KV,
                              snapshot=snapshot, as_of=0, batch=b) for b in (True, False)}
    assert not tasks[False].batchable
    assert tasks[True].batchable == (not set(names) & NOT_BATCHABLE)
    failed = {True: None, False: None}
    for t in range(1, end):
        for coll, hist in ((inp, input_hist), (ref, ref_hist)):
            ch = hist.get(t, {})
            push(coll, t, kv(list(ch), t, list(ch.values())) if ch else None)
        if t in runs or t == end - 1:
            for b, task in tasks.items():
                if failed[b] is None:
                    try:
                        task.run()
                    except Exception as e:  # the loop is the reference: same error, same time
                        failed[b] = type(e)
    assert failed[True] == failed[False]
    if failed[True] is None and sum(BATCH_POOL[n].startswith("DELETE") for n in names) < 2:
        # The batches ran, not the loop (two DELETEs matching one row at one time hand the
        # batch to the loop: whether that raises depends on the inserts at that time).
        assert tasks[True].stats["batch_fallbacks"] == 0
    a, b = tasks[True].output, tasks[False].output
    assert a.upper == b.upper
    for t in range(0, a.upper):
        assert contents(a, t) == contents(b, t), t


def test_batches_are_used_and_cut_where_references_change():
    inp, ref = MemoryCollection(KV), MemoryCollection(KV)
    push(ref, 0, kv([(1, 5)], 0))
    push(inp, 0)
    body = ["DELETE FROM ct WHERE key IN (SELECT key FROM inp)",
            "INSERT INTO ct SELECT i.key, coalesce(r.val, i.val) FROM inp i LEFT JOIN ref r USING (key)"]
    task = ContinualTask("ct", {"inp": inp}, body, references={"ref": ref}, columns=KV, as_of=0)
    loop = ContinualTask("ct", {"inp": inp}, body, references={"ref": ref}, columns=KV, as_of=0, batch=False)
    for t in range(1, 9):
        push(inp, t, kv([(t % 3, t)], t))
        push(ref, t, kv([(1, 50)], t) if t == 5 else None)
    task.run()
    loop.run()
    # Times 1..4 see ref {(1, 5)}, 5..8 also (1, 50): two batches, one write each (plus
    # the empty write moving the upper from 0 to 1, which both make).
    assert task.stats["batches"] == 2 and task.stats["batched_times"] == 8
    assert task.stats["writes"] == 1 + 2 and loop.stats["writes"] == 1 + 8
    for t in range(9):
        assert contents(task.output, t) == contents(loop.output, t)


def test_batch_with_a_negative_multiplicity_fails_at_the_loops_time():
    # Two DELETEs both match (1, 1) at time 3: the loop writes 1 and 2, then raises at 3.
    inp = MemoryCollection(KV)
    push(inp, 0)
    body = ["INSERT INTO ct SELECT * FROM inp WHERE val = 1",
            "DELETE FROM ct WHERE key IN (SELECT key FROM inp WHERE val = 3)",
            "DELETE FROM ct WHERE val IN (SELECT val - 2 FROM inp)"]
    task = ContinualTask("ct", {"inp": inp}, body, columns=KV, as_of=0)
    for t, r in ((1, (1, 1)), (2, (2, 2)), (3, (1, 3)), (4, (5, 5))):
        push(inp, t, kv([r], t))
    with pytest.raises(NegativeMultiplicity):
        task.run()
    assert task.output.upper == 3 and rows(task.output, 2) == [(1, 1)]
    assert task.stats["batch_fallbacks"] == 1


def test_batchable_statement_forms():
    inp = MemoryCollection(KV)

    def batchable(*body, **kw):
        return ContinualTask("ct", {"inp": inp}, list(body), columns=KV, as_of=0, **kw).batchable

    assert batchable("INSERT INTO ct SELECT * FROM inp", "DELETE FROM ct")
    assert batchable("DELETE FROM ct WHERE ct.key IN (SELECT key FROM inp) AND val > 1")
    assert not batchable("INSERT INTO ct SELECT * FROM ct")
    assert not batchable("DELETE FROM ct WHERE key IN (SELECT key FROM ct)")
    assert not batchable("DELETE FROM ct WHERE EXISTS (SELECT 1 FROM ct c2 WHERE c2.key = ct.key)")
    assert not batchable("INSERT INTO ct SELECT * FROM inp", statements="sequential")
    assert not batchable(Insert(lambda i, r, m: i["inp"]))
    assert not batchable("INSERT INTO ct SELECT * FROM inp", batch=False)
    with pytest.raises(TypeError, match="batch must be a bool"):
        batchable("INSERT INTO ct SELECT * FROM inp", batch=1)


def test_one_union_query_per_time_equals_statements_one_by_one():
    inp, ref = MemoryCollection(KV), MemoryCollection(KV)
    push(inp, 0)
    push(ref, 0, kv([(1, 100)], 0))
    body = [*UPSERT_SQL, "INSERT INTO upsert SELECT key, val FROM ref WHERE key IN (SELECT key FROM append_only)"]
    a = ContinualTask("upsert", {"append_only": inp}, body, references={"ref": ref}, columns=KV, as_of=0)
    b = ContinualTask("upsert", {"append_only": inp}, body, references={"ref": ref}, columns=KV, as_of=0,
                      batch=False)
    for t in range(1, 6):
        push(inp, t, kv([(t % 2, t), (t % 3, t)], t))
        push(ref, t)
        a.run()
        b.run()
    assert a.stats["union_times"] == 5 and b.stats["union_times"] == 0
    for t in range(6):
        assert contents(a.output, t) == contents(b.output, t)
    # A result type other than the task's (INT4 here) is converted inside the statement's own
    # query (PostgreSQL's assignment cast), so the union's parts agree and it is used.
    c = ContinualTask("ct", {"inp": inp}, ["INSERT INTO ct SELECT key::INT4, val FROM inp",
                                           "DELETE FROM ct WHERE val > 3"], columns=KV, as_of=5,
                      snapshot=False)
    push(inp, 6, kv([(1, 1)], 6))
    c.run()
    assert c.stats["union_times"] == 1 and rows(c.output, 6) == [(1, 1)]


@pytest.mark.parametrize("batch", [False, True])
def test_mz_now_placeholder_text_in_literals_survives_batched_and_looped(batch):
    # Before: the placeholder was replaced as text inside the lifted (batched) queries and
    # the per-time ones alike, so the literal became 'CAST(__colmz_t.__colmz_time AS UBIGINT)'.
    from colmz.sql import MZ_NOW

    inp = MemoryCollection({"v": pa.string()})
    task = ContinualTask("ct", {"inp": inp}, [
        f"INSERT INTO ct SELECT v || '{MZ_NOW}' AS v, mz_now() AS t FROM inp",
        f"DELETE FROM ct WHERE v = 'a{MZ_NOW}' AND t < mz_now() AND 'mz_now()' <> '{MZ_NOW}'",
    ], as_of=0, batch=batch,
        # a DELETE names the task: without a column list it would take the input's (v) alone
        columns={"v": pa.string(), "t": pa.uint64()})
    for t, v in [(1, "a"), (2, "b"), (3, "c")]:
        push(inp, t, colmz.Updates({"v": [v]}, time=[t], diff=[1]))
    task.run()
    assert task.stats["batches"] == (1 if batch else 0)
    assert rows(task.output, 3) == [(f"b{MZ_NOW}", 2), (f"c{MZ_NOW}", 3)]


def test_a_task_named_by_a_qualified_name_reads_and_writes_itself_qualified():
    # A catalog's task outside materialize.public is named by its QualifiedName: its
    # statements write and read it qualified (x.t, materialize.x.t) or, as a relation's own
    # name, by its last part (x.t.k); INSERT INTO x.t does not write a task named t.
    from colmz.sql import QualifiedName

    inp = MemoryCollection({"k": pa.int64()})
    with pytest.raises(ValueError, match="body.0. writes 'x.t'; a continual task writes only its output 't'"):
        ContinualTask("t", {"inp": inp}, ["INSERT INTO x.t SELECT k FROM inp"])
    for batch in (False, True):
        inp = MemoryCollection({"k": pa.int64()})
        task = ContinualTask(QualifiedName("materialize", "x", "t"), {"inp": inp},
                             ["INSERT INTO x.t SELECT k FROM inp WHERE k NOT IN (SELECT k FROM x.t)",
                              "DELETE FROM materialize.x.t WHERE x.t.k > 5"],
                             columns={"k": pa.int64()}, as_of=0, batch=batch)
        push(inp, 1, colmz.Updates({"k": [1, 7]}, time=[1, 1], diff=[1, 1]))
        push(inp, 2, colmz.Updates({"k": [1, 2]}, time=[2, 2], diff=[1, 1]))
        task.run()
        assert rows(task.output, 2) == [(1,), (2,)], batch


@pytest.mark.parametrize("batch", [True, False])
def test_column_kinds_give_the_jsonb_column_rules(batch):
    # A string column of kind jsonb compared with a string literal compares jsonb (the literal
    # read as jsonb); one of no known kind is compared as text. The DELETE's IN subquery keeps
    # the rules when the statements are lifted over a batch of times (batch=True).
    docs = MemoryCollection({"k": pa.int64(), "j": pa.string()})
    for t, (k, j) in enumerate([(1, '{"a": 1}'), (2, '{"b": 2}'), (1, '{"b": 2}')]):
        push(docs, t, colmz.Updates({"k": pa.array([k], pa.int64()), "j": pa.array([j])}, time=[t], diff=[1]))
    body = ["INSERT INTO o SELECT k, j = '{\"a\":1}' AS e FROM docs",
            "DELETE FROM o WHERE k IN (SELECT k FROM docs WHERE j = '{\"b\" :2}')"]

    def task(kinds):
        t = ContinualTask("o", {"docs": docs}, body, columns={"k": pa.int64(), "e": pa.bool_()}, as_of=0,
                          batch=batch, column_kinds=kinds)
        t.run()
        return rows(t.output, 2)

    # at time 2 the DELETE removes (1, True), written at time 0 (it reads the output as of T - 1)
    assert task({"docs": [None, "jsonb"]}) == [(1, False), (2, False)]
    assert task(None) == [(1, False), (1, False), (2, False)]  # as text: '{"a": 1}' <> '{"a":1}'
    with pytest.raises(ValueError, match=r"column_kinds\['docs'\] must give a kind for each of the 2 columns"):
        task({"docs": ["jsonb"]})
