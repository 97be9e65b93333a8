"""Parts (``colmz.arrangement.parts``, ``part_writer``, ``merge``, ``gather``): the streaming
merge of runs cut into parts, against the multiset oracle, and the Parquet part round trip, on
mixed column types."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pool_counting import count_submissions
from updates_strategies import as_dict, oracle, schemas, updates

import colmz
from colmz.arrangement.errors import CorruptPart, MissingPart
from colmz.arrangement.merge import stream_merge
from colmz.arrangement.part_writer import PartWriter
from colmz.arrangement.parts import key_created_ms, make_key, part_metadata, read_part
from colmz.storage import MemBlob
from colmz.storage.local import LocalBlob
from colmz.updates import Encoded


def _cut(enc: Encoded, sizes: list[int]):
    """``enc`` as consecutive chunks of the given sizes (the rest in one chunk)."""
    at = 0
    for s in sizes:
        yield Encoded(enc.keys[at:at + s], enc.time[at:at + s], enc.diff[at:at + s], enc.layout)
        at += s
    yield Encoded(enc.keys[at:], enc.time[at:], enc.diff[at:], enc.layout)


@st.composite
def runs_case(draw):
    schema = draw(schemas(max_cols=3))
    k = draw(st.integers(1, 4))
    batches = [draw(updates(schema=schema, max_rows=30, huge_diffs=False)) for _ in range(k)]
    cuts = [draw(st.lists(st.integers(0, 5), max_size=6)) for _ in range(k)]
    since = draw(st.none() | st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2, 3]))
    return schema, batches, cuts, since


@settings(max_examples=100)
@given(runs_case())
def test_stream_merge_equals_the_oracle(case):
    schema, batches, cuts, since = case
    runs = []
    for b, c in zip(batches, cuts):
        normal = colmz.consolidate(b, order="data")
        runs.append(_cut(normal.encode(), c))
    out: list[Encoded] = []
    stats: dict = {}
    read = stream_merge(runs, since, out.append, stats)
    assert read == [len(colmz.consolidate(b, order="data")) for b in batches]
    specs = batches[0].schema
    got = colmz.concat([colmz.Updates.decode(e, specs) for e in out]) if out else colmz.Updates.empty(specs)
    whole = colmz.concat(batches)
    assert as_dict(got) == oracle(whole, since)
    # emitted in (data, time) order: the normal form of the result is the result
    assert got == colmz.consolidate(got, order="data")


@settings(max_examples=40)
@given(updates(max_rows=40, huge_diffs=False), st.integers(1, 7))
def test_part_writer_round_trip(u, part_rows):
    store = MemBlob()
    normal = colmz.consolidate(u, order="data")
    w = PartWriter(store, normal.schema, lambda: make_key("p/", 1, f"t{len(store.list_keys())}"),
                   {"kind": "trace", "desc": [0, 1, 0]}, part_rows=part_rows)
    w.add_updates(normal)
    keys = w.finish()
    assert len(keys) == -(-len(normal) // part_rows)
    parts = [read_part(store, k, normal.schema) for k in keys]
    assert all(len(p) <= part_rows for p in parts)
    back = colmz.concat(parts) if parts else colmz.Updates.empty(normal.schema)
    assert back == normal
    assert [part_metadata(store, k)["index"] for k in keys] == list(range(len(keys)))


def test_part_writer_byte_bound_cuts_parts():
    store = MemBlob()
    u = colmz.consolidate(colmz.Updates({"s": ["x" * 100 + str(i) for i in range(50)]},
                                        time=np.zeros(50, np.uint64), diff=np.ones(50, np.int64)),
                          order="data")
    w = PartWriter(store, u.schema, lambda: f"p/{len(store.list_keys())}", {}, part_bytes=1000)
    w.add_updates(u)
    keys = w.finish()
    assert len(keys) >= 5
    assert colmz.concat([read_part(store, k, u.schema) for k in keys]) == u


@pytest.mark.parametrize("gather", [False, True])
def test_part_encoding_dictionaries_and_statistics(gather):
    # diff and time as dictionary pages; statistics on the first column, numbers, time and
    # diff, not on a later string column; the same whether the rows are sliced or gathered
    import pyarrow as pa
    import pyarrow.parquet as pq

    from colmz.ops import order_data

    rng = np.random.default_rng(3)
    n = 5000
    u = colmz.Updates({"k": pa.array(rng.permutation(n)), "s": [f"v{i:06d}" for i in range(n)],
                       "x": rng.random(n)}, time=np.full(n, 7, np.uint64), diff=np.ones(n, np.int64))
    store = MemBlob()
    w = PartWriter(store, u.schema, lambda: "p/0.parquet", {})
    source, rows = order_data(u) if gather else (colmz.consolidate(u, order="data"), None)
    w.write(source, rows)
    assert read_part(store, "p/0.parquet", u.schema) == colmz.consolidate(u, order="data")
    md = pq.ParquetFile(pa.BufferReader(store.get("p/0.parquet"))).metadata
    cols = {md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i)
            for i in range(md.num_columns)}
    assert {c for c, m in cols.items() if m.is_stats_set} == {"k", "x", "time", "diff"}
    assert cols["diff"].has_dictionary_page and cols["time"].has_dictionary_page
    assert cols["diff"].total_compressed_size < n  # not 8 bytes a row
    assert cols["k"].statistics.min == 0 and cols["k"].statistics.max == n - 1


def test_part_keys_carry_their_creation_time():
    k = make_key("a/parts/", 1_700_000_000_123, "abc")
    assert k == "a/parts/1700000000123-abc.parquet"
    assert key_created_ms(k) == 1_700_000_000_123
    assert key_created_ms("a/parts/other.parquet") is None


def test_read_part_errors_name_the_key():
    store = MemBlob()
    schema = colmz.Updates({"k": [1]}, time=[0], diff=[1]).schema
    with pytest.raises(MissingPart, match="'p/x'"):
        read_part(store, "p/x", schema)
    store.set("p/y", b"not parquet")
    with pytest.raises(CorruptPart, match="'p/y'"):
        read_part(store, "p/y", schema)
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"other": [1], "time": pa.array([0], pa.uint64()), "diff": [1]}), sink)
    store.set("p/z", sink.getvalue())
    with pytest.raises(CorruptPart, match="has columns"):
        read_part(store, "p/z", schema)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=12) | st.none(), max_size=60),
       st.sampled_from(["string", "large_string", "binary"]), st.integers(1, 3), st.data())
def test_take_rows_is_arrows_take(values, kind, chunks, data):
    # A write's gather (take_rows): the prefetching kernels for string and binary columns of
    # one chunk without NULLs, Arrow's take for the rest (NULLs, several chunks) -- the same
    # table either way, in type and values.
    import pyarrow as pa

    from colmz.arrangement.gather import take_rows

    typ = getattr(pa, kind)()
    vals = [None if v is None else (v.encode() if kind == "binary" else v) for v in values]
    cut = len(vals) // chunks
    pieces = [vals[i * cut:(i + 1) * cut] if i < chunks - 1 else vals[i * cut:]
              for i in range(chunks)] if vals else [[]]
    col = pa.chunked_array([pa.array(p, typ) for p in pieces], typ)
    table = pa.table({"s": col, "i": pa.array(range(len(vals)), pa.int64()),
                      "c": pa.array([5] * len(vals), pa.uint64())})
    n = len(vals)
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=80)) if n else [], np.int64)
    got = take_rows(table, rows, constant=["c"])  # c holds one value: sliced, not taken
    want = table.take(pa.array(rows, pa.int64()))
    assert got.schema == want.schema and got.to_pylist() == want.to_pylist()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["int8", "uint16", "int32", "int64", "float32", "float64", "date32",
                        "timestamp", "bool", "decimal"]),
       st.lists(st.integers(0, 100) | st.none(), max_size=40), st.integers(0, 3), st.data())
def test_take_fixed_width_is_arrows_take(kind, values, pad, data):
    # Fixed-width columns of whole bytes without NULLs (sliced ones too) are taken by the
    # prefetching kernel, equal to Arrow's take in type and values; NULLs, booleans and
    # decimals are left to Arrow (None).
    import datetime
    import decimal

    import pyarrow as pa

    from colmz.arrangement.gather import take_fixed_width

    typ = {"timestamp": pa.timestamp("us", "UTC"), "decimal": pa.decimal128(10, 2),
           "bool": pa.bool_()}.get(kind) or getattr(pa, kind)()

    def value(v):
        if v is None:
            return None
        if kind == "date32":
            return datetime.date(2020, 1, 1) + datetime.timedelta(days=v)
        if kind == "timestamp":
            return datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=v)
        if kind == "decimal":
            return decimal.Decimal(v) / 4
        return bool(v % 2) if kind == "bool" else v

    arr = pa.array([value(0)] * pad + [value(v) for v in values], typ).slice(pad)
    n = len(arr)
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=60)) if n else [], np.int64)
    got = take_fixed_width(arr, rows)
    if arr.null_count or kind in ("bool", "decimal"):
        assert got is None
    else:
        want = arr.take(pa.array(rows, pa.int64()))
        assert got.type == want.type and got.to_pylist() == want.to_pylist()


def _sorted_write(n: int, seed: int = 5):
    import pyarrow as pa

    from colmz.ops import order_data

    rng = np.random.default_rng(seed)
    u = colmz.Updates({"k": pa.array(rng.permutation(n)), "s": [f"value-{i:08d}" for i in range(n)]},
                      time=np.full(n, 3, np.uint64), diff=np.ones(n, np.int64))
    return u, order_data(u)


@pytest.mark.parametrize("gather", [True, False])
def test_a_large_sorted_write_is_parts_encoded_side_by_side(monkeypatch, tmp_path, gather):
    # From PARALLEL_WRITE_BYTES on a sorted write is cut into ENCODE_THREADS parts or more,
    # encoded on the "encode" pool; the parts keep their order (keys and indexes) and read
    # back as the batch. Counted: the pool's submissions.
    from colmz.arrangement import part_writer as writer_mod

    u, (source, rows) = _sorted_write(6000)
    monkeypatch.setattr(writer_mod, "PARALLEL_WRITE_BYTES", 1000)
    submitted = count_submissions(monkeypatch, writer_mod, "encode")
    store = LocalBlob(str(tmp_path))
    made = iter(range(100))
    w = PartWriter(store, u.schema, lambda: f"p/{next(made):03d}.parquet", {"kind": "trace"})
    # gathered by rows, or already in order and cut by slices
    keys = w.write(source, rows) if gather else w.write(colmz.consolidate(u, order="data"))
    assert len(keys) == writer_mod.ENCODE_THREADS and [a[0] for _, a in submitted] == keys
    assert keys == sorted(keys)
    assert [part_metadata(store, k)["index"] for k in keys] == list(range(len(keys)))
    back = colmz.concat([read_part(store, k, u.schema) for k in keys])
    assert back == colmz.consolidate(u, order="data")
    assert w.rows == len(u) and sum(len(read_part(store, k, u.schema)) for k in keys) == len(u)


def test_a_large_write_to_a_repeatable_store_encodes_its_parts_in_turn(monkeypatch):
    # The in-memory store and the fault injector see their calls in a repeatable order: the
    # parts of a large write are encoded one after another there, never on the pool.
    from colmz.arrangement import part_writer as writer_mod

    u, (source, rows) = _sorted_write(6000)
    monkeypatch.setattr(writer_mod, "PARALLEL_WRITE_BYTES", 1000)
    shared = writer_mod.shared_pool
    used = []
    monkeypatch.setattr(writer_mod, "shared_pool", lambda name, n: used.append(name) or shared(name, n))
    store = MemBlob()
    w = PartWriter(store, u.schema, lambda: f"p/{len(store.list_keys()):03d}.parquet", {})
    keys = w.write(source, rows)
    assert len(keys) == writer_mod.ENCODE_THREADS and "encode" not in used
    assert colmz.concat([read_part(store, k, u.schema) for k in keys]) == colmz.consolidate(u, order="data")


def test_a_failed_part_of_a_side_by_side_write_leaves_nothing(monkeypatch):
    # One of the parts encoded side by side fails: the error is raised once every part has
    # finished, and write() deletes the parts that were written -- the store as before.
    from colmz.arrangement import part_writer as writer_mod
    from colmz.storage.faults import FaultPlan, FaultyBlob, InjectedDeterminate

    u, (source, rows) = _sorted_write(6000)
    monkeypatch.setattr(writer_mod, "PARALLEL_WRITE_BYTES", 1000)
    # the fault injector's calls are made one after another unless a test allows threads
    monkeypatch.setattr(writer_mod, "concurrent_calls", lambda store: True)
    for fail_at in (1, 2):
        inner = MemBlob()
        inner.set("other", b"kept")
        plan = FaultPlan(fail_at=fail_at)
        store = FaultyBlob(inner, plan)
        made = iter(range(100))
        w = PartWriter(store, u.schema, lambda made=made: f"p/{next(made):03d}.parquet", {})
        with pytest.raises(InjectedDeterminate):
            w.write(source, rows)
        assert inner.list_keys() == ["other"], fail_at
        assert [c[1] for c in plan.log].count("blob.set") == 2  # both parts were attempted
