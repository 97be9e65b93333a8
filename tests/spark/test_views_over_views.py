"""Views over views on Spark (``colmz.spark.views.bucketed_views``): each view its own
dataflow per key bucket, its output delta emitted and fed to the views reading it, every
view's state in the one compare-and-set; each view's accumulated output compared with the
in-process catalog's view after every commit."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from test_stages import SCHEMAS, SPARK_TYPES, churn, random_delta, rows, updates

import colmz
from colmz.spark.views import BucketState, bucketed_views, step_buckets

VIEWS = {
    "m": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "j": "SELECT m.k, m.s, u.w FROM m JOIN u ON m.k = u.k",   # a view joined with a table
    "n": "SELECT s, count(*) AS c FROM m GROUP BY s",         # m's output re-bucketed by s
    "g": "SELECT count(*) AS c, sum(s) AS total FROM j",      # a global aggregate over a view over a view
}


def test_the_views_are_members_each_reading_the_ones_before():
    v = bucketed_views(VIEWS, SCHEMAS)
    assert v.kind == "views" and v.tables == ("t", "u")
    assert [(n, m.kind, m.tables) for n, m in v.members()] == [
        ("m", "plan", ("t",)), ("j", "plan", ("m", "u")), ("n", "plan", ("m",)), ("g", "global", ("j",))]
    names = [n for n, _ in v.states()]
    assert len(names) == len(set(names)) and {n.split(".")[0] for n in names} == {"0", "1", "2", "3"}
    with pytest.raises(ValueError, match=r"view 'a' \(each view reads tables and the views given before it\)"):
        bucketed_views({"a": "SELECT k FROM b", "b": "SELECT k FROM t"}, SCHEMAS)
    with pytest.raises(ValueError, match="view 't' has the name of a table"):
        bucketed_views({"t": "SELECT k FROM u"}, SCHEMAS)
    with pytest.raises(ValueError, match="views must map view names to SQL"):
        bucketed_views({}, SCHEMAS)


@pytest.mark.spark
def test_every_view_over_views_is_emitted_and_equals_the_catalogs(spark, tmp_path):
    view = bucketed_views(VIEWS, SCHEMAS)
    url = str(tmp_path / "store")
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w TEXT)")
    for name, query in VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    rng = random.Random(7)
    held = {n: Counter() for n in SCHEMAS}
    total: dict[str, list] = {n: [] for n in VIEWS}
    steps = 5
    for t in range(1, steps + 1):
        if t == steps:
            data = {n: [(*r, t, -c) for r, c in h.items()] for n, h in held.items()}
        else:
            data = {n: random_delta(rng, held[n], t, n) for n in SCHEMAS}
        for n, d in data.items():  # one catalog commit per table (the contents are compared)
            if d:
                cat.append(n, updates(d, SCHEMAS[n]), time=cat.now + 1)
        state = BucketState.open(url, view, 2)
        frames = [spark.createDataFrame(data[n], SPARK_TYPES[n]) for n in view.tables]
        out = step_buckets(spark, state, frames, t, compact_runs=3)
        assert sorted(out) == sorted(VIEWS)
        for name in VIEWS:
            total[name].append(out[name])
            assert rows(colmz.concat(total[name])) == rows(cat.read(name)), (name, t)
        again = BucketState.open(url, view, 2)
        assert (again.time, again.seqno) == (t, t)  # every view's state in one compare-and-set
        if t < steps:
            touched = {n.split(".")[0] for b in range(2) for n, _ in view.states() if again.runs(b, n)}
            [(count, *_)] = rows(colmz.concat(total["g"]))  # g's state: empty while j is
            assert touched == {"0", "1", "2"} | ({"3"} if count else set()), t
        # the join member's arrangements (stored key columns first) read back in their order
        joined = [n for n, _ in view.states() if n.startswith("1.")]
        assert all(again.contents(b, n).column_names == [c.name for c in dict(view.states())[n]]
                   for b in range(2) for n in joined)
    assert rows(cat.read("g")) == [(0, None, 1)]  # the global row over the empty view


#: A temporal filter in a view other views read: its flips come out without input, each at
#: its own time, and are the delta of the views over it (regrouped, joined, aggregated).
TEMPORAL_VIEWS = {
    "live": "SELECT k, v FROM t WHERE mz_now() <= v",
    "per": "SELECT k, count(*) AS c, max(v) AS hi FROM live GROUP BY k",
    "j": "SELECT live.k, live.v, u.w FROM live JOIN u ON live.k = u.k",
    "g": "SELECT count(*) AS c, min(v) AS lo FROM live",
}


def timed_delta(rng: random.Random, held: Counter, t: int, table: str) -> list:
    """As ``random_delta``, ``t``'s values times ahead (a row of ``t`` visible until its
    ``v``, some already past, some NULL)."""
    if table == "t":
        return churn(rng, held, t, lambda r: (r.choice([1, 2, 3, 4, 5, None]), r.choice([*range(t - 1, t + 8), None])),
                     most=5, p_retract=0.3)
    return churn(rng, held, t, lambda r: (r.choice([1, 2, 3, 4, 5, None]), r.choice("xyz")), most=5, p_retract=0.3)


@pytest.mark.spark
def test_a_temporal_filter_in_a_view_read_by_views_equals_the_catalogs(spark, tmp_path):
    """The temporal filter's view and the views reading it equal the catalog's views at
    every step: steps with input (inserts, retractions before and after a row's flip, NULL
    keys and bounds) and without (flips alone come due, some several steps after the last
    input, one step covering two flip times), the state reopened before each step."""
    view = bucketed_views(TEMPORAL_VIEWS, SCHEMAS)
    assert [m.kind for _, m in view.members()] == ["stages", "plan", "plan", "global"]
    url = str(tmp_path / "store")
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (k BIGINT, w TEXT)")
    for name, query in TEMPORAL_VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    rng = random.Random(18)
    held = {n: Counter() for n in SCHEMAS}
    total: dict[str, list] = {n: [] for n in TEMPORAL_VIEWS}
    flipped = set()
    for t in (2, 4, 6, 8, 11, 13, 16, 19, 22, 30):
        quiet = t in (8, 13, 19, 22, 30)  # nothing changes: flips come due anyway
        data = {n: [] if quiet else timed_delta(rng, held[n], t, n) for n in SCHEMAS}
        # the catalog commits one table per time: u's change just before (the views' contents
        # at t are those of the tables at t), t's (empty: the time moves on) at t
        if data["u"]:
            cat.append("u", updates(data["u"], SCHEMAS["u"]), time=t - 1)
        cat.append("t", updates(data["t"], SCHEMAS["t"]), time=t)
        assert cat.now == t
        state = BucketState.open(url, view, 3)
        frames = [spark.createDataFrame(data[n], SPARK_TYPES[n]) for n in view.tables]
        out = step_buckets(spark, state, frames, t, compact_runs=3)
        for name in TEMPORAL_VIEWS:
            total[name].append(out[name])
            assert rows(colmz.concat(total[name])) == rows(cat.read(name)), (name, t)
        if quiet and len(out["live"]):
            flipped.add(t)
        assert all(time <= t for time in out["live"].time.tolist()), t  # each flip at its own time
    assert flipped == {8, 13, 19, 22, 30}, flipped  # every step without input emitted flips
    assert rows(cat.read("live")) == []  # every bound passed by the last step
