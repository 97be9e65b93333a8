"""``SUBSCRIBE`` (``colmz.subscribe``): snapshot then changes, checked against reads at every time."""

from __future__ import annotations

import random
import threading

import pyarrow as pa
import pytest

import colmz
from colmz.arrangement.collection import CompactedAway
from colmz.ops import concat, consolidate
from colmz.sql import SQLError, UnsupportedSQL, parse
from colmz.sql.parse import Subscribe


def rows(u: colmz.Updates) -> list:
    """Consolidated contents as sorted ``(data..., diff)`` tuples (time dropped)."""
    if not len(u):
        return []
    return sorted(((*r[:-2], r[-1]) for r in consolidate(u, since=int(u.time.max())).to_pylist()), key=repr)


def integrate(batches: list, upto: int) -> list:
    """The sum of the batches at times ``<= upto``."""
    mine = [b for b in batches if len(b) and int(b.time[0]) <= upto]
    return rows(concat(mine)) if mine else []


def counted(t: pa.Table) -> list:
    """A query result as ``(row..., count)`` tuples, sorted."""
    out: dict = {}
    for r in t.to_pylist():
        k = tuple(r.values())
        out[k] = out.get(k, 0) + 1
    return sorted(((*k, n) for k, n in out.items()), key=repr)


def random_commits(cat, rng, n):
    for _ in range(n):
        stmts = []
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.5:
                stmts.append(f"INSERT INTO t VALUES ({rng.choice(['NULL', 1, 2, 3])}, {rng.randint(-3, 9)})")
            elif r < 0.7:
                stmts.append(f"DELETE FROM t WHERE k = {rng.randint(1, 3)} AND v > {rng.randint(0, 9)}")
            elif r < 0.85:
                stmts.append(f"INSERT INTO u VALUES ({rng.randint(1, 3)}, '{rng.choice('abc')}')")
            else:
                stmts.append(f"DELETE FROM u WHERE w = '{rng.choice('abc')}'")
        r = rng.random()
        if r < 0.1:  # a failing script: rolled back, no time is committed
            with pytest.raises(SQLError):
                cat.execute("; ".join([*stmts, "INSERT INTO nosuch VALUES (1)"]))
        elif not stmts:
            cat.execute("INSERT INTO t SELECT * FROM t WHERE false")  # an empty commit
        else:  # at the next time, or later (times in between hold nothing)
            cat.execute("; ".join(stmts), time=cat.now + (1 if r < 0.8 else rng.randint(2, 4)))


@pytest.fixture
def cat():
    c = colmz.Catalog()
    c.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w TEXT)")
    c.execute("INSERT INTO t VALUES (1, 5), (1, 7), (2, 3); INSERT INTO u VALUES (1, 'a')")
    return c


# ----------------------------------------------------------------------------- objects


def test_object_snapshot_then_changes_equal_reads_at_every_time(cat):
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k")
    start = cat.now
    subs = {n: cat.subscribe(n, as_of=start) for n in ("t", "u", "mv")}
    got = {n: list(s) for n, s in subs.items()}
    random_commits(cat, random.Random(3), 25)
    for n, s in subs.items():
        got[n] += list(s)
        assert s.frontier == cat.now + 1
        times = [int(b.time[0]) for b in got[n]]
        assert times[0] == start and times == sorted(set(times))  # snapshot first, then time order
        for t in range(start, cat.now + 1):
            assert integrate(got[n], t) == rows(cat.read(n, as_of=t)), (n, t)
    assert subs["t"].strategy == "collection"


def test_iterating_again_gives_only_new_commits_and_snapshot_false_skips_the_contents(cat):
    sub = cat.subscribe("t", snapshot=False)
    assert list(sub) == [] and sub.poll() == []
    cat.execute("INSERT INTO t VALUES (9, 9)")
    assert [b.to_pylist() for b in sub] == [[(9, 9, 2, 1)]]
    assert list(sub) == []


def test_a_dropped_or_recreated_input_ends_the_subscription(cat):
    def subs():
        out = [cat.subscribe("t"), cat.subscribe("SELECT count(*) AS n FROM t")]
        for s in out:
            list(s)
        return out

    first = subs()
    cat.execute("DROP TABLE t; INSERT INTO u VALUES (7, 'g')")  # time 2
    for s in first:
        with pytest.raises(KeyError, match="no object 't'"):
            s.poll()
        assert s.frontier == 2
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    second = subs()
    cat.execute("DROP TABLE t; CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute("INSERT INTO t VALUES (5, 5)")  # time 3, into another t
    for s in second:
        with pytest.raises(ValueError, match="'t' was dropped and created again"):
            s.poll()
        assert s.frontier == 3


def test_up_to_ends_the_subscription(cat):
    for _ in range(3):
        cat.execute("INSERT INTO t VALUES (4, 4)")
    sub = cat.subscribe("t", as_of=1, up_to=3)
    assert [int(b.time[0]) for b in sub] == [1, 2]
    assert sub.done and list(sub.follow(timeout=None)) == []


def test_follow_sees_a_commit_made_while_it_waits(cat):
    sub = cat.subscribe("t", snapshot=False)
    timer = threading.Timer(0.05, lambda: cat.execute("INSERT INTO t VALUES (8, 8)"))
    timer.start()
    got = []
    for b in sub.follow(timeout=30, interval=0.01):
        got.append(b)
        break
    timer.join()
    assert [b.to_pylist() for b in got] == [[(8, 8, 2, 1)]]


# ----------------------------------------------------------------------------- queries


QUERIES = [
    ("SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k", "dataflow"),
    ("SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k", "dataflow"),
    ("SELECT k, max(v) AS m FROM t WHERE v > 2 GROUP BY k", "dataflow"),
    ("SELECT upper(w) AS w, k * 2 AS k2 FROM u", "dataflow"),  # a Map segment through translate
    ("SELECT w, count(DISTINCT k) AS n FROM u GROUP BY w", "dataflow"),  # per affected group in DuckDB
    ("SELECT w, count(*) AS n FROM u GROUP BY ROLLUP (w)", "dataflow"),  # a union of reduces
    ("SELECT w, count(DISTINCT k) AS n FROM u GROUP BY ROLLUP (w)", "dataflow"),  # basic reduces' union
    ("SELECT w, grouping(w) + 1 AS n FROM u GROUP BY ROLLUP (w)", "recompute"),
    ("SELECT count(*) AS n FROM t", "dataflow"),
    ("SELECT k FROM mv WHERE s > 3", None),
]


@pytest.mark.parametrize("query,strategy", QUERIES)
def test_query_changes_equal_the_query_at_every_time(cat, query, strategy):
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s FROM t GROUP BY k")
    start = cat.now
    sub = cat.subscribe(query, as_of=start)
    if strategy is not None:
        assert sub.strategy.startswith(strategy), sub.strategy
    got = list(sub)
    rng = random.Random(hash(query) % 1000)
    for _ in range(4):
        random_commits(cat, rng, 5)
        got += list(sub)
    for t in range(start, cat.now + 1):
        assert integrate(got, t) == counted(cat.sql(query, as_of=t)), (query, t)


def test_dataflow_and_recompute_give_the_same_batches(cat):
    fast = cat.subscribe("SELECT t.k, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k GROUP BY t.k", as_of=1)
    # The same query with a scalar the plan does not hold (a subquery in the group key): the
    # recompute path, the oracle.
    slow = cat.subscribe("SELECT t.k + (SELECT 0) AS k, sum(t.v) AS s, count(*) AS c FROM t JOIN u ON t.k = u.k "
                         "GROUP BY t.k + (SELECT 0)", as_of=1)
    assert (fast.strategy, slow.strategy[:9]) == ("dataflow", "recompute")
    random_commits(cat, random.Random(5), 20)
    a, b = list(fast), list(slow)
    assert len(a) > 3
    assert [x.to_pylist() for x in a] == [x.to_pylist() for x in b]


def test_a_dataflow_subscription_reads_only_the_changes():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute("INSERT INTO t SELECT i % 100, i FROM generate_series(0, 19999) r(i)")
    fast = cat.subscribe("SELECT k, sum(v) AS s FROM t GROUP BY k")
    slow = cat.subscribe("SELECT k + (SELECT 0) AS k, sum(v) AS s FROM t GROUP BY k + (SELECT 0)")
    list(fast), list(slow)
    for i in range(5):
        cat.execute(f"INSERT INTO t VALUES ({i}, 1)")
    assert [b.to_pylist() for b in fast] == [b.to_pylist() for b in slow]
    # The snapshot is the one whole evaluation; each commit is a step over its one-row change.
    assert fast.stats == {"evaluations": 1, "steps": 5, "updates_read": 5}
    assert slow.stats["evaluations"] == 6


def test_a_query_over_a_qualified_name_recomputes(cat):
    cat.execute("CREATE SCHEMA x; CREATE TABLE x.t (k INT); INSERT INTO x.t VALUES (1)")
    sub = cat.subscribe("SELECT k FROM x.t")
    assert sub.strategy.startswith("recompute")
    cat.execute("INSERT INTO x.t VALUES (2)")
    assert [b.to_pylist() for b in sub] == [[(1, 2, 1)], [(2, 3, 1)]]


def test_a_query_of_jsonb_column_rules_equals_the_query_at_every_time():
    # A jsonb column compared with a string literal compares jsonb, || of two jsonb columns
    # merges them, a jsonb operator of a text column is PostgreSQL's error: the same rules as
    # the catalog's query (colmz.sql.jsonbcols), applied by the operators as by the query
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE d (k BIGINT, j JSONB, s TEXT)")
    cat.execute("CREATE MATERIALIZED VIEW dv AS SELECT k, j FROM d")
    start = cat.now
    queries = ["""SELECT k, j = '{"a":1}' AS e, j || j AS m FROM d WHERE j <> '{ "b":[1,2.50]}' OR k = 2""",
               """SELECT k FROM dv WHERE j IN ('{"a": 1}', '[ ]')"""]
    subs = [cat.subscribe(q, as_of=start) for q in queries]
    assert [s.strategy for s in subs] == ["dataflow", "dataflow"]
    got = [list(s) for s in subs]
    for stmt in ("""INSERT INTO d VALUES (1, '{"a":1}', 'x'), (2, '{"b": [1, 2.5]}', 'y')""",
                 """INSERT INTO d VALUES (3, '{"b":[1,2.50]}', 'z'), (4, '[]', NULL)""",
                 "DELETE FROM d WHERE k = 1"):
        cat.execute(stmt)
        for g, s in zip(got, subs):
            g += list(s)
    for q, g in zip(queries, got):
        assert any(len(b) for b in g), q
        for t in range(start, cat.now + 1):
            assert integrate(g, t) == counted(cat.sql(q, as_of=t)), (q, t)
    assert counted(cat.sql(queries[1])) == [(4, 1)]
    with pytest.raises(SQLError, match="operator does not exist: text -> unknown"):
        cat.subscribe("SELECT s -> 'a' AS a FROM d")


# ----------------------------------------------------------------------------- SQL


def test_parse_subscribe():
    assert parse("SUBSCRIBE TO x.v WITH (PROGRESS = true, SNAPSHOT false) AS OF 3 UP TO 7") == [
        Subscribe(("x", "v"), None, 3, 7, False, True)]
    assert parse("subscribe (SELECT (1)) as of 2") == [Subscribe(None, "SELECT (1)", 2)]
    for bad, err in [("SUBSCRIBE", SQLError), ("SUBSCRIBE t WITH (FOO)", UnsupportedSQL),
                     ("SUBSCRIBE t AS OF AT LEAST 3", UnsupportedSQL), ("SUBSCRIBE t AS OF x", SQLError),
                     ("SUBSCRIBE t ENVELOPE UPSERT (KEY (k))", UnsupportedSQL), ("SUBSCRIBE ()", SQLError),
                     ("SUBSCRIBE t extra", SQLError), ("SUBSCRIBE t WITH (PROGRESS = 3)", SQLError)]:
        with pytest.raises(err):
            parse(bad)


def test_sql_subscribe_returns_mz_timestamp_and_mz_diff_first(cat):
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s FROM t GROUP BY k")
    out = cat.execute("DELETE FROM t WHERE v = 3; SUBSCRIBE mv AS OF 1")
    assert out.column_names == ["mz_timestamp", "mz_diff", "k", "s"]
    assert out.schema.field("mz_timestamp").type == pa.uint64()
    assert out.to_pylist() == [
        {"mz_timestamp": 1, "mz_diff": 1, "k": 1, "s": 12},
        {"mz_timestamp": 1, "mz_diff": 1, "k": 2, "s": 3},
        {"mz_timestamp": 2, "mz_diff": -1, "k": 2, "s": 3},
    ]
    assert cat.sql("SUBSCRIBE mv AS OF 1").equals(out)
    assert cat.sql("SUBSCRIBE TO mv AS OF 1").equals(out)  # Materialize's optional TO
    q = cat.execute("SUBSCRIBE (SELECT count(*) AS n FROM t) WITH (SNAPSHOT = false) AS OF 1")
    # Within one time, rows come in the consolidated (data) order.
    assert q.to_pylist() == [{"mz_timestamp": 2, "mz_diff": 1, "n": 2}, {"mz_timestamp": 2, "mz_diff": -1, "n": 3}]


def test_sql_subscribe_with_progress(cat):
    cat.execute("INSERT INTO t VALUES (5, 5)")
    cat.execute("INSERT INTO u VALUES (5, 'e')")  # t unchanged at 3
    out = cat.execute("SUBSCRIBE t WITH (PROGRESS) AS OF 1").to_pylist()
    assert [(r["mz_timestamp"], r["mz_progressed"], r["mz_diff"], r["k"]) for r in out] == [
        (1, False, 1, 1), (1, False, 1, 1), (1, False, 1, 2), (2, True, None, None),
        (2, False, 1, 5), (3, True, None, None), (4, True, None, None)]


def test_bad_subscriptions_name_what_is_wrong(cat):
    with pytest.raises(KeyError, match="nope"):
        cat.subscribe("nope")
    with pytest.raises(SQLError, match="unknown catalog item 'nope'"):
        cat.execute("SUBSCRIBE nope")
    with pytest.raises(ValueError, match="as_of 5 is after the catalog's now 1"):
        cat.subscribe("t", as_of=5)
    cat.execute("CREATE TABLE late (k INT)")
    cat.execute("INSERT INTO late VALUES (1)")
    with pytest.raises(ValueError, match="'late' did not exist at time 0 \\(its since is 1\\)"):
        cat.subscribe("late", as_of=0)
    with pytest.raises(ValueError, match="'late' did not exist at time 0"):
        cat.subscribe("SELECT * FROM late", as_of=0)
    with pytest.raises(ValueError, match="up_to 0 is before as_of 2"):
        cat.subscribe("t", up_to=0)
    with pytest.raises(UnsupportedSQL, match="mz_now"):
        cat.subscribe("SELECT k FROM t WHERE v < mz_now()")
    with pytest.raises(SQLError):
        cat.subscribe("SELECT nope FROM t")
    with pytest.raises(TypeError, match="object name or a query"):
        cat.subscribe(3)
    with pytest.raises(ValueError, match="as_of=7 is given"):
        cat.sql("SUBSCRIBE t AS OF 1", as_of=7)


# ----------------------------------------------------------------------------- durable


def test_a_subscription_follows_another_handles_commits(tmp_path):
    a = colmz.Catalog(tmp_path)
    a.execute("CREATE TABLE t (k BIGINT, v BIGINT); INSERT INTO t VALUES (1, 1)")
    b = colmz.Catalog(tmp_path)
    subs = [b.subscribe("t"), b.subscribe("SELECT k, sum(v) AS s FROM t GROUP BY k")]
    got = [list(s) for s in subs]
    for i in range(2, 6):  # several commits between two reads: b's memory starts at the last
        a.execute(f"INSERT INTO t VALUES ({i % 2}, {i})")
    a.execute("DELETE FROM t WHERE v = 2")
    for g, s in zip(got, subs):
        g += list(s)
        assert s.frontier == a.now + 1
    for t in range(1, a.now + 1):
        assert integrate(got[0], t) == rows(a.read("t", as_of=t))
        assert integrate(got[1], t) == counted(a.sql("SELECT k, sum(v) AS s FROM t GROUP BY k", as_of=t))
    # A reopened catalog (memory from now on) reads the history back from the arrangements.
    c = colmz.Catalog(tmp_path)
    assert c.object("t").collection.since == c.now
    for target in ("t", "SELECT k, sum(v) AS s FROM t GROUP BY k"):
        again = [b.to_pylist() for b in c.subscribe(target, as_of=1)]
        assert again == [b.to_pylist() for b in got[target != "t"]]


def test_a_subscription_behind_a_compaction_says_so_and_keeps_its_frontier(tmp_path):
    a = colmz.Catalog(tmp_path, maintain_every=1)
    a.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
    b = colmz.Catalog(tmp_path)
    sub = b.subscribe("t")
    list(sub)
    before = sub.frontier
    a.execute("INSERT INTO t VALUES (2)")
    a.execute("INSERT INTO t VALUES (3)")
    with pytest.raises(CompactedAway, match="'t': its changes from time 2 are no longer held"):
        list(sub)
    assert sub.frontier == before


def test_follow_sees_commits_of_another_process(tmp_path):
    import subprocess
    import sys

    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k BIGINT); INSERT INTO t VALUES (1)")
    sub = cat.subscribe("SELECT count(*) AS n FROM t")
    assert [b.to_pylist() for b in sub] == [[(1, 1, 1)]]
    child = subprocess.run(
        [sys.executable, "-c", "import colmz, sys; c = colmz.Catalog(sys.argv[1]); "
         "c.execute('INSERT INTO t VALUES (2)'); c.execute('INSERT INTO t VALUES (3), (4)')", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    got = []
    for b in sub.follow(timeout=0):
        got.append(b.to_pylist())
    assert got == [[(1, 2, -1), (2, 2, 1)], [(2, 3, -1), (4, 3, 1)]]
    assert sub.frontier == cat.now + 1 == 4
