"""Reading an arrangement: whole-part reads (``read_part`` / ``read_parts``), the one-run
fast path (``run_contents``) against a consolidating oracle, and outside readers (Polars)
of ``Arrangement.parts()`` against ``Arrangement.read()``."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
import colmz.arrangement.fetched as fetched_mod
import colmz.arrangement.merge as merge_mod
import colmz.arrangement.part_writer as writer_mod
import colmz.arrangement.parts as parts_mod
import colmz.arrangement.read_handle as read_handle_mod
from colmz.arrangement import Arrangement, CorruptPart, MissingPart
from colmz.arrangement.parts import iter_part, read_ahead, read_part, read_parts, run_contents
from colmz.storage import LocalBlob, MemBlob

SCHEMA = {"k": pa.string(), "n": pa.int64()}


def ups(rows) -> colmz.Updates:
    k, n, t, d = zip(*rows) if rows else ((), (), (), ())
    return colmz.Updates({"k": pa.array(k, pa.string()), "n": pa.array(n, pa.int64())},
                         time=np.array(t, np.uint64), diff=np.array(d, np.int64))


def multiset(u: colmz.Updates) -> Counter:
    return Counter({r[:-1]: r[-1] for r in u.to_pylist()})


def oracle(rows, as_of=None, since=0) -> Counter:
    """The contents of ``rows`` (data..., time, diff) at ``as_of`` with times advanced to
    ``since``: the model every reader is held to."""
    out: Counter = Counter()
    s = since if as_of is None else max(since, as_of)
    for *data, t, d in rows:
        if as_of is None or t <= as_of:
            out[(*data, max(t, s))] += d
    return Counter({k: v for k, v in out.items() if v})


def _rows_of(arr: Arrangement) -> list[tuple]:
    return arr.read().to_pylist()


# ---------------------------------------------------------------- whole-part reads


def test_read_part_whole_equals_its_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "ROW_GROUP_ROWS", 7)  # many row groups per part
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, part_rows=50)
    rows = [(f"k{i % 23}", i % 5, i % 3, 1 + i % 4) for i in range(120)]
    a.write(ups(rows))
    keys = a.unsealed_batches[0].keys
    assert len(keys) >= 2
    schema = a.schema
    for k in keys:
        whole = read_part(a.store, k, schema)
        pieces = list(iter_part(a.store, k, schema))
        assert len(pieces) > 1
        assert whole == colmz.concat(pieces)
    assert isinstance(a.store, LocalBlob)
    assert colmz.concat(read_parts(a.store, keys, schema)) == colmz.concat(
        [read_part(a.store, k, schema) for k in keys])


def test_read_parts_keeps_order_and_names_the_missing_part(tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, part_rows=3)
    a.write(ups([(f"k{i:02d}", i, 0, 1) for i in range(20)]))
    keys = list(a.unsealed_batches[0].keys)
    got = read_parts(a.store, keys, a.schema)
    assert [u.column("k").to_pylist() for u in got] == [
        [f"k{i:02d}" for i in range(j, min(j + 3, 20))] for j in range(0, 20, 3)]
    a.store.delete(keys[4])
    with pytest.raises(MissingPart, match=keys[4]):
        read_parts(a.store, keys, a.schema)


def test_read_ahead_yields_in_order_and_raises_the_missing_part(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, part_rows=3)
    a.write(ups([(f"k{i:02d}", i, 0, 1) for i in range(14)]))
    keys = list(a.unsealed_batches[0].keys)
    expect = [read_part(a.store, k, a.schema) for k in keys]
    with ThreadPoolExecutor(2) as pool:
        assert list(read_ahead(a.store, keys, a.schema, pool)) == expect
        assert list(read_ahead(a.store, keys, a.schema, None)) == expect
        a.store.delete(keys[2])
        got = read_ahead(a.store, keys, a.schema, pool)
        assert [next(got), next(got)] == expect[:2]
        with pytest.raises(MissingPart, match=keys[2]):
            next(got)


def test_read_part_corrupt_and_missing_on_every_store(tmp_path):
    schema = colmz.arrangement.normalize_schema(SCHEMA)
    for store in (LocalBlob(str(tmp_path / "b")), MemBlob()):
        store.set("p/x", b"not parquet at all")
        with pytest.raises(CorruptPart, match="p/x"):
            read_part(store, "p/x", schema)
        with pytest.raises(MissingPart, match="p/y"):
            read_part(store, "p/y", schema)


def test_mem_store_reads_in_key_order(monkeypatch):
    # Stores other than local and S3 (fault injectors wrap them) see reads in key order.
    a = Arrangement.open("mem://readers-order", SCHEMA, part_rows=2)
    a.write(ups([(f"k{i}", i, 0, 1) for i in range(9)]))
    keys = list(a.unsealed_batches[0].keys)
    seen = []
    real = parts_mod.open_part
    monkeypatch.setattr(parts_mod, "open_part", lambda s, k: (seen.append(k), real(s, k))[1])
    read_parts(a.store, keys, a.schema)
    assert seen == keys


# ---------------------------------------------------------------- run_contents


@st.composite
def runs(draw):
    """A sorted, consolidated run split into parts, an upper and a since."""
    cells = draw(st.dictionaries(
        st.tuples(st.integers(0, 6), st.integers(0, 5)),
        st.integers(-2, 2).filter(bool), max_size=30))
    rows = sorted((k, t, d) for (k, t), d in cells.items())
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    bounds = [0, *cuts, len(rows)]
    parts = [colmz.Updates({"k": np.array([r[0] for r in rows[a:b]], np.int64)},
                           time=np.array([r[1] for r in rows[a:b]], np.uint64),
                           diff=np.array([r[2] for r in rows[a:b]], np.int64))
             for a, b in zip(bounds, bounds[1:])]
    upper = draw(st.none() | st.integers(0, 7))
    since = draw(st.integers(0, 7))
    return rows, parts, upper, since


@settings(max_examples=150, deadline=None)
@given(runs())
def test_run_contents_is_the_consolidated_answer_or_none(case):
    rows, parts, upper, since = case
    schema = colmz.arrangement.normalize_schema({"k": pa.int64()})
    got = run_contents(parts, upper, since, schema)
    kept = [r for r in rows if upper is None or r[1] < upper]
    times = {r[1] for r in kept}
    expect: Counter = Counter()
    for k, t, d in kept:
        expect[(k, max(t, since))] += d
    expect = Counter({k: v for k, v in expect.items() if v})
    could_meet = bool(kept) and min(times) < since and len(times) > 1
    if could_meet:
        assert got is None
        return
    assert got is not None
    out = got.to_pylist()
    assert Counter({(k, t): d for k, t, d in out}) == expect
    assert len(out) == len(expect)  # consolidated: each (data, time) once, no zero diff
    assert [(k, t) for k, t, _ in out] == sorted((k, t) for k, t, _ in out)


# ---------------------------------------------------------------- Arrangement.read


def _one_batch(url, rows, seal):
    a = Arrangement.open(url, SCHEMA, part_rows=3)
    a.write(ups(rows))
    a.seal(seal)
    a.maintain()
    assert len(a.trace_batches) == 1 and not a.unsealed_batches
    return a


ROWS = [("a", 1, 0, 1), ("a", 1, 2, 1), ("a", 2, 1, -1), ("b", 0, 3, 2), ("b", 0, 4, -2),
        ("c", 5, 2, 1), ("c", 5, 4, 1), ("d", 1, 1, 3)]


@pytest.mark.parametrize("store", ["local", "mem"])
def test_read_as_of_every_time_matches_the_model(tmp_path, store):
    url = str(tmp_path / "s") if store == "local" else f"mem://readers-asof-{tmp_path.name}"
    a = _one_batch(url, ROWS, 5)
    for as_of in range(5):
        assert multiset(a.read(as_of)) == oracle(ROWS, as_of), as_of
    assert multiset(a.read()) == oracle(ROWS)
    a.advance_since(3)  # the trace keeps its stored times until the next compaction
    for as_of in (3, 4):
        assert multiset(a.read(as_of)) == oracle(ROWS, as_of, since=3)
    assert multiset(a.read()) == oracle(ROWS, since=3)
    assert multiset(a.snapshot()) == oracle(ROWS, since=3)


def test_one_run_reads_do_not_merge_when_nothing_can_meet(tmp_path, monkeypatch):
    rows = [("a", 1, 2, 1), ("b", 1, 2, 1), ("b", 2, 2, -1), ("c", 0, 2, 4)]  # one time
    a = _one_batch(str(tmp_path / "s"), rows, 3)
    assert len(a.trace_batches[0].keys) > 1

    def no_merge(*args, **kwargs):
        raise AssertionError("the one-run read merged")

    # a one-run read that needs consolidating merges by order words (colmz.arrangement.read)
    monkeypatch.setattr(read_handle_mod, "stream_merge", no_merge)
    monkeypatch.setattr(fetched_mod, "merged_read", no_merge)
    assert multiset(a.read()) == oracle(rows)
    assert multiset(a.read(2)) == oracle(rows, 2)
    a.advance_since(2)
    assert multiset(a.read()) == oracle(rows, since=2)
    # several stored times advanced by as_of can meet: that read merges
    b = _one_batch(str(tmp_path / "t"), ROWS, 5)
    assert multiset(b.read(0)) == oracle(ROWS, 0)  # one time kept: still no merge
    with pytest.raises(AssertionError, match="merged"):
        b.read(4)


def test_multi_run_reads_match_the_model(tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, part_rows=3, fan_in=8)
    written = []
    for t in range(5):
        rows = [(f"k{i}", i % 2, t, 1 if (i + t) % 3 else -1) for i in range(6)]
        a.write(ups(rows))
        written += rows
        a.seal(t + 1)
        if t % 2:
            a.maintain()
    late = [("z", 0, 7, 1), ("k1", 1, 6, 2)]
    a.write(ups(late))
    written += late
    assert len(a.trace_batches) > 1 and a.unsealed_batches
    assert multiset(a.read()) == oracle(written)
    for as_of in range(5):
        assert multiset(a.read(as_of)) == oracle(written, as_of)
    a.advance_since(2)
    assert multiset(a.read()) == oracle(written, since=2)


# ---------------------------------------------------------------- Polars


def _trickle(url) -> Arrangement:
    a = Arrangement.open(url, SCHEMA, fan_in=2, part_rows=2)
    for t in range(6):
        a.write(ups([(f"k{i}", i % 2, t, 1 if (i + t) % 3 else -1) for i in range(4)]))
        a.seal(t + 1)
        if t % 2:
            a.maintain()
    a.advance_since(3)
    a.write(ups([("z", 0, 9, 1), ("k1", 1, 8, 1)]))
    return a


def polars_contents(a: Arrangement) -> Counter:
    """The current contents of ``a`` read by Polars from ``a.parts()`` alone."""
    pl = pytest.importorskip("polars")
    frames = []
    for kind in ("trace", "unsealed"):
        parts = [p for p in a.parts() if p.kind == kind]
        if parts:
            frames.append(pl.scan_parquet([p.url for p in parts])
                          .filter(pl.col("time") >= parts[0].min_time))
    since = pl.lit(a.since(), dtype=pl.UInt64)
    g = (pl.concat(frames)
         .with_columns(pl.max_horizontal(pl.col("time"), since).alias("time"))
         .group_by(["k", "n", "time"]).agg(pl.col("diff").sum())
         .filter(pl.col("diff") != 0)
         .collect())
    return Counter({(k, n, t): d for k, n, t, d in g.select(["k", "n", "time", "diff"]).iter_rows()})


def test_polars_reads_parts_as_read_does(tmp_path):
    pytest.importorskip("polars")
    a = _trickle(str(tmp_path / "s"))
    kinds = {p.kind for p in a.parts()}
    assert kinds == {"trace", "unsealed"}
    assert polars_contents(a) == multiset(a.read())
    a.maintain()
    assert polars_contents(a) == multiset(a.read())
    b = _one_batch(str(tmp_path / "t"), ROWS, 5)
    assert polars_contents(b) == multiset(b.read()) == oracle(ROWS)


# ---------------------------------------------------------------- bounded merges


def test_iter_part_in_batches_equals_the_whole_part(tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA)
    rows = [(f"k{i % 31}", i % 7, i % 3, 1 + i % 4) for i in range(200)]
    a.write(ups(rows))
    key, schema = a.unsealed_batches[0].keys[0], a.schema
    for b in (1, 7, 64, 1000):
        pieces = list(iter_part(a.store, key, schema, batch_rows=b))
        assert max(len(p) for p in pieces) <= b
        assert colmz.concat(pieces) == read_part(a.store, key, schema)


@pytest.mark.parametrize("batches", [3, 12])
def test_a_drain_of_many_batches_holds_merge_rows_not_a_row_group_each(tmp_path, monkeypatch,
                                                                       batches):
    monkeypatch.setattr(merge_mod, "MERGE_ROWS", 96)
    monkeypatch.setattr(merge_mod, "MIN_CHUNK_ROWS", 4)
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA)  # one row group of 200 rows per part
    written = []
    for t in range(batches):
        rows = [(f"k{(i * 7 + t) % 150:03d}", i % 3, t, 1 + (i + t) % 3) for i in range(200)]
        a.write(ups(rows))
        written += rows
        a.seal(t + 1)
    a.advance_since(batches - 1)
    a.maintain()  # one drain merging every batch
    assert len(a.trace_batches) == 1 and not a.unsealed_batches
    # about MERGE_ROWS in all (an input may hold a second chunk while its last row ties),
    # whether the drain merges 3 runs or 12 -- not 200 rows (a row group) per run
    assert a.stats()["merge_peak_rows"] <= 2 * 96
    assert multiset(a.read()) == oracle(written, since=batches - 1)
