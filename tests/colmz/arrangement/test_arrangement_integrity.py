"""Integrity of parts: a digest of each part (local parts) or Parquet page checksums (parts
on stores read by ranges) verified on every read path, and each part's own metadata and the
state's record of it (rows, diff sum, digest) checked on read; any mismatch is
``CorruptPart`` naming the key. Each test below read damaged data silently on
the code before these checks (noted per test)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import colmz
from colmz.arrangement import Arrangement, CorruptPart
from colmz.arrangement.merge import PartRun
from colmz.arrangement.part_ref import PART_METADATA_KEY, PartRef, part_digest
from colmz.arrangement.parts import iter_part, read_ahead, read_part
from colmz.storage.state import StateLog

SCHEMA = {"k": pa.int64(), "s": pa.string()}


def ups(n, t=0, seed=0, diff=1):
    rng = np.random.default_rng(seed)
    keys = rng.permutation(n).astype(np.int64)
    return colmz.Updates({"k": pa.array(keys), "s": pa.array([f"v{int(k) % 97:05d}" for k in keys])},
                         time=[t] * n, diff=[diff] * n)


def store_with_part(tmp_path, n=5000, **kw):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, **kw)
    a.write(ups(n))
    a.seal(1)
    key = a.store.list_keys(a.prefix)[0]
    return a, key


def ref_of(a, key) -> PartRef:
    """The reference ``a``'s state holds of the part ``key``: the key and its check."""
    (ref,) = [p for b in (*a.trace_batches, *a.unsealed_batches) for p in b.parts if p.key == key]
    return ref


def all_read_paths(a, key):
    """Every way a part is read: whole (memory-mapped), row groups, streaming batches, read
    ahead in a pool, and through the arrangement's read and merge."""
    schema = a.schema
    ref = ref_of(a, key)
    yield lambda: read_part(a.store, ref, schema)
    yield lambda: list(iter_part(a.store, ref, schema))
    yield lambda: list(iter_part(a.store, ref, schema, batch_rows=1000))
    yield lambda: list(PartRun(a.store, [ref], schema, 0, None, 1000))
    from concurrent.futures import ThreadPoolExecutor

    def ahead():
        with ThreadPoolExecutor(2) as pool:
            return list(read_ahead(a.store, [ref], schema, pool))
    yield ahead
    yield lambda: Arrangement.open(a._url).read()


def flip_data_byte(path, rng_seed):
    """Flip one byte inside a data page (between the 4-byte magic and the footer)."""
    data = bytearray(path.read_bytes())
    md = pq.read_metadata(str(path))
    rg = md.row_group(0)
    col = rg.column(0)  # the k column: plain-encoded int64 values
    start = col.data_page_offset
    end = start + col.total_compressed_size
    pos = int(np.random.default_rng(rng_seed).integers(start + 64, end - 8))
    data[pos] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(3))
def test_flipped_byte_is_corrupt_part_on_every_read_path(tmp_path, seed):
    # Before: a flipped byte in a page gave a different read() with no error.
    a, key = store_with_part(tmp_path)
    before = a.read().to_pylist()
    flip_data_byte(a.store.path_of(key), seed)
    for read in all_read_paths(a, key):
        with pytest.raises(CorruptPart, match=key):
            read()
    # nothing was changed by the failed reads
    assert a.store.list_keys(a.prefix) == [key]
    assert before  # the store read fine before the flip


def test_local_parts_carry_a_digest_instead_of_page_checksums(tmp_path):
    a, key = store_with_part(tmp_path)
    path = a.store.path_of(key)
    info = json.loads(pq.read_metadata(str(path)).metadata[PART_METADATA_KEY])
    assert info["key"] == key and info["page_checksums"] is False
    check = ref_of(a, key).check
    assert check == (5000, 5000, part_digest(path.read_bytes()))
    flip_data_byte(path, 0)
    # no page checksum is there to fail: Parquet alone reads the flipped byte back...
    pq.ParquetFile(str(path), page_checksum_verification=True).read()
    # ...colmz's reads check the digest the state recorded
    with pytest.raises(CorruptPart, match=f"{key}.*has digest"):
        read_part(a.store, ref_of(a, key), a.schema)


def test_a_part_is_checked_by_any_store_object_given_its_reference(tmp_path):
    # A reader that never loaded the state -- a Spark executor, another process -- opens the
    # blob store afresh and gets the part's reference from whoever read the state. Before,
    # the checks lived in a registry keyed by the store object a handle loaded through, so
    # this read (a new store object) returned the flipped byte's value silently.
    from colmz.storage.local import LocalBlob

    a, key = store_with_part(tmp_path)
    ref = ref_of(a, key)
    flip_data_byte(a.store.path_of(key), 2)
    fresh = LocalBlob(a.store.root)
    assert fresh is not a.store
    with pytest.raises(CorruptPart, match=f"{key}.*has digest"):
        read_part(fresh, ref, a.schema)
    with pytest.raises(CorruptPart, match=f"{key}.*has digest"):
        list(iter_part(fresh, ref, a.schema, batch_rows=1000))
    # the reference is all a read needs, and it pickles (what a Spark task is sent)
    import pickle

    assert pickle.loads(pickle.dumps(ref)) == ref and pickle.loads(pickle.dumps(ref)).check == ref.check


def test_parts_on_other_stores_keep_page_checksums():
    # A store read by ranges (S3; here the in-memory store, which is treated alike) gets
    # page checksums as well: a streaming read checks the pages it reads.
    from colmz.arrangement.runs import write_run
    from colmz.storage import MemBlob

    store = MemBlob()
    run = write_run(store, ups(1).schema, ups(5000))
    key = run.keys[0]
    assert json.loads(pq.read_metadata(pa.BufferReader(store.get(key))).metadata[PART_METADATA_KEY])[
        "page_checksums"] is True
    path_bytes = bytearray(store.get(key))
    col = pq.read_metadata(pa.BufferReader(bytes(path_bytes))).row_group(0).column(0)
    path_bytes[col.data_page_offset + 100] ^= 0x10
    store.set(key, bytes(path_bytes))
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(pa.BufferReader(bytes(path_bytes)), page_checksum_verification=True).read()
    with pytest.raises(CorruptPart, match=f"{key}.*not readable"):
        list(iter_part(store, key, ups(1).schema, batch_rows=1000))  # the page's CRC
    with pytest.raises(CorruptPart, match=f"{key}.*has digest"):
        read_part(store, run.parts[0], ups(1).schema)  # the whole part's digest, from the run


def test_a_local_part_streamed_through_another_store_is_checked_whole(tmp_path):
    # A part written to a local directory has no page checksums; read by ranges through
    # another store (here a pass-through wrapper), it is fetched whole for its digest.
    from colmz.storage.faults import FaultPlan, FaultyBlob

    a, key = store_with_part(tmp_path)
    flip_data_byte(a.store.path_of(key), 1)
    wrapped = FaultyBlob(a.store, FaultPlan(fail_at=None))
    with pytest.raises(CorruptPart, match=f"{key}.*has digest"):
        list(iter_part(wrapped, ref_of(a, key), a.schema, batch_rows=1000))


def test_part_replaced_by_another_is_corrupt(tmp_path):
    # Before: a part replaced by another part of the same schema was read silently.
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA)
    a.write(ups(100, seed=1))
    a.write(ups(100, seed=2, diff=2))
    k1, k2 = sorted(a.store.list_keys(a.prefix))
    a.store.set(k1, a.store.get(k2))
    with pytest.raises(CorruptPart, match=f"{k1}.*written as.*{k2}"):
        Arrangement.open(a._url).read()


def test_part_rewritten_with_other_diffs_is_corrupt(tmp_path):
    # A part rewritten (here: without the key in its metadata, as an older colmz or another
    # tool writes) with other diffs: the digest its state recorded catches it; in a state
    # from before digests, the state's diff sum does, and with other rows its row count.
    a, key = store_with_part(tmp_path, n=500)
    t = pq.read_table(str(a.store.path_of(key)))
    md = {PART_METADATA_KEY: json.dumps({"kind": "unsealed", "seqnos": [0, 1], "index": 0}).encode()}
    doubled = t.set_column(t.schema.get_field_index("diff"), "diff",
                           pa.array(np.full(len(t), 2, np.int64))).replace_schema_metadata(md)
    pq.write_table(doubled, str(a.store.path_of(key)))
    with pytest.raises(CorruptPart, match=f"{key}.*has digest [0-9a-f]{{16}}; its state recorded"):
        Arrangement.open(a._url).read()
    without_digests(a, key)
    with pytest.raises(CorruptPart, match=f"{key}.*diffs summing to 1000; its state recorded 500"):
        Arrangement.open(a._url).read()
    pq.write_table(t.slice(1).replace_schema_metadata(md), str(a.store.path_of(key)))
    with pytest.raises(CorruptPart, match=f"{key}.*499 rows; its state recorded 500"):
        Arrangement.open(a._url).read()


def without_digests(a, key):
    """Commit ``a``'s state with its checks cut to ``[rows, diff_sum]`` (a state written
    before digests)."""
    log = StateLog(a._log.consensus, a._log.key)
    seqno, state = log.load()
    for b in state["meta"]["unsealed_batches"] + state["meta"]["trace_batches"]:
        b["checks"] = [c[:2] for c in b["checks"]]
    log.commit(seqno, state)


def test_checks_reach_the_state_and_survive_reopening_and_merges(tmp_path):
    a = Arrangement.open(str(tmp_path / "s"), SCHEMA, fan_in=2)
    for t in range(4):
        a.write(ups(300, t=t, seed=t))
        a.seal(t + 1)
        a.maintain()
    _, state = StateLog(a._log.consensus, a._log.key).load()
    batches = state["meta"]["trace_batches"] + state["meta"]["unsealed_batches"]
    assert batches and all(len(b["checks"]) == len(b["keys"]) for b in batches)
    for b in batches:
        assert sum(c[0] for c in b["checks"]) == b["len"]
    fresh = Arrangement.open(str(tmp_path / "s"))
    recorded = {k: tuple(c) for b in batches for k, c in zip(b["keys"], b["checks"])}
    # what a reader outside the handle gets (Arrangement.parts: spark's part_list) and what
    # the handle's own reads pass to read_part (the batches' parts) carry the same checks
    listed = fresh.parts()
    assert listed and all(tuple(p.check) == recorded[p.key] for p in listed)
    assert {p.key: tuple(p.check) for b in (*fresh.trace_batches, *fresh.unsealed_batches)
            for p in b.parts} == recorded
    assert sorted(fresh.read().to_pylist()) == sorted(a.read().to_pylist())


def test_state_without_checks_still_loads(tmp_path):
    # A state written before checks existed (no "checks" fields) loads and reads; the checks
    # that need the state are skipped, the page checksums still apply.
    a, key = store_with_part(tmp_path, n=50)
    log = StateLog(a._log.consensus, a._log.key)
    seqno, state = log.load()
    for b in state["meta"]["unsealed_batches"]:
        b.pop("checks")
    log.commit(seqno, state)
    b = Arrangement.open(a._url)
    assert b.unsealed_batches[0].checks is None
    assert len(b.read()) == 50
    # the next commit (a new batch) records checks for its own parts only
    b.write(ups(10, t=1, seed=9))
    _, state = log.load()
    assert "checks" not in state["meta"]["unsealed_batches"][0]
    assert len(state["meta"]["unsealed_batches"][1]["checks"]) == 1


def test_written_runs_carry_checks(tmp_path):
    from colmz.arrangement.runs import WrittenRun, write_run

    a = Arrangement.open(str(tmp_path / "s"), SCHEMA)
    run = write_run(a.store, a.schema, ups(200), prefix=a.prefix)
    d = run.to_dict()
    digest = part_digest(a.store.get(run.keys[0]))
    assert d["checks"] == [[200, 200, digest]]
    a.append_runs([WrittenRun.from_dict(d)], seal=1)
    assert a.unsealed_batches[0].checks == ((200, 200, digest),)
    # a run described before digests is taken as it is
    assert WrittenRun.from_dict({**d, "checks": [[200, 200]]}).checks == ((200, 200),)
    with pytest.raises(ValueError, match="checks"):
        WrittenRun.from_dict({**d, "checks": [[1]]})


def test_state_checks_with_and_without_digests_load_and_bad_ones_do_not():
    from colmz.arrangement.errors import CorruptMeta
    from colmz.arrangement.meta import empty_meta, meta_from_dict

    def meta_with(checks):
        m = empty_meta()
        m["unsealed_batches"] = [{"seqnos": [0, 1], "ts_lower": 0, "ts_upper": 0,
                                  "keys": ["p/1.parquet", "p/2.parquet"], "checks": checks}]
        return m

    _, _, unsealed, _ = meta_from_dict(meta_with([[3, 3, -2**63], [2, -1]]))
    assert unsealed[0].checks == ((3, 3, -2**63), (2, -1))
    for bad in ([[3, 3, 2**63], [2, 2]], [[3, 3, 1, 1], [2, 2]], [[3, 3, True], [2, 2]], [[3, 3]]):
        with pytest.raises(CorruptMeta, match="checks"):
            meta_from_dict(meta_with(bad))
