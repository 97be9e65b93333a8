"""Arrangements shared between views (``colmz.dataflow.shared``).

Pipelines whose inputs read the shared arrangements -- fed each step's changes before the
step, as the catalog's engine feeds them -- must step exactly as the same pipelines with
their own arrangements: self-joins, three-way joins with several inputs changing at once
(Materialize's ``<``/``<=`` rule with the arrangement already holding the changes), NULL
join keys, min/max over the arranged input. In a catalog, views sharing arrangements must
equal ``Catalog(views="recompute")`` after every script (DROP of a sharer, views over
views, multi-statement transactions, failed commits rolled back with the catalog), a change
is inserted into a shared arrangement once per commit, and two views sharing hold about one
arrangement's bytes.
"""

from __future__ import annotations

import dataflow_model as dm
import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from test_maintained import POOLS, TABLES, check_equal, contents, insert, run, statement, views_of

import colmz
from colmz.dataflow import KeyedArrangement
from colmz.dataflow.plan import plan, render
from colmz.dataflow.shared import SharedArrangements, SharedInput, SharedSource, arrangement_id
from colmz.ops import consolidate
from colmz.sql import SQLError

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

T = {"k": pa.int64(), "v": pa.int64()}
U = {"k": pa.int64(), "w": pa.int64()}
SCHEMAS = {"t": T, "u": U}
T_POOL = [(None, 1), (1, 1), (1, 2), (2, 5), (2, None), (3, 0), (1, 1)]
U_POOL = [(None, 7), (1, 7), (2, 8), (2, 9), (4, 0)]

#: Pipelines whose arranged inputs are ``Get`` s: self-joins, three-way joins, min/max, both
#: reduction types together.
QUERIES = [
    "SELECT a.k, a.v, b.v AS v2 FROM t a JOIN t b ON a.k = b.k",
    "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    "SELECT a.v, b.v AS v2, u.w FROM t a JOIN u ON a.k = u.k JOIN t b ON b.k = u.k",
    "SELECT a.v, u.w, b.v AS v2 FROM t a JOIN t b ON a.v = b.k JOIN u ON u.k = b.v",
    "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    "SELECT max(w) AS hi, min(w) AS lo FROM u",
    "SELECT k, max(v) AS hi, count(*) AS n, sum(v) AS s FROM t GROUP BY k",
    "SELECT t.k AS tk, t.v, u.k AS uk, u.w FROM t FULL JOIN u ON t.k = u.k",
    "SELECT a.k, a.v, b.v AS v2 FROM t a LEFT JOIN t b ON a.k = b.v",
    "SELECT t.v, u.k, u.w FROM t RIGHT JOIN u ON u.k = t.k",
    "SELECT k, string_agg(v::text, ',' ORDER BY v) AS vs FROM t GROUP BY k",
    "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS rn FROM t",
]


def _deltas(steps_t, steps_u, i: int, time: int) -> dict:
    out = {}
    for name, steps, schema in (("t", steps_t, T), ("u", steps_u, U)):
        step = steps[i] if i < len(steps) else []
        if step:
            out[name] = consolidate(dm.batch(schema, [r for r, _ in step], [d for _, d in step], time))
    return out


# ---------------------------------------------------------------------------- operators


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=us.examples(10), deadline=None)
@given(steps_t=dm.change_steps(T_POOL), steps_u=dm.change_steps(U_POOL))
def test_pipelines_on_shared_arrangements_step_as_with_their_own(query, steps_t, steps_u):
    p = plan(query, SCHEMAS)
    own = render(p)
    reg = SharedArrangements()
    shared = render(p, shared=SharedSource(reg, SCHEMAS, lambda n: colmz.Updates.empty(SCHEMAS[n]), 0))
    assert shared.shared, "the query's arranged inputs are Gets: they should be shared"
    reg.attach("view", [s.ident for s in shared.shared])
    for i in range(max(len(steps_t), len(steps_u))):
        time = i + 1
        deltas = _deltas(steps_t, steps_u, i, time)
        for name, d in deltas.items():  # fed before the pipeline steps, as the engine does
            reg.feed(name, time, d)
        read = {n: d for n, d in deltas.items() if n in p.tables}
        a, b = own.step(time, read), shared.step(time, read)
        assert us.as_dict(a) == us.as_dict(b), f"step {time} of {query}"


def test_self_join_reads_the_later_input_without_its_change():
    # t JOIN t with both sides changing in one step: Δa⋈B_old + A_new⋈Δb counts each pair once
    p = plan("SELECT a.k, a.v, b.v AS v2 FROM t a JOIN t b ON a.k = b.k", SCHEMAS)
    reg = SharedArrangements()
    pipe = render(p, shared=SharedSource(reg, SCHEMAS, lambda n: colmz.Updates.empty(SCHEMAS[n]), 0))
    d = colmz.Updates({"k": [1, 1], "v": [1, 2]}, time=[1, 1], diff=[1, 1])
    reg.feed("t", 1, d)
    out = pipe.step(1, {"t": d})
    assert sorted(out.to_pylist()) == [(1, 1, 1, 1, 1), (1, 1, 2, 1, 1), (1, 2, 1, 1, 1), (1, 2, 2, 1, 1)]
    # one of the two inputs' paths alone would give each pair twice or not at all
    (arr,) = {id(s.base): s.base for s in pipe.shared}.values()
    assert arr.rows_inserted == 2  # fed once, though both join inputs read it


def test_a_shared_join_drops_rows_with_a_null_join_column():
    # b.v is a join column of b (b.v = u.k); the shared arrangement of t by k holds rows with
    # v NULL, which an own arrangement (fed joinable rows only) never holds
    p = plan("SELECT a.v, u.w, b.v AS v2 FROM t a JOIN t b ON a.v = b.k JOIN u ON u.k = b.v", SCHEMAS)
    reg = SharedArrangements()
    pipe = render(p, shared=SharedSource(reg, SCHEMAS, lambda n: colmz.Updates.empty(SCHEMAS[n]), 0))
    own = render(p)
    dt = colmz.Updates({"k": [1, 1, 2], "v": [2, None, None]}, time=[1] * 3, diff=[1] * 3)
    du = colmz.Updates({"k": [None], "w": [5]}, time=[1], diff=[1], schema=U)
    reg.feed("t", 1, dt)
    reg.feed("u", 1, du)
    assert us.as_dict(pipe.step(1, {"t": dt, "u": du})) == us.as_dict(own.step(1, {"t": dt, "u": du}))
    assert not len(pipe.step(2, {}))


def test_registry_reference_counts_and_frees():
    reg = SharedArrangements()
    arr = reg.arrangement("t", ["k"], T, lambda: colmz.Updates({"k": [1], "v": [2]}, time=[0], diff=[1]), 1)
    assert reg.arrangement("t", ("k",), T, lambda: pytest.fail("filled twice"), 1) is arr
    reg.attach("v1", [("t", ("k",))])
    reg.attach("v2", [("t", ("k",))])
    assert reg.users("t", ["k"]) == 2 and len(reg) == 1 and reg.arranges("t") and not reg.arranges("u")
    reg.release("v1")
    assert reg.users("t", ["k"]) == 1 and ("t", ("k",)) in reg
    reg.release("v2")
    assert len(reg) == 0 and reg.users("t", ["k"]) == 0
    with pytest.raises(KeyError, match="no shared arrangement"):
        reg.get("t", ["k"])
    # one made for operators that were not kept is discarded; one in use is not
    reg.arrangement("t", ["v"], T, lambda: colmz.Updates.empty(T), 1)
    reg.arrangement("t", ["k"], T, lambda: colmz.Updates.empty(T), 1)
    reg.attach("v3", [("t", ("k",))])
    assert len(reg) == 2  # attaching frees nothing (a restored entry waits for its views)
    reg.discard([("t", ("v",)), ("t", ("k",))])
    assert list(reg) == [("t", ("k",))]
    reg.release("v3")
    assert len(reg) == 0
    with pytest.raises(KeyError, match="to attach"):
        reg.attach("v4", [("t", ("k",))])
    with pytest.raises(ValueError, match="key names column 'x'"):
        reg.arrangement("t", ["x"], T, lambda: colmz.Updates.empty(T), 1)
    assert arrangement_id("t", ["k", "v"]) == '["t", ["k", "v"]]'


def test_an_arrangement_in_use_with_other_columns_is_refused():
    reg = SharedArrangements()
    reg.arrangement("t", ["k"], T, lambda: colmz.Updates.empty(T), 1)
    reg.attach("v", [("t", ("k",))])
    with pytest.raises(ValueError, match="is in use"):
        reg.arrangement("t", ["k"], {"k": pa.int64()}, lambda: colmz.Updates.empty({"k": pa.int64()}), 1)
    reg.release("v")
    reg.arrangement("t", ["k"], T, lambda: colmz.Updates.empty(T), 1)  # recreated, no user yet
    narrow = {"k": pa.int64()}
    arr = reg.arrangement("t", ["k"], narrow, lambda: colmz.Updates.empty(narrow), 1)
    assert [c.name for c in arr.schema] == ["k"]


def test_shared_input_lookup_minus_the_delta():
    base = KeyedArrangement(T, ["k"])
    d = colmz.Updates({"k": [1, 1], "v": [1, 2]}, time=[1, 1], diff=[1, 1])
    base.insert(0, colmz.Updates({"k": [1], "v": [1]}, time=[0], diff=[1]))
    base.insert(1, d)
    s = SharedInput(SharedArrangements(), "t", base, (("k", "a.k"), ("v", "a.v")), ("a.k",))
    q, ql = colmz.order.encode_columns([pa.array([1, 7])], n=2)
    now = consolidate(s.lookup_words(q, ql).rows)
    assert now.column_names == ["a.k", "a.v"] and now.to_pylist() == [(1, 1, 1, 2), (1, 2, 1, 1)]
    before = s.lookup_words(q, ql, minus=colmz.Updates({"a.k": [1, 1], "a.v": [1, 2]}, time=[1, 1], diff=[1, 1]))
    assert set(before.query.tolist()) == {0}
    assert [r[:2] + r[3:] for r in consolidate(before.rows).to_pylist()] == [(1, 1, 1)]
    assert s.keys_searched > 0 and s.rows_found > 0 and s.rows_inserted == 0


# ---------------------------------------------------------------------------- catalogs

#: Views sharing arrangements: t by k (joins, self-join, min/max), u by k, a view's own
#: collection (a view over a view joined on its key).
SHARING = [
    ("j1", "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k"),
    ("j2", "SELECT a.k, a.v, b.s FROM t a JOIN t b ON a.k = b.k"),
    ("m", "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k"),
    ("j3", "SELECT t.k, u.w, r.b FROM t JOIN u ON t.k = u.k JOIN r ON r.k = u.k"),
    ("agg", "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k"),
    ("oj1", "SELECT agg.k, agg.s, u.w FROM agg JOIN u ON agg.k = u.k"),
    ("oj2", "SELECT agg.k, agg.c, t.v FROM agg JOIN t ON agg.k = t.k"),
    ("mm", "SELECT s, min(v) AS lo, max(k) AS hi, count(*) AS n FROM t GROUP BY s"),
    ("fo", "SELECT t.k AS tk, t.v, t.s, u.k AS uk, u.w FROM t FULL JOIN u ON t.k = u.k"),
    ("lo", "SELECT a.k, a.v, b.s FROM t a LEFT JOIN t b ON a.k = b.k"),
    ("sa", "SELECT k, string_agg(s, ',' ORDER BY s) AS ss, count(DISTINCT v) AS n FROM t GROUP BY k"),
]


def sharing_catalogs(names):
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    chosen = [(n, b) for n, b in SHARING if n in names or (n == "agg" and {"oj1", "oj2"} & set(names))]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        cat.execute(insert("t", POOLS["t"][:4]) + "; " + insert("u", POOLS["u"][:5]) + "; "
                    + insert("r", POOLS["r"][:4]))
        for n, b in chosen:
            cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    return cats


def _check_users(cat):
    """Every shared arrangement's users are exactly the live views reading it."""
    eng = cat._engine
    expect: dict = {}
    for n in views_of(cat):
        mv = cat.object(n).maintained
        for s in mv.shared:
            expect.setdefault(s.ident, set()).add(n)
    assert set(eng.shared) == set(expect)
    for ident, users in expect.items():
        assert eng.shared.users(*ident) == len(users)
        # and it holds the relation's contents now
        held = consolidate(eng.shared.get(*ident).snapshot())
        want = cat.object(ident[0]).collection.snapshot(cat.now)
        assert dm.counter_of(held) == dm.counter_of(want), ident


@st.composite
def sharing_script(draw):
    """One commit of 1-3 statements, a failing one, a DROP of a sharer, or CREATE of one."""
    kind = draw(st.sampled_from(["commit", "commit", "commit", "fail_after_commit", "fail_before", "drop", "create"]))
    stmts = draw(st.lists(statement(), min_size=1, max_size=3))
    if kind == "fail_after_commit":
        return "; ".join(stmts) + "; SELECT 1; " + stmts[0]
    if kind == "fail_before":
        return "; ".join(stmts) + "; INSERT INTO nowhere VALUES (1)"
    if kind == "drop":
        return "; ".join(stmts) + f"; DROP MATERIALIZED VIEW IF EXISTS {draw(st.sampled_from(['j1', 'j2', 'm', 'agg']))} CASCADE"
    name, body = draw(st.sampled_from(SHARING[:4]))
    return "; ".join(stmts) + f"; CREATE MATERIALIZED VIEW IF NOT EXISTS {name} AS {body}"


@settings(max_examples=us.examples(12), deadline=None)
@given(st.lists(st.sampled_from([n for n, _ in SHARING]), min_size=2, max_size=6, unique=True),
       st.lists(sharing_script(), min_size=1, max_size=6))
def test_views_sharing_arrangements_equal_the_recompute(names, scripts):
    cats = sharing_catalogs(names)
    check_equal(cats, "creation")
    _check_users(cats[0])
    for text in scripts:
        a, b = run(cats, text)
        assert a == b, text
        check_equal(cats, text)
        _check_users(cats[0])


def test_a_failed_commit_rolls_the_shared_arrangements_back():
    inc, rec = sharing_catalogs(["j1", "j2", "m"])
    arr = inc._engine.shared.get("t", ["k"])
    before = (dm.counter_of(consolidate(arr.snapshot())), arr.rows_inserted)
    for cat in (inc, rec):
        with pytest.raises(SQLError, match="nowhere"):
            # the writes commit (the arrangements fed, the views stepped), then the script fails
            cat.execute("INSERT INTO t VALUES (1, 5, 'z'), (7, 1, 'q'); SELECT 1; SELECT * FROM nowhere")
    assert inc._engine.shared.get("t", ["k"]) is arr  # rolled back in place: the views still read it
    assert dm.counter_of(consolidate(arr.snapshot())) == before[0]
    assert arr.rows_inserted == before[1] + 2  # the work happened (a counter), the state is undone
    check_equal([inc, rec])
    for cat in (inc, rec):
        cat.execute("INSERT INTO t VALUES (1, 6, 'y'); DELETE FROM t WHERE k = 2")
    check_equal([inc, rec])
    _check_users(inc)


def test_drop_releases_and_the_last_user_frees():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(insert("t", POOLS["t"]))
    for n, b in SHARING[:3]:
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    reg = cat._engine.shared
    assert reg.users("t", ["k"]) == 3 and reg.users("u", ["k"]) == 1
    cat.execute("DROP MATERIALIZED VIEW j1")
    assert reg.users("t", ["k"]) == 2 and ("u", ("k",)) not in reg
    cat.execute("DROP MATERIALIZED VIEW j2; DROP MATERIALIZED VIEW m")
    assert len(reg) == 0
    # a failed DROP leaves the users
    cat.execute(f"CREATE MATERIALIZED VIEW m AS {SHARING[2][1]}")
    with pytest.raises(KeyError):
        cat.execute("DROP MATERIALIZED VIEW m; DROP MATERIALIZED VIEW nope")
    assert reg.users("t", ["k"]) == 1


def test_a_change_is_inserted_once_per_commit_not_once_per_view():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(insert("t", POOLS["t"]) + "; " + insert("u", POOLS["u"]))
    for n, b in SHARING[:3]:  # three views arranging t by k, one of them twice (a self-join)
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    arr = cat._engine.shared.get("t", ["k"])
    for rows in ([(1, 1, "a")], [(2, 3, "b"), (5, 5, None), (1, 1, "a")]):
        before = arr.rows_inserted
        cat.execute(insert("t", rows))
        assert arr.rows_inserted - before == len(set(rows)), rows  # the consolidated change, once
    # the views' operators read it and hold no arrangement of t by k of their own
    for n in ("j1", "j2", "m"):
        for _, _, op, _, _ in cat.object(n).maintained._pipeline.steps():
            for a in getattr(op, "arrangements", {}).values() if hasattr(op, "arrangements") else []:
                assert isinstance(a, SharedInput)


def test_two_views_sharing_hold_about_one_arrangement():
    n = 2_000
    rows_t = [(i % 50, i, "s") for i in range(n)]
    rows_u = [(i, "w") for i in range(50)]
    one_view, two_views = colmz.Catalog(), colmz.Catalog()
    for cat in (one_view, two_views):
        cat.execute(TABLES[0] + "; " + TABLES[1])
        cat.execute(insert("t", rows_t) + "; " + insert("u", rows_u))
    join = "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k"
    one_view.execute(f"CREATE MATERIALIZED VIEW a AS {join}")
    two_views.execute(f"CREATE MATERIALIZED VIEW a AS {join}")
    two_views.execute("CREATE MATERIALIZED VIEW b AS SELECT t.s, u.w FROM t JOIN u ON u.k = t.k")
    shared = two_views._engine.shared
    assert len(shared) == 2 and shared.nbytes == one_view._engine.shared.nbytes
    # the same join rendered alone holds its own arrangements of about that size: two views
    # without sharing would hold twice as much
    schemas = {n: two_views.object(n).schema for n in ("t", "u")}
    own = render(plan(join, schemas))
    snaps = {n: two_views.object(n).collection.snapshot(two_views.now) for n in ("t", "u")}
    own.step(1, {n: colmz.Updates({c: s.column(c) for c in s.column_names}, time=[1] * len(s), diff=s.diff)
                 for n, s in snaps.items()})
    (join_op,) = [op for op in own.operators if hasattr(op, "arrangements")]
    alone = sum(a.nbytes for a in join_op.arrangements.values())
    assert 0.9 * alone <= shared.nbytes <= 1.1 * alone
    # each view's EXPLAIN names the arrangement, shared by two views, its rows and bytes
    # (its runs' and their key indexes')
    arr = shared.get("t", ["k"])
    size = (f"{arr.nbytes + arr.index_nbytes} bytes ({arr.nbytes} runs + {arr.index_nbytes} key index)"
            if arr.index_nbytes else f"{arr.nbytes} bytes")
    for v in ("a", "b"):
        text = str(two_views.explain(v))
        assert f"""shared KeyedArrangement ["t", ["k"]] by ['t.k'] (shared by 2 views) {len(arr)} rows, {size}""" in text


def test_reopened_durable_catalog_rebuilds_the_shared_arrangements(tmp_path):
    cat = colmz.Catalog(tmp_path / "c")
    cat.execute("; ".join(TABLES))
    cat.execute(insert("t", POOLS["t"]) + "; " + insert("u", POOLS["u"]))
    for n, b in SHARING[:3]:
        cat.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    cat.execute("DELETE FROM t WHERE k = 1")
    want = {n: contents(cat, n) for n in ("j1", "j2", "m")}
    again = colmz.Catalog(tmp_path / "c")
    assert {n: contents(again, n) for n in want} == want
    _check_users(again)
    cat.execute("INSERT INTO t VALUES (1, 1, 'a')")  # the first handle writes; the reopened one refreshes
    again.execute("INSERT INTO u VALUES (1, 'q')")
    rec = colmz.Catalog(views="recompute")
    rec.execute("; ".join(TABLES))
    rec.execute(insert("t", [r for r in POOLS["t"] if r[0] != 1] + [(1, 1, "a")]) + "; " + insert("u", POOLS["u"] + [(1, "q")]))
    for n, b in SHARING[:3]:
        rec.execute(f"CREATE MATERIALIZED VIEW {n} AS {b}")
    assert {n: contents(again, n) for n in want} == {n: contents(rec, n) for n in want}


def test_a_write_joining_the_commit_at_now_feeds_the_shared_arrangements_once():
    inc, rec = sharing_catalogs(["j1", "j3"])
    for cat in (inc, rec):
        cat.execute("INSERT INTO t VALUES (99, 1, 'a')")
        # joins the commit at now: undone (the shared arrangements too) and redone with both writes
        cat.execute("INSERT INTO t VALUES (98, 2, 'b')", time=cat.now)
    arr = inc._engine.shared.get("t", ["k"])
    held = dm.counter_of(consolidate(arr.snapshot()))
    assert held[(99, 1, "a")] == 1 and held[(98, 2, "b")] == 1
    _check_users(inc)
    for cat in (inc, rec):
        cat.execute("INSERT INTO u VALUES (99, 'z'), (98, 'y'); INSERT INTO r VALUES (99, true, 1.0)")
    check_equal([inc, rec])
    assert contents(inc, "j1")[(99, 1, "z")] == 1 and contents(inc, "j1")[(98, 2, "y")] == 1


def test_views_over_a_continual_task_share_its_arrangement():
    # a task's output is a collection like any other: fed after the task runs, before the
    # views reading it step
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("CREATE TABLE ev (key INT, val INT); CREATE TABLE names (key INT, name TEXT)")
        cat.execute("""CREATE CONTINUAL TASK latest (key INT, val INT) ON INPUT ev AS (
            DELETE FROM latest WHERE key IN (SELECT key FROM ev);
            INSERT INTO latest SELECT key, max(val) FROM ev GROUP BY key)""")
        cat.execute("INSERT INTO ev VALUES (1, 5), (2, 7); INSERT INTO names VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        cat.execute("CREATE MATERIALIZED VIEW named AS SELECT l.key, l.val, n.name FROM latest l JOIN names n "
                    "ON l.key = n.key")
        cat.execute("CREATE MATERIALIZED VIEW top AS SELECT key, max(val) AS hi FROM latest GROUP BY key")
    for text in ("INSERT INTO ev VALUES (1, 9), (3, 1)", "INSERT INTO ev VALUES (1, 2); DELETE FROM names WHERE key = 2",
                 "INSERT INTO ev VALUES (2, 8), (3, 4); INSERT INTO names VALUES (3, 'd')"):
        for cat in cats:
            cat.execute(text)
        check_equal(cats, text)
        _check_users(cats[0])
    assert cats[0]._engine.shared.users("latest", ["key"]) == 2
