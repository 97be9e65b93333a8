"""Reads that merge (``colmz.arrangement.read``) against a consolidating oracle.

The oracle of a read is ``colmz.consolidate`` of every update written, the times kept at or
before the as_of and advanced to it (or to the since), sorted by data: the read must equal it
exactly -- values, order, times and diffs. Random arrangements cover the merge, the no-merge
proof (runs whose ranges do not meet), partial overlaps, unsealed batches beyond the trace
upper and beyond the seal, a since beyond the seal, empty and all-cancelling reads, NaN,
-0.0 and NULL values, long strings sharing a prefix (tie groups resolved on full
encodings), and times up to ``2**64 - 1``.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import colmz
import colmz.arrangement.fetched as fetched_mod
import colmz.arrangement.read as read_mod
import colmz.arrangement.read_words as words_mod
import colmz.rows
from colmz.arrangement import Arrangement
from colmz.arrangement.read import merged_read
from colmz.errors import NegativeMultiplicity

MAX = 2**64 - 1
SCHEMA = {"s": pa.string(), "f": pa.float64(), "i": pa.int64()}
_names = itertools.count()

# Strings: short ones (exact words), "a" and "a\0" (equal prefix words), long ones sharing
# a 12-byte prefix (prefix words that tie), the empty string, NULL.
STRINGS = st.sampled_from(["", "a", "a\0", "b", "zz", "prefix-0123-x", "prefix-0123-y" * 3,
                           "prefix-0123-y" * 3 + "!", None])
FLOATS = st.sampled_from([0.0, -0.0, 1.5, float("nan"), -2.0, None])
INTS = st.sampled_from([0, 1, -1, 2**62, -(2**63), None])


def updates_of(rows) -> colmz.Updates:
    s, f, i, t, d = zip(*rows) if rows else ((), (), (), (), ())
    return colmz.Updates({"s": pa.array(s, pa.string()), "f": pa.array(f, pa.float64()),
                          "i": pa.array(i, pa.int64())},
                         time=np.array(t, np.uint64), diff=np.array(d, np.int64))


def oracle(written, as_of, since) -> colmz.Updates:
    """Every update at or before ``as_of`` (all with None), times advanced to the read's
    since, consolidated and sorted by data."""
    rows = [r for r in written if as_of is None or r[3] <= as_of]
    s = since if as_of is None else max(since, as_of)
    return colmz.consolidate(updates_of(rows), order="data", since=s)


@st.composite
def histories(draw):
    """Steps on an arrangement: writes at or after the seal (some at ``2**64 - 1``), seals,
    maintain() (drains without compaction: fan-in above the batches), since advances (some
    beyond the seal)."""
    steps = []
    seal = 0
    for _ in range(draw(st.integers(1, 7))):
        n = draw(st.integers(0, 12))
        times = st.integers(seal, seal + 4) | st.just(MAX)
        cancel = draw(st.booleans())
        rows = []
        for _ in range(n):
            row = (draw(STRINGS), draw(FLOATS), draw(INTS), draw(times), draw(st.integers(-2, 2)))
            rows.append(row)
            if cancel:
                rows.append((*row[:4], -row[4]))  # an all-cancelling pair
        steps.append(("write", rows))
        if draw(st.booleans()):
            seal = draw(st.integers(seal, seal + 5))
            steps.append(("seal", seal))
        if draw(st.booleans()):
            steps.append(("maintain", None))
    if draw(st.booleans()):
        steps.append(("since", draw(st.integers(0, seal + 3))))
    return steps


def replay(url: str, steps, part_rows: int | None = None) -> tuple[Arrangement, list]:
    """An arrangement at ``url`` after ``steps``, and the rows written; parts of ``part_rows``
    rows (by default a few, drawn from the steps)."""
    a = Arrangement.open(url, SCHEMA, part_rows=part_rows or draw_rows(steps), fan_in=64)
    written = []
    for op, arg in steps:
        if op == "write":
            if arg:
                a.write(updates_of(arg))
                written += arg
        elif op == "seal":
            a.seal(arg)
        elif op == "maintain":
            a.maintain()
        else:
            a.advance_since(max(arg, a.since()))
    return a, written


def draw_rows(steps) -> int:
    # a few rows per part, so runs are several parts (deterministic from the steps)
    return 2 + sum(len(arg) for op, arg in steps if op == "write") % 5


def _check_all_reads(a: Arrangement, written) -> None:
    since, seal = a.since(), a.get_seal()
    for as_of in sorted({since, (since + seal) // 2, seal - 1} - {-1}):
        if since <= as_of < seal:
            got = a.read(as_of)
            assert got == oracle(written, as_of, since), as_of
            _check_unmerged(a, written, as_of, since)
    assert a.read() == oracle(written, None, since)
    assert a.snapshot() == oracle(written, None, since)
    _check_unmerged(a, written, None, since)


def _row_multiset(table: pa.Table) -> list[str]:
    return sorted(map(repr, table.to_pylist()))


def _check_unmerged(a: Arrangement, written, as_of, since) -> None:
    # read_unmerged: its rows are the oracle's rows repeated by their multiplicities
    # (NegativeMultiplicity exactly when the oracle has a negative one); told without a
    # merge whenever every update written in the window is positive, and with any share of
    # retractions allowed (RETRACTED_FRACTION 1) whenever the oracle has no negative
    # multiplicity. Cutting every piece by a filter (CUT_LIMIT 0) or around each reached row
    # gives the same.
    want = oracle(written, as_of, since)
    negative = bool(len(want)) and int(want.diff.min()) < 0
    for fraction, cut in [(None, None), (1.0, None), (1.0, 0)]:
        with pytest.MonkeyPatch.context() as mp:
            if fraction is not None:
                mp.setattr(fetched_mod, "RETRACTED_FRACTION", fraction)
            if cut is not None:
                mp.setattr(fetched_mod, "CUT_LIMIT", cut)
            f = a.read_unmerged(as_of)
            try:
                rows = f.rows()
            except NegativeMultiplicity:
                assert negative
                assert f.merge() == want
                continue
        assert not negative
        if all(r[4] > 0 for r in written if as_of is None or r[3] <= as_of) or fraction == 1.0:
            assert not f.merged
        assert rows.column_names == ["s", "f", "i"]
        assert _row_multiset(rows) == _row_multiset(colmz.rows.expand(want))
        assert f.merge() == want
        assert _row_multiset(f.rows()) == _row_multiset(rows)  # now from the merged contents


@settings(max_examples=80, deadline=None)
@given(histories())
def test_reads_match_the_consolidating_oracle_in_memory(steps):
    a, written = replay(f"mem://read-merge-{next(_names)}", steps)
    _check_all_reads(a, written)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_reads_match_the_oracle_on_local_disk_with_threads_and_ties(steps):
    # Local parts are read concurrently; a small PARALLEL_ROWS sends every read through the
    # two-thread merge (co_rank cuts), and EXACT_WORDS = 1 makes strings of 8 bytes and more
    # non-exact, so their ties go through the full-encoding resolution.
    d = tempfile.mkdtemp(prefix="colmz-read-merge-")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(read_mod, "PARALLEL_ROWS", 4)
            mp.setattr(words_mod, "EXACT_WORDS", 1)
            a, written = replay(d, steps)
            _check_all_reads(a, written)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_to_arrow_and_to_pandas_are_the_merged_read(tmp_path):
    a = Arrangement.open(str(tmp_path / "a"), SCHEMA, fan_in=64)
    written = []
    for t in range(4):
        rows = [(f"k{(i * 7 + t) % 11}", float(i), i, t, 1) for i in range(30)]
        a.write(updates_of(rows))
        written += rows
        a.seal(t + 1)
        if t < 3:
            a.maintain()
    assert len(a.trace_batches) == 3 and a.unsealed_batches
    want = oracle(written, 3, 0)
    assert a.to_arrow(3).equals(want.to_arrow())
    assert a.to_pandas(3).equals(want.to_pandas())
    assert a.snapshot() == oracle(written, None, 0)


# ---------------------------------------------------------------- merged_read itself


def _run(keys, t=0, d=1) -> colmz.Updates:
    u = colmz.Updates({"k": np.array(keys, np.int64)}, time=np.full(len(keys), t, np.uint64),
                      diff=np.full(len(keys), d, np.int64))
    return colmz.consolidate(u, order="data")


def test_disjoint_runs_are_concatenated_without_a_merge():
    stats = {}
    runs = [[_run([20, 21, 25])], [_run([1, 2])], [_run([7, 9]), _run([10, 11])]]
    out = merged_read(runs, 3, runs[0][0].schema, stats)
    assert out.column("k").to_pylist() == [1, 2, 7, 9, 10, 11, 20, 21, 25]
    assert out.time.tolist() == [3] * 9
    assert stats["merged"] is False and stats["runs"] == 3
    assert runs == [[], [], []]  # the read consumed its inputs


def test_overlapping_runs_merge_and_cancel():
    stats = {}
    runs = [[_run([1, 5, 9])], [_run([5, 6], d=-1)]]
    out = merged_read(runs, 0, runs[0][0].schema, stats)
    assert out.to_pylist() == [(1, 0, 1), (6, 0, -1), (9, 0, 1)]
    assert stats["merged"] is True and stats["tie_rows"] == 0  # int words are exact


def test_long_strings_sharing_eight_bytes_resolve_their_ties():
    x = "Acommon8b-tail"  # 15 bytes with its last: two exact words, or one prefix word
    a = colmz.Updates({"k": [x + "2", "B"]}, time=[0, 0], diff=[1, 1])
    b = colmz.Updates({"k": [x + "1", x + "2", "C"]}, time=[0, 0, 0], diff=[1, -1, 1])
    want = [x + "1", "B", "C"]
    stats = {}
    assert merged_read([[a], [b]], 0, a.schema, stats).column("k").to_pylist() == want
    assert stats["tie_rows"] == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(words_mod, "EXACT_WORDS", 1)
        stats = {}
        assert merged_read([[a], [b]], 0, a.schema, stats).column("k").to_pylist() == want
        assert stats["tie_rows"] == 3  # the three rows whose first 8 bytes are "Acommon8"


def test_empty_and_all_cancelling_reads():
    schema = _run([1]).schema
    assert len(merged_read([[], []], 0, schema)) == 0
    out = merged_read([[_run([1, 2])], [_run([1, 2], d=-1)]], 0, schema)
    assert len(out) == 0 and out.schema == schema


def test_diff_sums_leaving_int64_raise_for_the_exact_fallback():
    big = 2**62
    runs = [[_run([1], d=big)], [_run([1], d=big)]]
    with pytest.raises(OverflowError):
        merged_read(runs, 0, runs[0][0].schema)


def test_read_falls_back_to_the_streaming_merge_on_overflow(tmp_path):
    a = Arrangement.open(str(tmp_path / "a"), {"k": pa.int64()}, fan_in=64)
    for t, d in enumerate([2**62, 2**62, -(2**62)]):
        a.write(colmz.Updates({"k": [1]}, time=[t], diff=[d]))
        a.seal(t + 1)
        a.maintain()
    assert a.read(2).to_pylist() == [(1, 2, 2**62)]  # a partial sum leaves int64, the total not


@st.composite
def keyed_runs(draw):
    """Runs of (int64 key, long string, time, diff), each sorted by data and consolidated:
    the first column fixed-width, the second making the words inexact."""
    runs = []
    for _ in range(draw(st.integers(1, 5))):
        rows = draw(st.lists(st.tuples(st.sampled_from([-(2**63), -1, 0, 1, 7, 2**62]),
                                       st.sampled_from(["", "long-prefix-" * 2 + "a",
                                                        "long-prefix-" * 2 + "b", "z"]),
                                       st.integers(0, 4), st.integers(-2, 2)), max_size=12))
        runs.append(_sorted_run(rows, {"k": pa.int64(), "v": pa.string()}))
    return runs


def _sorted_run(rows, types: dict) -> colmz.Updates:
    # rows of (data..., time, diff) with data columns ``types``, consolidated and sorted
    cols = list(zip(*rows)) if rows else [()] * (len(types) + 2)
    u = colmz.Updates({name: pa.array(c, typ) for (name, typ), c in zip(types.items(), cols)},
                      time=np.array(cols[-2], np.uint64), diff=np.array(cols[-1], np.int64))
    return colmz.consolidate(u, order="data")


@settings(max_examples=150, deadline=None)
@given(keyed_runs(), st.integers(0, 5), st.booleans())
def test_words_of_the_first_column_alone_match_the_oracle(runs, since, force):
    # With FIRST_COLUMN_TIES = 1 every such read orders by the key's word alone (rows with
    # equal keys resolved on full encodings); with the default only keys distinct within runs.
    _merge_matches_oracle(runs, since, ("FIRST_COLUMN_TIES", 1.0) if force else None)


def _merge_matches_oracle(runs, since, setting=None) -> None:
    # merged_read of one-piece runs (with read_words' ``setting = (name, value)``) equals
    # consolidating their concatenation.
    with pytest.MonkeyPatch.context() as mp:
        if setting is not None:
            mp.setattr(words_mod, *setting)
        got = merged_read([[u] for u in runs], since, runs[0].schema)
    assert got == colmz.consolidate(colmz.concat(runs), order="data", since=since)


def test_random_keys_are_ordered_by_their_word_alone():
    # Distinct int64 keys beside 40-byte strings: one word a row (work counter: no tie rows).
    rng = np.random.default_rng(5)
    runs = []
    for r in range(3):
        keys = np.sort(rng.choice(2**40, 300, replace=False))
        runs.append([colmz.Updates({"k": pa.array(keys), "v": pa.array([f"{x:040d}" for x in keys])},
                                   time=np.full(300, r, np.uint64), diff=np.ones(300, np.int64))])
    stats = {}
    got = merged_read([list(r) for r in runs], 0, runs[0][0].schema, stats)
    assert stats["merged"] and stats["words"] == 1
    want = colmz.consolidate(colmz.concat([r[0] for r in runs]), order="data", since=0)
    assert got == want


@st.composite
def low_card_runs(draw):
    """Runs of (a first column of few values, int64, short string): first words that tie on
    most rows, packed with the next columns' into the lead words the merge moves."""
    runs = []
    for _ in range(draw(st.integers(1, 5))):
        rows = draw(st.lists(st.tuples(st.sampled_from([0, 1, 3, None]),
                                       st.sampled_from([-(2**63), -5, 0, 9, 2**63 - 1]),
                                       st.sampled_from(["", "a", "ab", "b"]),
                                       st.integers(0, 3), st.integers(-2, 2)), max_size=14))
        runs.append(_sorted_run(rows, {"r": pa.int8(), "k": pa.int64(), "v": pa.string()}))
    return runs


@settings(max_examples=150, deadline=None)
@given(low_card_runs(), st.integers(0, 4), st.booleans())
def test_packed_lead_words_match_the_oracle(runs, since, always):
    # PACK_ROOM = 0 packs every merge's lead words (even a full-range first column: nothing
    # of the next columns fits, and the lead is the first word less its low).
    _merge_matches_oracle(runs, since, ("PACK_ROOM", 0) if always else None)


def test_a_first_column_of_few_values_is_packed_with_the_next():
    # Four regions, then distinct ids: packed (work counter), and the merge equals the oracle.
    rng = np.random.default_rng(9)
    runs = []
    for t in range(4):
        region = rng.integers(0, 4, 500).astype(np.int8)
        ids = rng.choice(2**40, 500, replace=False)
        u = colmz.Updates({"r": pa.array(region), "id": pa.array(ids)},
                          time=np.full(500, t, np.uint64), diff=np.ones(500, np.int64))
        runs.append([colmz.consolidate(u, order="data")])
    stats = {}
    got = merged_read([list(r) for r in runs], 9, runs[0][0].schema, stats)
    assert stats["merged"] and stats["packed_lead"]
    want = colmz.consolidate(colmz.concat([r[0] for r in runs]), order="data", since=9)
    assert got == want
    # random 62-bit first words leave no room: the first column's words are the leads
    keyed = [[colmz.Updates({"k": pa.array(np.sort(rng.choice(2**62, 300, replace=False))),
                             "v": pa.array(np.arange(300))},
                            time=np.full(300, t, np.uint64), diff=np.ones(300, np.int64))]
             for t in range(3)]
    stats = {}
    merged_read(keyed, 0, keyed[0][0].schema, stats)
    assert stats["merged"] and not stats["packed_lead"]


def test_a_result_shares_no_memory_with_the_next_reads_scratch():
    # Reads below SCRATCH_BYTES keep their temporaries in this thread's scratch pool: a result
    # must not alias them, so a second read of the same shape leaves the first unchanged.
    rng = np.random.default_rng(3)

    def runs(seed_diff):
        out = []
        for t in range(3):
            keys = np.sort(rng.choice(2**40, 400, replace=False))
            out.append([colmz.Updates({"k": pa.array(keys), "v": pa.array([f"v{x}" for x in keys])},
                                      time=np.full(400, t, np.uint64),
                                      diff=np.full(400, seed_diff, np.int64))])
        return out

    a = runs(2)
    want = colmz.consolidate(colmz.concat([r[0] for r in a]), order="data", since=5)
    first = merged_read(a, 5, a[0][0].schema)
    b = runs(-7)
    second = merged_read(b, 5, b[0][0].schema)
    assert first == want and set(second.diff.tolist()) == {-7}


@st.composite
def int_keyed_runs(draw):
    """Runs of (int64 key, short string, time, diff), sorted and consolidated, keys repeating
    within a run (some NULL, for the row-by-row match): few retractions or many."""
    keys = st.sampled_from([-(2**63), -1, 0, 1, 7, 2**62, 2**63 - 1]) | (
        st.none() if draw(st.booleans()) else st.nothing())
    runs = []
    for _ in range(draw(st.integers(1, 5))):
        rows = draw(st.lists(st.tuples(keys, st.sampled_from(["a", "b", ""]), st.integers(0, 4),
                                       st.integers(-2, 3)), max_size=14))
        runs.append([_sorted_run(rows, {"k": pa.int64(), "v": pa.string()})])
    return runs


@settings(max_examples=150, deadline=None)
@given(int_keyed_runs(), st.integers(0, 5), st.sampled_from([None, 1.0]), st.sampled_from([None, 0]))
def test_fetched_rows_are_the_consolidated_rows(runs, since, fraction, cut):
    # FetchedRuns.rows against expand(consolidate(...)): an integer first column is searched
    # for the values its retractions reach (a NULL among them: matched row by row).
    from colmz.arrangement.fetched import FetchedRuns

    schema = (colmz.order.ColumnSpec("k", pa.int64()), colmz.order.ColumnSpec("v", pa.string()))
    pieces = [u for run in runs for u in run if len(u)]
    want = colmz.consolidate(colmz.concat(pieces), order="data", since=since) if pieces else None
    negative = want is not None and len(want) and int(want.diff.min()) < 0
    with pytest.MonkeyPatch.context() as mp:
        if cut is not None:
            mp.setattr(fetched_mod, "CUT_LIMIT", cut)
        f = FetchedRuns(runs, since, schema, retracted=fraction)
        try:
            rows = f.rows()
        except NegativeMultiplicity:
            assert negative
            return
    assert not negative
    if fraction == 1.0 or all(int(u.diff.min()) > 0 for u in pieces):
        assert not f.merged
    expected = colmz.rows.expand(want) if want is not None else pa.table({"k": pa.array([], pa.int64()),
                                                                          "v": pa.array([], pa.string())})
    assert rows.schema == expected.schema
    assert _row_multiset(rows) == _row_multiset(expected)


def test_fetched_rows_are_told_once_and_merged_contents_answer_after():
    from colmz.arrangement.fetched import FetchedRuns

    a, b = _run([1, 2, 3]), _run([2], d=-1)
    f = FetchedRuns([[a], [b]], 0, a.schema, retracted=1.0)
    rows = f.rows()
    assert sorted(rows.column("k").to_pylist()) == [1, 3]
    assert f.rows() is rows  # kept: a second query settles nothing again
    assert f.merge().to_pylist() == [(1, 0, 1), (3, 0, 1)]
    assert repr(f) == "FetchedRuns(merged, 2 updates, since=0)"
    assert sorted(f.rows().column("k").to_pylist()) == [1, 3]
    g = FetchedRuns([[a], [b]], 0, a.schema)  # 1 of 4 updates retracts: above 1/1024, merged
    assert sorted(g.rows().column("k").to_pylist()) == [1, 3] and g.merged


def test_reads_without_data_columns():
    # No data columns: rows differ by their times alone (merged_read has no order words to
    # merge by; the arrangement consolidates them by time).
    from colmz.arrangement.fetched import FetchedRuns

    a, b = colmz.Updates({}, time=[0, 1], diff=[1, 1]), colmz.Updates({}, time=[2], diff=[-1])
    assert merged_read([[a], [b]], 1, a.schema).to_pylist() == [(1, 2), (2, -1)]
    f = FetchedRuns([[a], [b]], 5, a.schema, retracted=1.0)
    assert f.rows().num_columns == 0 and f.merged
    assert f.merge().to_pylist() == [(5, 1)]
    arr = Arrangement.open(f"mem://no-columns-{next(_names)}", fan_in=2)
    for t in range(5):
        arr.write(colmz.Updates({}, time=[t, t], diff=[1, 1 if t % 2 else -1]))
        arr.seal(t + 1)
        arr.maintain()
    arr.advance_since(3)
    arr.maintain()
    assert arr.read(4).to_pylist() == [(4, 4)] and arr.read().to_pylist() == [(3, 4)]
