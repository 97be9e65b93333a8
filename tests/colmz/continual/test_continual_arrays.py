"""Continual tasks over array columns: inputs, references and outputs holding arrays.

Every statement of a task is translated told which columns of its collections are arrays,
so ``a[i]``, ``a[lo:hi]``, ``array_length`` and ``cardinality`` of one are PostgreSQL's (a
one-based subscript, NULL out of range; an inclusive slice clamped to the array, empty when
nothing is left; ``array_length`` of an empty array NULL), in an ``INSERT``'s query, a
``DELETE``'s predicate (the output's columns) and its subqueries; ``unnest`` and
``array_agg`` make and take them apart. Checked against a naive model (the statements as
functions of Python multisets, PostgreSQL's array rules written out), the model itself
against PostgreSQL 15 (``CI=1``), for in-memory and durable outputs reopened at random
times, batched and time by time; and a durable catalog's tasks over an ``array_agg`` view,
reopened, against the same rules.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sql_oracle import require
from test_continual import naive

import colmz
from colmz.continual import ContinualTask, MemoryCollection, NegativeMultiplicity
from colmz.sql import UnsupportedSQL

require("duckdb", "continual tasks' SQL needs duckdb (pip install 'colmz[sql]')")

KA = {"k": pa.int64(), "a": pa.list_(pa.int64())}


# ----------------------------------------------------------------- PostgreSQL's array rules


def sub(a, i):
    """``a[i]``: one-based, NULL outside the array or of a NULL array."""
    return None if a is None or i is None or not 1 <= i <= len(a) else a[i - 1]


def sl(a, lo=None, hi=None):
    """``a[lo:hi]``: inclusive, clamped to the array; empty when nothing is left."""
    if a is None:
        return None
    lo = 1 if lo is None else max(lo, 1)
    hi = len(a) if hi is None else min(hi, len(a))
    return tuple(a[lo - 1 : hi]) if lo <= hi else ()


def length(a):
    """``array_length(a, 1)``: NULL for a NULL or an empty array."""
    return None if not a else len(a)


def cardinality(a):
    return None if a is None else len(a)


def agg(values):
    """``array_agg(x ORDER BY x)``: NULLs last."""
    return tuple(sorted(values, key=lambda x: (x is None, x or 0)))


def _each(c: Counter):
    for row, m in c.items():
        for _ in range(m):
            yield row


def _count(rows) -> Counter:
    return Counter(rows)


def _unnest_agg(i):
    groups: dict = {}
    for k, a in _each(i):
        for x in a or ():
            groups.setdefault(k, []).append(x)
    return Counter({(k, agg(xs)): 1 for k, xs in groups.items()})


def _del(o, p):
    return Counter({row: m for row, m in o.items() if p(row)})


#: Statements over inp(k, a), ref(k, a) and the output ct(k, a) (a BIGINT[]): SQL, the
#: model (rows of the input at T, of ref at T, of the output at T-1 -> sign, rows), and
#: whether the statement reads the input.
POOL = {
    "copy": ("INSERT INTO ct SELECT k, a FROM inp", lambda i, r, o: (+1, Counter(i)), True),
    "slice": ("INSERT INTO ct SELECT k, a[2:3] FROM inp",
              lambda i, r, o: (+1, _count((k, sl(a, 2, 3)) for k, a in _each(i))), True),
    "ends": ("INSERT INTO ct SELECT k + 4, a[:1] FROM inp WHERE cardinality(a[2:]) = 0",
             lambda i, r, o: (+1, _count((k + 4, sl(a, None, 1)) for k, a in _each(i) if sl(a, 2) == ())), True),
    "first": ("INSERT INTO ct SELECT k, ARRAY[a[1], array_length(a, 1), cardinality(a)] FROM inp",
              lambda i, r, o: (+1, _count((k, (sub(a, 1), length(a), cardinality(a))) for k, a in _each(i))), True),
    "agg": ("INSERT INTO ct SELECT k, array_agg(x ORDER BY x) FROM (SELECT k, unnest(a) AS x FROM inp) u GROUP BY k",
            lambda i, r, o: (+1, _unnest_agg(i)), True),
    "join": ("INSERT INTO ct SELECT i.k, f.a[1:2] FROM inp i JOIN ref f ON i.k = f.k",
             lambda i, r, o: (+1, _count((k, sl(b, 1, 2)) for k, _ in _each(i) for kk, b in _each(r) if k == kk)), True),
    "self": ("INSERT INTO ct SELECT c.k + 8, c.a[2:] FROM ct c WHERE c.k IN (SELECT k FROM inp)",
             lambda i, r, o: (+1, _count((k + 8, sl(a, 2)) for k, a in _each(o) if k in {kk for kk, _ in i})), True),
    "del_keys": ("DELETE FROM ct WHERE k IN (SELECT k FROM inp WHERE a[1] IS NOT NULL)",
                 lambda i, r, o: (-1, _del(o, lambda row: row[0] in {k for k, a in i if sub(a, 1) is not None})), True),
    "del_first": ("DELETE FROM ct WHERE a[1] = 1",
                  lambda i, r, o: (-1, _del(o, lambda row: sub(row[1], 1) == 1)), False),
    "del_len": ("DELETE FROM ct WHERE array_length(ct.a, 1) > 2 OR ct.a IS NULL",
                lambda i, r, o: (-1, _del(o, lambda row: row[1] is None or (length(row[1]) or 0) > 2)), False),
    "del_empty": ("DELETE FROM ct WHERE cardinality(a[2:]) = 0 AND a[1] IS NULL",
                  lambda i, r, o: (-1, _del(o, lambda row: cardinality(sl(row[1], 2)) == 0 and sub(row[1], 1) is None)),
                  False),
}

#: Statements a batch cannot evaluate (an INSERT reading the output).
NOT_BATCHABLE = {"self"}

arrays = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=4).map(tuple))
rows_ = st.tuples(st.integers(0, 3), arrays)
changes = st.dictionaries(rows_, st.sampled_from([-1, 1, 1, 2]), max_size=4)


def updates(changed: dict, t: int) -> colmz.Updates:
    rows = list(changed)
    return colmz.Updates({"k": pa.array([r[0] for r in rows], pa.int64()),
                          "a": pa.array([None if r[1] is None else list(r[1]) for r in rows], pa.list_(pa.int64()))},
                         time=[t] * len(rows), diff=list(changed.values()))


def push(coll, t, changed=None):
    """Append ``changed`` ({row: diff}) at time t to coll and seal t."""
    u = updates(changed, t) if changed else colmz.Updates.empty(coll.schema)
    coll.compare_and_append(u, coll.upper, t + 1)


def contents(coll, t) -> Counter:
    return Counter({(k, None if a is None else tuple(a)): d for k, a, _, d in coll.snapshot(t).to_pylist()})


def _output(backend, url):
    """The task's output: in memory, or a durable Arrangement reopened from ``url``."""
    if backend == "memory":
        return None
    from colmz.arrangement import Arrangement
    from colmz.catalog import ArrangementCollection

    return ArrangementCollection(Arrangement.open(url, KA, name="ct"))


def test_statements_translate_every_array_rule_by_the_relations_columns():
    # a slice of a column colmz cannot see is an array is refused; told the collections'
    # columns (input, reference, output), each statement of the pool is accepted
    inp, ref = MemoryCollection(KA), MemoryCollection(KA)
    for n, (sql, _, _) in POOL.items():
        task = ContinualTask("ct", {"inp": inp}, [sql], references={"ref": ref}, columns=KA, as_of=0)
        assert task.batchable == (n not in NOT_BATCHABLE), n
    plain = MemoryCollection({"k": pa.int64(), "a": pa.string()})
    with pytest.raises(UnsupportedSQL, match="a slice of a value colmz cannot see is an array"):
        ContinualTask("ct", {"inp": plain}, ["INSERT INTO ct SELECT k, a[2:3] FROM inp"], as_of=0)


@pytest.mark.parametrize("backend", ["memory", "arrangement"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.sampled_from(sorted(POOL)), min_size=1, max_size=3),
    mode=st.sampled_from(["independent", "sequential"]),
    snapshot=st.booleans(),
    batch=st.booleans(),
    start=st.integers(0, 2),
    input_hist=st.dictionaries(st.integers(0, 8), changes, max_size=7),
    ref_hist=st.dictionaries(st.integers(0, 8), st.dictionaries(rows_, st.just(1), max_size=2), max_size=4),
    restarts=st.sets(st.integers(1, 9), max_size=3),
    runs=st.sets(st.integers(0, 9), max_size=6),
)
def test_array_tasks_equal_the_model_with_restarts(backend, names, mode, snapshot, batch, start, input_hist,
                                                   ref_hist, restarts, runs):
    url = f"mem://ct-arrays-{uuid.uuid4().hex}"
    end = 10
    inp, ref = MemoryCollection(KA), MemoryCollection(KA)
    body = [POOL[n][0] for n in names]
    for t in range(0, start + 1):
        push(inp, t, input_hist.get(t))
        push(ref, t, ref_hist.get(t))
    kw = dict(references={"ref": ref}, snapshot=snapshot, statements=mode, as_of=start, batch=batch)
    task = ContinualTask("ct", {"inp": inp}, body, columns=KA, output=_output(backend, url), **kw)
    expected, fails_at = naive(input_hist, ref_hist, start, snapshot, names, mode, end, POOL)
    failed = False
    for t in range(start, end):
        if t > start:
            push(inp, t, input_hist.get(t))
            push(ref, t, ref_hist.get(t))
        if t in restarts and not failed:
            # reopened: a durable output read back, its columns (arrays) its own
            out = task.output if backend == "memory" else _output(backend, url)
            task = ContinualTask("ct", {"inp": inp}, body, output=out, **kw)
        if t in runs or t == end - 1:
            try:
                task.run()
            except NegativeMultiplicity:
                failed = True
                break
    if fails_at is not None:
        assert failed and task.output.upper == fails_at
    else:
        assert not failed and task.output.upper == end
    for t in range(start, task.output.upper):
        assert contents(task.output, t) == expected[t], t


def test_batched_array_tasks_run_as_batches():
    # row-local DELETEs over the output's arrays and an IN subquery over the input's are
    # lifted over the batch's times, not handed to the loop
    hist = {1: {(1, (1, 2, 3)): 1, (2, ()): 1}, 2: {(1, (None, 5)): 1, (3, None): 1},
            3: {(2, (1,)): 2}, 4: {(1, (4,)): 1}}
    names = ["copy", "slice", "del_first", "del_empty", "del_keys"]
    inp = MemoryCollection(KA)
    push(inp, 0)
    task = ContinualTask("ct", {"inp": inp}, [POOL[n][0] for n in names], columns=KA, as_of=0)
    for t in range(1, 5):
        push(inp, t, hist[t])
    task.run()
    assert task.stats["batches"] == 1 and task.stats["batch_fallbacks"] == 0
    expected, fails = naive(hist, {}, 0, True, names, "independent", 5, POOL)
    assert fails is None
    for t in range(5):
        assert contents(task.output, t) == expected[t], t


def test_an_output_of_no_column_list_holds_the_arrays_it_is_given():
    # a self-referencing task takes its input's columns (the arrays); one that is not, its
    # first INSERT's result (array_agg's), of PostgreSQL's types
    inp = MemoryCollection(KA)
    push(inp, 0)
    latest = ContinualTask("latest", {"inp": inp}, [
        "DELETE FROM latest WHERE k IN (SELECT k FROM inp)",
        "INSERT INTO latest SELECT k, a FROM inp",
        "DELETE FROM latest WHERE cardinality(latest.a[2:]) = 0 AND latest.a[1] = 0 "
        "AND k NOT IN (SELECT k FROM inp)"], as_of=0)
    grouped = ContinualTask("grouped", {"inp": inp}, [
        "INSERT INTO grouped SELECT k % 2 AS p, array_agg(k ORDER BY k) AS ks, array_agg(a[1] ORDER BY k) AS firsts "
        "FROM inp GROUP BY k % 2"], as_of=0)
    assert [c.type for c in latest.schema] == [pa.int64(), pa.list_(pa.int64())]
    assert [c.type for c in grouped.schema] == [pa.int64(), pa.list_(pa.int64()), pa.list_(pa.int64())]
    push(inp, 1, {(1, (0,)): 1, (2, (None,)): 1, (3, ()): 1})
    push(inp, 2, {(1, (7, 8)): 1, (4, None): 1})
    push(inp, 3, {(2, (0,)): 1})
    push(inp, 4, {(5, (1,)): 1})
    for task in (latest, grouped):
        task.run()
    assert contents(latest.output, 3) == Counter({(1, (7, 8)): 1, (2, (0,)): 1, (3, ()): 1, (4, None): 1})
    # (2, {0}) goes at the next time, when the output as of T-1 holds it
    assert contents(latest.output, 4) == Counter({(1, (7, 8)): 1, (3, ()): 1, (4, None): 1, (5, (1,)): 1})
    got = Counter((p, tuple(ks), tuple(fs)) for p, ks, fs, _, _ in grouped.output.snapshot(4).to_pylist())
    assert got == Counter([(0, (2,), (0,)), (0, (2,), (None,)), (0, (4,), (None,)), (1, (1,), (7,)),
                           (1, (1, 3), (0, None)), (1, (5,), (1,))])


# ----------------------------------------------------------------- the model against PostgreSQL


def _pg_rows(pg, sql) -> Counter:
    with pg.cursor() as cur:
        cur.execute(sql)
        return Counter((k, None if a is None else tuple(a)) for k, a in cur.fetchall())


def _pg_table(pg, name, rows: Counter) -> None:
    with pg.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        cur.execute(f"CREATE TABLE {name} (k BIGINT, a BIGINT[])")
        for (k, a), m in rows.items():
            for _ in range(m):
                cur.execute(f"INSERT INTO {name} VALUES (%s, %s::BIGINT[])", (k, None if a is None else list(a)))


@settings(max_examples=20, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ins=st.dictionaries(rows_, st.integers(1, 2), min_size=1, max_size=5),
       ref=st.dictionaries(rows_, st.just(1), max_size=3), out=st.dictionaries(rows_, st.integers(1, 2), max_size=5))
def test_the_model_is_postgres(pg, ins, ref, out):
    # each statement of the pool, run by PostgreSQL 15 over the same three tables, gives the
    # model's rows: an INSERT its query's, a DELETE the output's rows its predicate holds for
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    ins, ref, out = Counter(ins), Counter(ref), Counter(out)
    for name, rows in (("inp", ins), ("ref", ref), ("ct", out)):
        _pg_table(pg, name, rows)
    for n, (sql, model, _) in POOL.items():
        sign, want = model(ins, ref, out)
        query = sql.removeprefix("INSERT INTO ct ") if sign > 0 else "SELECT * FROM ct WHERE " + sql.removeprefix(
            "DELETE FROM ct WHERE ")
        assert _pg_rows(pg, query) == +want, n


# ----------------------------------------------------------------- a durable catalog's tasks


def _rows(cat, name) -> Counter:
    return Counter(tuple(tuple(v) if isinstance(v, list) else v for v in r.values())
                   for r in cat.sql(f"SELECT * FROM {name}").to_pylist())


def test_durable_catalog_tasks_over_arrays_resume_after_reopen(tmp_path):
    # m holds each k's array_agg (NULL elements included); c slices it; d reads c's arrays
    # (empty ones from single-element groups); latest keeps each k's newest array, deleting
    # by a subscript of its own arrays. Reopened between commits, every task goes on as if not.
    setup = ["CREATE TABLE s (k BIGINT, v BIGINT)",
             "CREATE MATERIALIZED VIEW m AS SELECT k, array_agg(v ORDER BY v) AS a FROM s GROUP BY k",
             "INSERT INTO s VALUES (1, 10), (1, 20), (1, 30), (2, NULL), (2, 5)",
             "CREATE CONTINUAL TASK c ON INPUT m AS (INSERT INTO c SELECT k, a[1] AS first, a[2:] AS rest, "
             "a[:2] AS head, array_length(a, 1) AS n FROM m)",
             "CREATE CONTINUAL TASK d ON INPUT c AS (INSERT INTO d SELECT k, rest[1] AS r1, "
             "array_length(rest, 1) AS rn, cardinality(rest) AS rc, rest[5:6] AS none FROM c)",
             "CREATE CONTINUAL TASK latest ON INPUT m AS (DELETE FROM latest WHERE k IN (SELECT k FROM m); "
             "DELETE FROM latest WHERE latest.a[1] IS NULL AND k NOT IN (SELECT k FROM m); INSERT INTO latest SELECT k, a FROM m)"]
    cat = colmz.Catalog(tmp_path)
    for s in setup:
        cat.execute(s)
    steps = ["INSERT INTO s VALUES (3, 7)", "INSERT INTO s VALUES (1, NULL), (3, 8)", "DELETE FROM s WHERE k = 2",
             "INSERT INTO s VALUES (2, 1), (4, NULL)",
             "UPDATE s SET v = 0 WHERE k = 3", "INSERT INTO s VALUES (5, 5)"]
    inserted = [Counter({(1, (10, 20, 30)): 1, (2, (5, None)): 1})]  # m's inserts at each time
    before = Counter(inserted[0])
    for i, step in enumerate(steps):
        cat.execute(step)
        if i % 2 == 0:
            cat = colmz.Catalog(tmp_path)  # reopened: each task resumes at its output's upper
        now = Counter({(k, tuple(a)): 1 for k, a in ((r["k"], r["a"]) for r in cat.sql("SELECT k, a FROM m").to_pylist())})
        inserted.append(now - before)
        before = now
    c_rows = Counter((k, sub(a, 1), sl(a, 2), sl(a, None, 2), length(a)) for ins in inserted for k, a in _each(ins))
    assert _rows(cat, "c") == c_rows
    assert _rows(cat, "d") == Counter((k, sub(r, 1), length(r), cardinality(r), sl(r, 5, 6))
                                      for k, _, r, _, _ in _each(c_rows))
    latest: Counter = Counter()
    for ins in inserted:
        keys = {k for k, _ in ins}
        latest = Counter({row: m for row, m in latest.items() if row[0] not in keys and sub(row[1], 1) is not None})
        latest.update(ins)
    assert _rows(cat, "latest") == latest
    assert cat.sql("SELECT count(*) AS n FROM latest WHERE a[1] IS NULL").column("n").to_pylist() == [
        sum(m for (_, a), m in latest.items() if sub(a, 1) is None)]
