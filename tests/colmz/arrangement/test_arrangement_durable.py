"""The durable user API of ``colmz.Arrangement``: open/write/seal/advance_since/maintain/read,
commits by compare-and-set, gc leases, bad input (each a specific exception and the store
unchanged), and the open format read by ``pyarrow.dataset`` and DuckDB without colmz."""

from __future__ import annotations

import itertools
import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import (
    Arrangement,
    CommitConflict,
    CorruptMeta,
    CorruptPart,
    InvalidAsOf,
    LeaseExpired,
    MissingPart,
    SchemaMismatch,
    SealRegression,
    SinceRegression,
    TimeBeforeSeal,
)
from colmz.storage import MemBlob
from colmz.storage.state import CorruptState, StateLog

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64())])
_ids = itertools.count()


@pytest.fixture(params=["mem", "local", "s3+postgres"])
def url(request, tmp_path):
    """A fresh store per backend: a URL, or an opened Location for the server-backed kinds
    (which skip when their server is missing)."""
    if request.param == "mem":
        return f"mem://durable-{os.getpid()}-{next(_ids)}"
    if request.param == "local":
        return str(tmp_path / "store")
    from storage_servers import make_location

    return make_location(request.param, tmp_path)


def ups(rows):
    return colmz.Updates(
        {"k": pa.array([r[0] for r in rows], pa.string()), "n": pa.array([r[1] for r in rows], pa.int64())},
        time=[r[2] for r in rows], diff=[r[3] for r in rows],
    )


def listing(a: Arrangement):
    """What an outside observer of the store sees: blob keys and the consensus head."""
    head = a._log.consensus.head(a._log.key) if a.durable else None
    return a.store.list_keys(), (head.seqno, head.data) if head else None


# ---------------------------------------------------------------- open, write, seal, read


def test_create_write_seal_reopen(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1), ("b", 2, 1, 1)]))
    a.seal(2)
    a.write(ups([("a", 1, 5, -1)]))
    b = Arrangement.open(url)
    assert b.schema == a.schema
    assert b.get_seal() == 2
    assert b.read().to_pylist() == [("a", 1, 0, 1), ("a", 1, 5, -1), ("b", 2, 1, 1)]
    assert b.meta() == a.meta()


def test_write_accepts_arrow_and_pandas(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(pa.table({"k": ["a"], "n": [1], "time": [0], "diff": [1]}))
    a.write(pa.table({"k": ["b"], "n": [2], "time": [0], "diff": [1]}).to_pandas())
    assert sorted(a.read().to_pylist()) == [("a", 1, 0, 1), ("b", 2, 0, 1)]


def test_schema_pinned_by_first_write(url):
    a = Arrangement.open(url)
    assert a.schema is None
    a.write(ups([("a", 1, 0, 1)]))
    assert [(s.name, s.type) for s in Arrangement.open(url).schema] == [("k", pa.string()), ("n", pa.int64())]


def test_all_null_column_takes_the_pinned_type(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(colmz.Updates({"k": ["a"], "n": [None]}, time=[0], diff=[1]))
    assert a.read().to_pylist() == [("a", None, 0, 1)]


def test_read_as_of(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1), ("a", 1, 3, 1), ("b", 1, 4, 1), ("a", 1, 6, -2)]))
    a.seal(7)
    assert a.read(3).to_pylist() == [("a", 1, 3, 2)]
    assert a.read(5).to_pylist() == [("a", 1, 5, 2), ("b", 1, 5, 1)]
    assert a.read(6).to_pylist() == [("b", 1, 6, 1)]
    a.maintain()
    a.advance_since(4)
    assert a.read(4).to_pylist() == [("a", 1, 4, 2), ("b", 1, 4, 1)]
    with pytest.raises(InvalidAsOf, match="as_of 3 is before the since 4"):
        a.read(3)
    with pytest.raises(InvalidAsOf, match="as_of 7 is not before the seal 7"):
        a.read(7)
    assert a.to_arrow(5).num_rows == 2 and len(a.to_pandas()) == 3


def test_empty_seal_is_one_small_metadata_write(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1)]))
    keys, (seqno, _) = listing(a)
    stats = a._log.stats
    before = stats.bytes_committed
    a.seal(10)
    keys2, (seqno2, _) = listing(a)
    assert keys2 == keys and seqno2 == seqno + 1
    assert stats.bytes_committed - before < 200  # a diff naming the new seal, not the state


def test_write_of_cancelling_updates_writes_nothing(url):
    a = Arrangement.open(url, SCHEMA)
    before = listing(a)
    a.write(ups([("a", 1, 0, 1), ("a", 1, 0, -1)]))
    assert listing(a) == before


def test_maintain_drains_compacts_and_deletes_replaced_parts(url):
    a = Arrangement.open(url, SCHEMA, fan_in=2)
    for t in range(8):
        a.write(ups([(f"k{t % 3}", t, t, 1)]))
        a.seal(t + 1)
        a.maintain()
        a.validate_data()
    assert a.unsealed_batches == []
    assert len(a.trace_batches) <= 2 * np.log2(8)
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys()
    assert Counter(a.read().to_pylist()) == Counter((f"k{t % 3}", t, t, 1) for t in range(8))


def test_maintain_fuel_bounds_each_call_and_resumes_merges(url):
    a = Arrangement.open(url, SCHEMA, fan_in=2, part_rows=2)
    for t in range(4):
        a.unsealed_append(ups([(f"k{i}", t, t, 1) for i in range(3)]))
        a.update_seal(t + 1)
        a.drain()
    a.commit()
    calls, merging_seen = 0, False
    while True:
        r = a.maintain(fuel=2)
        calls += 1
        # a call stops once its fuel is spent; one step reads at most a part per input more
        assert r["rows"] <= 2 + 2 * 2
        merging_seen |= r["merging"]
        if not r["merging"] and a.geometric_compact_req() is None:
            break
        assert calls < 50
    assert merging_seen and calls > 3
    assert [b.level for b in a.trace_batches] == [2]
    assert Counter(a.read().to_pylist()) == Counter((f"k{i}", t, t, 1) for t in range(4) for i in range(3))
    a.validate_data()
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys()


def test_half_done_merge_is_dropped_when_its_inputs_change(url):
    a = Arrangement.open(url, SCHEMA, fan_in=2, part_rows=1)
    for t in range(2):
        a.write(ups([(f"k{i}", t, t, 1) for i in range(4)]))
        a.seal(t + 1)
        a.maintain(policy="levels")  # drains (since 0: no pairwise merge)
    assert len(a.trace_batches) == 2
    r = a.maintain(fuel=1)
    assert r["merging"]
    written = set(a.store.list_keys(a.prefix)) - a.referenced_keys()
    assert written  # the half-done merge's first parts
    a.advance_since(2)
    a.compact()  # the level rule merges the same pair first (core call, then commit)
    a.commit()
    r = a.maintain()
    assert not r["merging"] and r["compactions"] == 0
    assert not (written & set(a.store.list_keys(a.prefix)))  # its parts went with it
    assert len(a.read()) == 8


def test_maintain_levels_policy_is_upstreams_rule(url):
    a = Arrangement.open(url, SCHEMA)
    for t in range(4):
        a.write(ups([("a", t, t, 1)]))
        a.seal(t + 1)
        a.maintain(policy="levels")
    assert len(a.trace_batches) == 4  # since 0: nothing may compact under the level rule
    a.advance_since(4)
    a.maintain(policy="levels")
    assert [b.level for b in a.trace_batches] == [2]


def test_parts_listing_and_repr(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1)]))
    a.seal(1)
    a.maintain()
    a.write(ups([("b", 1, 3, 1)]))
    kinds = [p.kind for p in a.parts()]
    assert kinds == ["trace", "unsealed"]
    assert a.parts()[1].min_time == 1
    assert repr(a).startswith(f"Arrangement({getattr(url, 'url', str(url))!r}, seal=1")


# ---------------------------------------------------------------- commits and conflicts


def test_two_writers_both_land_once(url):
    """A write that loses its compare-and-set is applied again to the state the other writer
    committed (colmz.arrangement.machine): both writes land, each once, and the loser's
    first parts are deleted. (Before, the loser raised CommitConflict and its caller had to
    refresh and write again.)"""
    a = Arrangement.open(url, SCHEMA)
    b = Arrangement.open(url)
    a.write(ups([("a", 1, 0, 1)]))
    b.write(ups([("b", 1, 0, 1)]))
    assert b.seqno == a.seqno + 1
    assert sorted(Arrangement.open(url).read().to_pylist()) == [("a", 1, 0, 1), ("b", 1, 0, 1)]
    assert set(b.store.list_keys(b.prefix)) == b.referenced_keys()  # no orphan part


def test_a_writer_losing_every_compare_and_set_gives_up_after_the_bound(url):
    """Another writer commits before each of this writer's compare-and-sets: after
    ``ATTEMPTS`` tries the call raises CommitConflict, committed nothing, deleted every part it
    wrote, and the handle holds the state last read."""
    from colmz.arrangement.machine import ATTEMPTS

    a = Arrangement.open(url, SCHEMA)
    b = Arrangement.open(url)
    real = b._log.commit
    calls = []

    def racing_commit(expected, state):
        calls.append(expected)
        a.write(ups([("a", 1, len(calls), 1)]))  # the other writer lands first
        return real(expected, state)

    b._log.commit = racing_commit
    with pytest.raises(CommitConflict):
        b.write(ups([("b", 1, 9, 1)]))
    assert len(calls) == ATTEMPTS
    b._log.commit = real
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys()  # b's parts all deleted
    assert [r[0] for r in Arrangement.open(url).read().to_pylist()] == ["a"] * ATTEMPTS
    assert b.seqno == a.seqno - 1  # the state read before the other writer's last commit
    b.refresh()
    b.write(ups([("b", 1, 9, 1)]))
    assert sorted(r[0] for r in Arrangement.open(url).read().to_pylist()) == ["a"] * ATTEMPTS + ["b"]


class FailingBlob:
    """A MemBlob whose ``set`` fails once armed (the full fault sweeps live elsewhere)."""

    def __init__(self):
        self.inner = MemBlob()
        self.fail_sets = 0

    def get(self, key):
        return self.inner.get(key)

    def set(self, key, value):
        if self.fail_sets:
            self.fail_sets -= 1
            raise OSError("injected blob failure")
        self.inner.set(key, value)

    def delete(self, key):
        self.inner.delete(key)

    def list_keys(self, prefix=""):
        return self.inner.list_keys(prefix)

    def url_of(self, key):
        return self.inner.url_of(key)


def test_failed_part_write_changes_nothing():
    blob = FailingBlob()
    a = Arrangement(blob, schema=SCHEMA, part_rows=1)
    a.write(ups([("a", 1, 0, 1)]))
    meta, keys = a.meta(), blob.list_keys()
    blob.fail_sets = 1
    with pytest.raises(OSError):
        a.write(ups([("b", 1, 0, 1), ("c", 1, 0, 1)]))
    assert a.meta() == meta and blob.list_keys() == keys


def test_lease_refuses_a_commit_of_old_parts():
    now = [1_000_000.0]
    blob = FailingBlob()
    a = Arrangement(blob, schema=SCHEMA, clock=lambda: now[0], lease_seconds=10)
    from colmz.storage import MemConsensus

    a._log = StateLog(MemConsensus(), "arr")
    a.commit()
    orig_set = blob.set

    def slow_set(key, value):
        orig_set(key, value)
        now[0] += 6  # the part is older than half the lease when the commit checks
    blob.set = slow_set
    before = (a.meta(), blob.list_keys())
    with pytest.raises(LeaseExpired, match="half the gc lease"):
        a.write(ups([("a", 1, 0, 1)]))
    assert (a.meta(), blob.list_keys()) == before


def test_gc_respects_the_lease_and_references(url):
    now = [2_000_000.0]
    a = Arrangement.open(url, SCHEMA, clock=lambda: now[0], lease_seconds=100)
    a.write(ups([("a", 1, 0, 1)]))
    a.store.set(a.prefix + "9999999999999-orphan.parquet", b"x")  # a future, in-flight part
    young = a.new_blob_key()
    a.store.set(young, b"x")  # an unreferenced part, inside the lease
    assert a.gc() == []
    now[0] += 101
    # past the lease, but written against the version gc reads: a commit may be in flight
    assert a.gc() == []
    a.seal(5)  # a later version: now it is a dead writer's garbage
    assert a.gc() == [young]
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys() | {a.prefix + "9999999999999-orphan.parquet"}
    assert len(a.read()) == 1


def test_read_retries_once_when_gc_removed_a_part(url):
    a = Arrangement.open(url, SCHEMA, fan_in=2)
    for t in range(2):
        a.write(ups([("a", t, t, 1)]))
        a.seal(t + 1)
        a.maintain(policy="levels")
    stale = Arrangement.open(url)
    a.advance_since(2)
    a.maintain(policy="levels")  # compacts and deletes the replaced parts
    assert stale.read().to_pylist() == a.read().to_pylist()
    assert stale.seqno == a.seqno


# ---------------------------------------------------------------- bad input


def test_schema_mismatch_names_both(url):
    Arrangement.open(url, SCHEMA)
    with pytest.raises(SchemaMismatch, match=r"has schema \{k: string, n: int64\}, not the requested \{k: int64\}"):
        Arrangement.open(url, {"k": pa.int64()})


@pytest.mark.parametrize("bad, exc, match", [
    (lambda: colmz.Updates({"k": [1], "n": [1]}, time=[5], diff=[1]), SchemaMismatch, "column 'k' has type int64"),
    (lambda: colmz.Updates({"x": ["a"]}, time=[5], diff=[1]), SchemaMismatch, "have columns"),
    (lambda: ups([("a", 1, 2, 1)]), TimeBeforeSeal, "time 2, before the seal 3"),
    (lambda: pa.table({"k": ["a"], "n": [1], "time": [-4], "diff": [1]}), ValueError, "negative time -4"),
    (lambda: pa.table({"k": ["a"], "n": [1], "time": [4.5], "diff": [1]}), ValueError, "fractional"),
    (lambda: "not updates", TypeError, "colmz.Updates"),
])
def test_bad_writes_change_nothing(url, bad, exc, match):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 3, 1)]))
    a.seal(3)
    before = listing(a), a.meta()
    with pytest.raises(exc, match=match):
        a.write(bad())
    assert (listing(a), a.meta()) == before


def test_bad_seal_and_since_change_nothing(url):
    a = Arrangement.open(url, SCHEMA)
    a.seal(5)
    a.advance_since(2)
    before = listing(a), a.meta()
    with pytest.raises(SealRegression):
        a.seal(4)
    with pytest.raises(SinceRegression):
        a.advance_since(1)
    with pytest.raises(TypeError):
        a.seal("6")
    with pytest.raises(ValueError):
        a.maintain(fuel=-1)
    with pytest.raises(ValueError):
        a.maintain(policy="nope")
    assert (listing(a), a.meta()) == before


def test_unknown_url_scheme():
    with pytest.raises(ValueError, match="unknown store URL scheme 'ftp'"):
        Arrangement.open("ftp://host/x")


def test_store_path_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises((NotADirectoryError, FileExistsError, ValueError), match="file"):
        Arrangement.open(str(f))
    assert f.read_text() == "x"


def test_state_of_another_kind_is_corrupt_meta(url):
    a = Arrangement.open(url, SCHEMA)
    log = a._log
    log.commit(a.seqno, {"format": 99, "meta": {}})
    with pytest.raises(CorruptMeta, match="not a colmz arrangement"):
        Arrangement.open(url)


def test_truncated_metadata_is_reported(url):
    a = Arrangement.open(url, SCHEMA)
    cons, key = a._log.consensus, a._log.key
    from colmz.storage import VersionedData

    head = cons.head(key)
    assert cons.compare_and_set(key, head.seqno, VersionedData(head.seqno + 1, head.data[: len(head.data) // 2]))
    with pytest.raises((CorruptState, CorruptMeta)):
        Arrangement.open(url)


def test_invalid_metadata_is_reported(url):
    a = Arrangement.open(url, SCHEMA)
    state = {"format": 1, "schema": None, "meta": {"seal": 1, "since": 0, "unsealed_batches": [],
             "trace_batches": [{"desc": [0, 5, 0], "level": 0, "keys": []}]}}
    a._log.commit(a.seqno, state)
    with pytest.raises(CorruptMeta, match="beyond the seal"):
        Arrangement.open(url)


def test_missing_and_corrupt_parts_are_named(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1)]))
    key = a.unsealed_batches[0].keys[0]
    data = a.store.get(key)
    a.store.set(key, data[:20])
    with pytest.raises(CorruptPart, match=key):
        a.read()
    a.store.delete(key)
    with pytest.raises(MissingPart, match=key):
        a.read()


# ---------------------------------------------------------------- open format


def _external_read(a: Arrangement):
    """Read the current contents from ``parts()`` with pyarrow alone (no colmz)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    tables = []
    for kind in ("trace", "unsealed"):
        parts = [p for p in a.parts() if p.kind == kind]
        if not parts:
            continue
        t = ds.dataset([p.url for p in parts], format="parquet").to_table(
            filter=pc.field("time") >= parts[0].min_time)
        tables.append(t)
    t = pa.concat_tables(tables)
    since = a.since()
    t = t.set_column(t.schema.get_field_index("time"), "time",
                     pc.max_element_wise(t["time"], pa.scalar(since, pa.uint64())))
    g = t.group_by(["k", "n", "time"]).aggregate([("diff", "sum")])
    return Counter({(r["k"], r["n"], r["time"]): r["diff_sum"] for r in g.to_pylist() if r["diff_sum"]})


def _trickle(url):
    a = Arrangement.open(url, SCHEMA, fan_in=2, part_rows=2)
    for t in range(6):
        a.write(ups([(f"k{i}", i % 2, t, 1 if (i + t) % 3 else -1) for i in range(4)]))
        a.seal(t + 1)
        if t % 2:
            a.maintain()
    a.advance_since(3)
    a.write(ups([("z", 0, 9, 1)]))
    return a


def test_pyarrow_dataset_reads_parts_without_colmz(tmp_path):
    a = _trickle(str(tmp_path / "store"))
    expected = Counter({(k, n, t): d for k, n, t, d in a.read().to_pylist()})
    assert _external_read(a) == expected
    assert all(os.path.exists(p.url) for p in a.parts())


def test_duckdb_reads_parts_without_colmz(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    a = _trickle(str(tmp_path / "store"))
    trace = [p.url for p in a.parts() if p.kind == "trace"]
    unsealed = [p.url for p in a.parts() if p.kind == "unsealed"]
    lower = a.trace_ts_upper()
    sql = f"""
        SELECT k, n, greatest(time, {a.since()}::UBIGINT) AS time, sum(diff)::BIGINT AS diff
        FROM (SELECT * FROM read_parquet({trace!r})
              UNION ALL
              SELECT * FROM read_parquet({unsealed!r}) WHERE time >= {lower})
        GROUP BY ALL HAVING sum(diff) <> 0
    """
    got = Counter({(k, n, t): d for k, n, t, d in duckdb.sql(sql).fetchall()})
    assert got == Counter({(k, n, t): d for k, n, t, d in a.read().to_pylist()})


def test_maintain_reloads_after_losing_to_another_writer(url):
    a = Arrangement.open(url, SCHEMA)
    a.write(ups([("a", 1, 0, 1)]))
    a.seal(1)
    stale = Arrangement.open(url)
    a.write(ups([("b", 1, 2, 1)]))
    r = stale.maintain()  # its drain loses the compare-and-set, then it reloads and drains
    assert r["conflicts"] == 1 and r["drains"] == 1
    assert stale.read().to_pylist() == [("a", 1, 0, 1), ("b", 1, 2, 1)]
    a.refresh()
    assert a.meta() == stale.meta()
    assert set(a.store.list_keys(a.prefix)) == a.referenced_keys()


def test_concurrent_creation_converges(url):
    # a second opener that loses the creating compare-and-set reads the winner's record
    first = Arrangement.open(url, SCHEMA)
    first.write(ups([("a", 1, 0, 1)]))
    from colmz.storage.state import StateLog as RealStateLog

    class LateLog(RealStateLog):
        calls = 0

        def load(self):
            LateLog.calls += 1
            return (None, None) if LateLog.calls == 1 else super().load()

    import colmz.storage.state as state_mod

    orig = state_mod.StateLog
    state_mod.StateLog = LateLog
    try:
        second = Arrangement.open(url, SCHEMA)
    finally:
        state_mod.StateLog = orig
    assert LateLog.calls >= 2
    assert second.read().to_pylist() == [("a", 1, 0, 1)]


class TimeoutAfterApply:
    """A consensus whose next compare-and-set lands but reports a timeout."""

    def __init__(self, inner):
        self.inner = inner
        self.armed = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def compare_and_set(self, key, expected, new):
        ok = self.inner.compare_and_set(key, expected, new)
        if self.armed:
            self.armed = False
            from colmz.storage import Indeterminate

            raise Indeterminate("injected timeout after the write landed")
        return ok


def test_commit_that_landed_behind_a_timeout_is_not_written_twice():
    from colmz.storage import MemConsensus
    from colmz.storage.url import Location

    cons = TimeoutAfterApply(MemConsensus())
    loc = Location(MemBlob(), cons, "mem://timeout")
    a = Arrangement.open(loc, SCHEMA)
    head = cons.head(a._log.key).seqno
    cons.armed = True
    a.write(ups([("a", 1, 0, 1)]))
    assert cons.head(a._log.key).seqno == head + 1 == a.seqno
    assert Arrangement.open(loc).read().to_pylist() == [("a", 1, 0, 1)]
    assert set(loc.blob.list_keys(a.prefix)) == a.referenced_keys()


def test_trickle_write_amplification_and_batch_count_are_logarithmic():
    # work counters, not timings: 128 seals of 5 distinct updates with maintain() after each
    a = Arrangement.open(f"mem://trickle-{os.getpid()}-{next(_ids)}", SCHEMA)
    n = 128
    for s in range(n):
        a.write(ups([(f"k{s}-{i}", i, s, 1) for i in range(5)]))
        a.seal(s + 1)
        a.maintain()
        assert len(a.trace_batches) <= max(2, 2 * np.log2(s + 1))
    st = a.stats()
    # each update written once, then rewritten once per level it climbs (log4 128 = 3.5)
    assert st["rows_written"] <= st["updates_written"] * (1 + 4)
    assert len(a.read()) == 5 * n


def test_two_named_arrangements_share_a_store(url):
    a = Arrangement.open(url, SCHEMA, name="orders")
    b = Arrangement.open(url, {"x": pa.int64()}, name="users")
    a.write(ups([("a", 1, 0, 1)]))
    b.write(colmz.Updates({"x": [7]}, time=[0], diff=[1]))
    assert a.prefix == "orders/parts/" and b.prefix == "users/parts/"
    a.store.set(a.prefix + "0000000000001-stray.parquet", b"x")
    assert b.gc(lease_seconds=0) == []  # another arrangement's parts are not b's to collect
    assert Arrangement.open(url, name="orders").read().to_pylist() == [("a", 1, 0, 1)]
    assert Arrangement.open(url, name="users").read().to_pylist() == [(7, 0, 1)]


def test_open_without_create_needs_an_arrangement(url):
    Arrangement.open(url, SCHEMA)
    with pytest.raises(FileNotFoundError, match="no arrangement 'other'"):
        Arrangement.open(url, name="other", create=False)


def test_compaction_result_survives_a_concurrent_write(url, monkeypatch):
    # a write landing while a merge runs makes the merge's commit lose; the merged batch is
    # then applied to the reloaded state, not recomputed
    m = Arrangement.open(url, SCHEMA, fan_in=2)
    for t in range(2):
        m.write(ups([("a", t, t, 1)]))
        m.seal(t + 1)
        m.maintain(policy="levels")
    m.advance_since(2)
    other = Arrangement.open(url)
    from colmz.arrangement import CompactionJob

    real = CompactionJob.result
    calls = []

    def compact_then_race(job):
        res = real(job)
        calls.append(job.req)
        other.write(ups([("b", 9, 5, 1)]))
        return res
    monkeypatch.setattr(CompactionJob, "result", compact_then_race)
    rows_before = m.stats()["rows_written"]
    r = m.maintain(policy="levels")
    assert len(calls) == 1 and r["compactions"] == 1 and r["conflicts"] == 1
    assert m.stats()["rows_written"] - rows_before == 2
    assert m.read().to_pylist() == [("a", 0, 2, 1), ("a", 1, 2, 1), ("b", 9, 5, 1)]
    assert set(m.store.list_keys(m.prefix)) == m.referenced_keys()


def test_stale_compaction_result_is_dropped_with_its_parts(url, monkeypatch):
    m = Arrangement.open(url, SCHEMA, fan_in=2)
    for t in range(2):
        m.write(ups([("a", t, t, 1)]))
        m.seal(t + 1)
        m.maintain(policy="levels")
    m.advance_since(2)
    other = Arrangement.open(url)
    from colmz.arrangement import CompactionJob

    real = CompactionJob.result

    def compact_then_lose(job):
        res = real(job)
        if not getattr(compact_then_lose, "done", False):
            compact_then_lose.done = True
            other.maintain(policy="levels")  # compacts the same pair first
        return res
    monkeypatch.setattr(CompactionJob, "result", compact_then_lose)
    r = m.maintain(policy="levels")
    assert r["conflicts"] == 1 and r["compactions"] == 0
    m.refresh()
    assert set(m.store.list_keys(m.prefix)) == m.referenced_keys()
    assert m.read().to_pylist() == [("a", 0, 2, 1), ("a", 1, 2, 1)]


def test_unwritable_store_path():
    # /sys refuses new directories even to root, so this holds whoever runs the tests
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("needs a Linux /sys")
    with pytest.raises(PermissionError, match="/sys/colmz-nope/store"):
        Arrangement.open("/sys/colmz-nope/store")


def test_a_drain_hands_over_committed_parts_older_than_half_the_lease(tmp_path):
    """A drain that moves one unsealed batch's parts to the trace unchanged references no new
    part: parts the committed state names are safe from gc whatever their age. (Before, the
    step's lease check covered those parts too, and a batch committed more than half a lease
    ago could never be drained: every maintain() raised LeaseExpired.)"""
    now = [1_700_000_000.0]
    a = Arrangement.open(str(tmp_path / "a"), SCHEMA, clock=lambda: now[0], lease_seconds=60)
    a.write(ups([("a", 1, 0, 1)]))
    now[0] += 121
    assert a.gc() == []
    a.seal(1)
    r = a.maintain()
    assert r["drains"] == 1 and a.trace_ts_upper() == 1
    assert Arrangement.open(str(tmp_path / "a")).read().to_pylist() == [("a", 1, 0, 1)]


def test_a_read_changes_no_state_so_a_lost_compare_and_set_is_retried():
    # A state naming no schema (runs appended from elsewhere) has a read take the schema
    # from a part. That is no change of the state: the handle's next durable call, losing its
    # compare-and-set to another writer, is applied again to the new head like any other
    # (a handle holding uncommitted core changes is the one that is not retried).
    from colmz.arrangement.runs import write_run
    from colmz.order import ColumnSpec

    a = Arrangement.open("mem://read-changes-no-state")
    assert a.schema is None
    u = colmz.Updates({"k": [1]}, time=[0], diff=[1])
    a.append_runs([write_run(a.store, (ColumnSpec("k", pa.int64()),), u, prefix=a.prefix)], seal=1)
    assert a.state.schema is None
    b = Arrangement.open("mem://read-changes-no-state")
    assert a.read().to_pylist() == [(1, 0, 1)]
    b.seal(2)  # a is behind: its next compare-and-set is lost
    a.seal(3)
    assert a.get_seal() == 3 and a.stats()["commits"] == 3  # create, append, seal
    assert Arrangement.open("mem://read-changes-no-state").get_seal() == 3
    assert Arrangement.open("mem://read-changes-no-state").read().to_pylist() == [(1, 0, 1)]
