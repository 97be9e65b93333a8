"""Point lookups (``Arrangement.counts``): how often a few rows occur as of a time, reading
only the row groups whose first column's statistics admit them.

Checked against the consolidating oracle of ``test_arrangement_read`` over random histories
(NULL, NaN, -0.0, long strings sharing a prefix, unsealed batches beyond the trace upper,
a since beyond as_of's), in memory and on local disk with row groups of a few rows (so the
statistics prune); and a work counter: a lookup of one row in an arrangement of many row
groups reads about one group per run, not the arrangement.
"""

from __future__ import annotations

import datetime
import itertools
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from test_arrangement_read import histories, oracle, replay, updates_of

import colmz
import colmz.arrangement.part_writer as part_writer
from colmz.arrangement import Arrangement, CorruptPart

# A fresh mem:// name per example: the store is process-global per name, and id() of a
# collected list is reused, so an id-based name could reopen an earlier example's history.
_STORE_NUMBERS = itertools.count()

_ABSENT = [("absent", 7.0, 7), (None, None, None), ("a", float("nan"), -5)]


def _key(row) -> str:
    # colmz's data equality: -0.0 is 0.0 (colmz.order encodes them alike), NaN is NaN
    return repr(tuple(x + 0.0 if isinstance(x, float) else x for x in row))


def _check_counts(a: Arrangement, written) -> None:
    since, seal = a.since(), a.get_seal()
    asked = list(dict.fromkeys([tuple(r[:3]) for r in written] + _ABSENT, None))
    rows = updates_of([(*r, 0, 1) for r in asked])
    for as_of in sorted({since, (since + seal) // 2, seal - 1} - {-1}):
        if not since <= as_of < seal:
            continue
        want = {_key(r[:3]): r[4] for r in oracle(written, as_of, since).to_pylist()}
        got = a.counts(rows, as_of).tolist()
        assert got == [want.get(_key(r), 0) for r in asked], as_of


@settings(max_examples=60, deadline=None)
@given(histories())
def test_counts_match_the_consolidating_oracle_in_memory(steps):
    a, written = replay(f"mem://counts-{next(_STORE_NUMBERS)}", steps, part_rows=3)
    _check_counts(a, written)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_counts_match_the_oracle_on_local_disk_with_small_row_groups(steps):
    # Row groups of two rows: the first column's statistics prune most of them, and a value
    # between two groups' ranges, NULL and NaN go through every admission rule.
    d = tempfile.mkdtemp(prefix="colmz-counts-")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(part_writer, "ROW_GROUP_ROWS", 2)
            a, written = replay(d, steps, part_rows=3)
            _check_counts(a, written)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_lookup_reads_about_one_row_group_per_run(tmp_path, monkeypatch):
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 256)
    a = Arrangement.open(str(tmp_path / "a"), {"k": pa.int64(), "v": pa.int64()})
    n, batches = 4_000, 6
    for b in range(batches):
        k = np.arange(b * n, (b + 1) * n)
        a.write(colmz.Updates({"k": k, "v": k % 7}, time=np.full(n, b, np.uint64), diff=np.ones(n, np.int64)))
        a.seal(b + 1)
    a.maintain()
    runs = len(a.trace_batches) + len(a.unsealed_batches)
    probe = colmz.Updates({"k": [5 * n + 17, 3, -1], "v": [(5 * n + 17) % 7, 4, 0]}, time=[0] * 3, diff=[1] * 3)
    before = a.lookup_stats["rows_read"]
    assert a.counts(probe, batches - 1).tolist() == [1, 0, 0]
    read = a.lookup_stats["rows_read"] - before
    assert read <= 2 * 256 * runs  # the groups that may hold 5n + 17 and 3: not the 24,000 rows
    assert read < n * batches // 10
    assert a.lookup_stats["lookups"] >= 1


def test_lookups_decode_each_row_group_once_and_follow_the_plan(tmp_path, monkeypatch):
    # The groups a lookup read are kept indexed (colmz.arrangement.lookups): looking up
    # every row one at a time decodes each group once in all, not once per lookup; a write,
    # a seal, a compaction and another as_of change the plan, and the counts stay the
    # oracle's.
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 64)
    a = Arrangement.open(str(tmp_path / "a"), {"k": pa.int64(), "v": pa.int64()})
    n = 1_000
    a.write(colmz.Updates({"k": np.arange(n), "v": np.arange(n) % 7}, time=np.zeros(n, np.uint64),
                          diff=np.full(n, 2, np.int64)))
    a.write(colmz.Updates({"k": [3, 500], "v": [3, 3]}, time=[1, 1], diff=[-1, 1]))
    a.seal(2)

    def one(k, v):
        return colmz.Updates({"k": [k], "v": [v]}, time=[0], diff=[1])

    got = [a.counts(one(k, k % 7), 1).tolist()[0] for k in range(n)]
    assert got == [{3: 1, 500: 3}.get(k, 2) for k in range(n)]
    assert a.lookup_stats["rows_read"] <= n + 2  # each group once (was: one group per lookup)
    read = a.lookup_stats["rows_read"]
    assert a.counts(one(500, 3), 1).tolist() == [3] and a.lookup_stats["rows_read"] == read
    assert a.counts(one(3, 3), 0).tolist() == [2]  # another as_of: another plan
    a.write(colmz.Updates({"k": [7], "v": [0]}, time=[2], diff=[-2]))
    a.seal(3)
    assert a.counts(one(7, 0), 2).tolist() == [0] and a.counts(one(8, 1), 2).tolist() == [2]
    a.maintain()  # compaction: new parts, the index starts again
    assert a.counts(one(7, 0), 2).tolist() == [0] and a.counts(one(500, 3), 2).tolist() == [3]
    a.forget_lookups()
    assert a.counts(one(3, 3), 2).tolist() == [1]


def test_a_compaction_keeps_what_lookups_read_as_of_a_sealed_time(tmp_path, monkeypatch):
    # Contents as of a time before the seal never change: after a compaction rewrote every
    # part (new keys, a new plan), the rows whose groups the lookups read before are
    # answered from the index of the plan before, reading nothing; rows it did not cover,
    # and another time, read the new parts. Counts stay the oracle's throughout.
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 64)
    a = Arrangement.open(str(tmp_path / "a"), {"k": pa.int64(), "v": pa.int64()})
    n = 640
    a.write(colmz.Updates({"k": np.arange(n), "v": np.arange(n)}, time=np.zeros(n, np.uint64),
                          diff=np.ones(n, np.int64)))
    a.write(colmz.Updates({"k": [5, 600], "v": [5, 600]}, time=[1, 1], diff=[1, -1]))
    a.seal(2)

    def one(k):
        return colmz.Updates({"k": [k], "v": [k]}, time=[0], diff=[1])

    want = {5: 2, 600: 0}
    assert [a.counts(one(k), 1).tolist()[0] for k in range(0, 320)] == [want.get(k, 1) for k in range(0, 320)]
    read = a.lookup_stats["rows_read"]
    parts = {p.key for p in a.parts()}
    a.advance_since(1)
    a.maintain()
    assert parts.isdisjoint(p.key for p in a.parts())  # every part rewritten
    assert [a.counts(one(k), 1).tolist()[0] for k in range(0, 320, 7)] == [want.get(k, 1) for k in range(0, 320, 7)]
    assert a.lookup_stats["rows_read"] == read and a.lookup_stats["restarts"] == 1  # none read again
    both = colmz.Updates({"k": [5, 600], "v": [5, 600]}, time=[0, 0], diff=[1, 1])
    assert a.counts(both, 1).tolist() == [2, 0]  # one covered, one read from the new parts
    assert a.lookup_stats["rows_read"] > read
    a.write(colmz.Updates({"k": [5], "v": [5]}, time=[2], diff=[-2]))
    a.seal(3)
    assert a.counts(both, 2).tolist() == [0, 0] and a.counts(both, 1).tolist() == [2, 0]


def test_a_lookup_checks_the_pages_it_reads(tmp_path):
    # a part whose bytes changed after its digest was recorded is refused, not read
    a = Arrangement.open(str(tmp_path / "a"), {"k": pa.int64()})
    a.write(colmz.Updates({"k": np.arange(100)}, time=np.zeros(100, np.uint64), diff=np.ones(100, np.int64)))
    a.seal(1)
    [part] = a.parts()
    path = tmp_path / "a" / "blob" / part.key
    if not path.exists():
        path = next(p for p in (tmp_path / "a").rglob("*.parquet"))
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptPart):
        a.counts(colmz.Updates({"k": [5]}, time=[0], diff=[1]), 0)


def test_counts_refuses_what_is_not_updates():
    a = Arrangement.open("mem://counts-bad", {"k": pa.int64()})
    with pytest.raises(TypeError, match="rows must be colmz.Updates"):
        a.counts([1, 2], 0)


@pytest.mark.parametrize("kind", ["s3+sqlite", "local"])
def test_a_lookup_reads_row_groups_by_range_on_s3_and_local_disk(location_factory, monkeypatch, kind):
    # S3 parts are read by ranges (a footer, then the groups that may hold the rows): the
    # same counts and the same rows read as on local disk
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 64)
    a = Arrangement.open(location_factory(kind), {"k": pa.string(), "v": pa.int64()}, name="counts")
    keys = [f"key-{i:05d}" for i in range(1_000)]
    a.write(colmz.Updates({"k": keys, "v": list(range(1_000))}, time=[0] * 1_000, diff=[2] * 1_000))
    a.write(colmz.Updates({"k": ["key-00500", None], "v": [500, 1]}, time=[1, 1], diff=[-1, 3]))
    a.seal(2)
    probe = colmz.Updates({"k": ["key-00500", "key-00999", "key-x", None], "v": [500, 999, 0, 1]},
                          time=[0] * 4, diff=[1] * 4)
    assert a.counts(probe, 0).tolist() == [2, 2, 0, 0]
    assert a.counts(probe, 1).tolist() == [1, 2, 0, 3]
    assert a.lookup_stats["rows_read"] <= 2 * 4 * 64  # a group or two of 64 rows per value and lookup


_TYPED = {
    "timestamp": (pa.timestamp("us"), [datetime.datetime(2020, 1, 1) + datetime.timedelta(hours=i) for i in range(12)]),
    "timestamptz": (pa.timestamp("us", tz="UTC"),
                    [datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(hours=i)
                     for i in range(12)]),
    "date": (pa.date32(), [datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(12)]),
    "uint64": (pa.uint64(), [2**63 + i for i in range(12)]),
    "int8": (pa.int8(), list(range(-6, 6))),
    "bool": (pa.bool_(), [i % 2 == 0 for i in range(12)]),
    "binary": (pa.binary(), [bytes([255 - i]) * 3 for i in range(12)]),
    "float32": (pa.float32(), [i - 6.5 for i in range(12)]),
    "duration": (pa.duration("ms"), [datetime.timedelta(seconds=i - 6) for i in range(12)]),
    "time": (pa.time64("us"), [datetime.time(i) for i in range(12)]),
    "text": (pa.string(), ["é" * (i % 3) + chr(0x4E00 + i) for i in range(12)]),
}


@pytest.mark.parametrize("name", sorted(_TYPED))
def test_row_group_statistics_never_hide_a_row_of_any_type(tmp_path, monkeypatch, name):
    # Each value looked up alone, row groups of three rows: a group the statistics rule out
    # must hold none of it, whatever Python type the statistics come back as.
    monkeypatch.setattr(part_writer, "ROW_GROUP_ROWS", 3)
    typ, values = _TYPED[name]
    col = pa.array(values, typ)
    a = Arrangement.open(str(tmp_path / "a"), {"k": typ, "v": pa.int64()})
    a.write(colmz.Updates({"k": col, "v": list(range(12))}, time=[0] * 12, diff=[1] * 12))
    a.seal(1)
    got = [a.counts(colmz.Updates({"k": col.slice(i, 1), "v": [i]}, time=[0], diff=[1]), 0).tolist()[0]
           for i in range(12)]
    assert got == [1] * 12
