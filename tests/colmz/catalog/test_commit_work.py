"""Work counters of one-row commits to a table read by materialized views: what a commit
touches is bounded by its change (and the fuel of merges in progress), never by the table.

Counted per commit: the table's row-count index (``counts_work``: rows added, merged and
searched for the retraction check), rows read back from every collection (``updates_read``),
the views' operators' arrangements (``MaintainedView.last_work``) and the shared arrangements'
inserts and merges, and the rows the views' sinks consolidated.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import colmz
import colmz.rows

VIEWS = {
    "s": "SELECT k, sum(v) AS s, count(*) AS c FROM t GROUP BY k",
    "j": "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.uk",
}


def _catalog(n: int) -> colmz.Catalog:
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT); CREATE TABLE u (uk BIGINT, w BIGINT)")
    cat.append("t", pa.table({"k": np.arange(n) % (n // 10), "v": np.arange(n)}))
    cat.append("u", pa.table({"uk": np.arange(n // 10), "w": np.arange(n // 10)}))
    for name, body in VIEWS.items():
        cat.execute(f"CREATE MATERIALIZED VIEW {name} WITH (INCREMENTAL = 'require') AS {body}")
    return cat


def _work(cat: colmz.Catalog) -> int:
    total = 0
    for name in ("t", "u", *VIEWS):
        stats = cat.object(name).collection.stats
        total += stats["updates_read"] + stats.get("counts_work", 0)
    for name in VIEWS:
        mv = cat.object(name).maintained
        total += mv.sink.rows_consolidated
        for a in mv.arrangements():
            if getattr(a, "shared", False):  # the shared arrangement's own inserts and merges
                total += a.base.rows_inserted + a.base.rows_merged
    return total


def _row(k: int, v: int, diff: int) -> colmz.Updates:
    return colmz.Updates({"k": pa.array([k], pa.int64()), "v": pa.array([v], pa.int64())}, time=[0], diff=[diff])


def _changes(n: int) -> list[colmz.Updates]:
    """One-row commits of each kind: a new row in, a row of the table out, a row's value
    changed (its old row out and the new one in, in one commit)."""
    out = []
    for i in range(12):
        k, v = (7 * i) % (n // 10), 7 * i  # row 7i of the table: k = 7i mod n/10, v = 7i
        out.append(_row(i, -1 - i, 1))
        out.append(_row(k, v, -1))
        out.append(colmz.concat([_row(k + 1, v + 1, -1), _row(k + 1, -5 - i, 1)]))
    return out


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_one_row_commits_touch_what_they_change_not_the_table(n):
    cat = _catalog(n)
    # the views' operators' per-commit work (last_work) and the whole commit's counters
    worst, worst_ops = 0, 0
    for change in _changes(n):
        before = _work(cat)
        cat.append("t", change, time=cat.now + 1)
        worst = max(worst, _work(cat) - before)
        for name in VIEWS:
            worst_ops = max(worst_ops, sum(w for _, _, w in cat.object(name).maintained.last_work))
    # a few rows per run searched and merged at once, plus the fuel of merges in progress:
    # a constant, not n (the table's first retraction used to index all n rows)
    assert worst <= 2_000 and worst_ops <= 1_000, (n, worst, worst_ops)
    for name, body in VIEWS.items():  # and the views are right
        held = colmz.rows.expand(cat.read(name))
        got = sorted(zip(*[held.column(c).to_pylist() for c in held.column_names]))
        want = cat.sql(body)
        assert got == sorted(zip(*[want.column(c).to_pylist() for c in want.column_names]))


def test_a_change_that_cancels_commits_nothing_to_the_views():
    # A batch whose rows cancel (a row in and out in one append) consolidates to nothing: the
    # commit happens, the views read an empty change.
    cat = _catalog(100)
    before = {name: cat.read(name).to_pylist() for name in VIEWS}
    cat.append("t", colmz.concat([_row(3, 3, 1), _row(3, 3, -1)]), time=cat.now + 1)
    assert {name: cat.read(name).to_pylist() for name in VIEWS} == {
        name: [(*r[:-2], cat.now, r[-1]) for r in rows] for name, rows in before.items()}


def test_a_batch_at_its_own_time_of_the_tables_types_is_committed_as_given():
    # no second Updates built per commit: the batch (one time, the table's types) is the one
    # the engine writes; a batch given another time, or of other types, is rebuilt
    from colmz.catalog.frames import table_batch

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT)")
    schema = cat.object("t").schema
    u = colmz.Updates({"k": pa.array([4], pa.int64())}, time=[7], diff=[-1])
    assert table_batch("t", schema, u, None, 3) == (u, 7) and table_batch("t", schema, u, None, 3)[0] is u
    moved, t = table_batch("t", schema, u, 9, 3)
    assert moved is not u and t == 9 and moved.to_pylist() == [(4, 9, -1)]
    narrow = colmz.Updates({"k": pa.array([4], pa.int32())}, time=[7], diff=[1])
    cast, _ = table_batch("t", schema, narrow, None, 3)
    assert cast is not narrow and cast.schema == u.schema and cast.to_pylist() == [(4, 7, 1)]


def test_an_empty_batch_shares_its_empty_columns():
    # a step that changes nothing returns Updates.empty: one empty Arrow array per type, made once
    a = colmz.Updates.empty({"k": pa.int64(), "s": pa.string()})
    b = colmz.Updates.empty({"x": pa.int64()})
    assert a.column("k") is b.column("x") and len(a) == 0 and a.column("s").type == pa.string()


def test_a_key_held_once_is_found_with_a_probe_or_two_past_the_left_search():
    # search_range gallops from the left end: the right end of a key held once (a consolidated
    # run's row) costs at most two probes more than the left search, not a second binary search
    from colmz.order import search_range, search_rows

    class Probed(np.ndarray):
        probes = 0

        def __getitem__(self, i):
            if isinstance(i, (int, np.integer)):
                Probed.probes += 1
            return super().__getitem__(i)

    n = 1 << 12
    rows = np.stack([np.arange(n, dtype=np.uint64), np.arange(n, dtype=np.uint64) * 3], axis=1).view(Probed)
    for key in ([1000, 3000], [1000, 3001], [n - 1, 3 * (n - 1)]):
        q = np.array([key], np.uint64)
        Probed.probes = 0
        lo, hi = search_range(rows, q)
        both = Probed.probes
        Probed.probes = 0
        assert lo.tolist() == search_rows(rows, q, "left").tolist()
        left = Probed.probes
        Probed.probes = 0
        assert hi.tolist() == search_rows(rows, q, "right").tolist()
        right = Probed.probes
        assert both <= left + 2 < left + right and left <= n.bit_length()
