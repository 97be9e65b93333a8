"""A store knows its identity (``colmz.arrangement.identity``): stores sharing one consensus
database keep their own records; a blob whose metadata is lost is refused, never taken for a
new store; gc refuses what its state cannot account for; stores from before identities are
adopted. Each test below failed on the code before identities (noted per test)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import colmz
from colmz.arrangement import Arrangement, IdentityMismatch, MetadataLost
from colmz.arrangement.identity import identity_key, read_identity
from colmz.storage.state import StateLog
from colmz.storage.url import open_location

SCHEMA = {"k": pa.int64()}


def ups(keys, t=0):
    return colmz.Updates({"k": pa.array(keys, pa.int64())}, time=[t] * len(keys), diff=[1] * len(keys))


def contents(a):
    return sorted(a.read().to_pylist())


def shared_consensus(kind, tmp_path):
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/shared.sqlite"
    from storage_servers import fresh_schema_url, postgres_url

    return fresh_schema_url(postgres_url())  # ONE URL, used by both stores below


def blob_url(kind, tmp_path, which):
    if kind == "s3":
        from storage_servers import moto_endpoint, s3_url

        return s3_url(moto_endpoint())
    return str(tmp_path / which)


@pytest.mark.parametrize("blob_kind,cons_kind", [("local", "sqlite"), ("local", "postgres"),
                                                 ("s3", "postgres")])
def test_two_stores_share_one_consensus(tmp_path, blob_kind, cons_kind):
    # Before: B opened A's record (key "arrangement") and showed A's rows; B's write then
    # committed parts A's blob lacks and A's read raised MissingPart.
    cons = shared_consensus(cons_kind, tmp_path)
    ua, ub = blob_url(blob_kind, tmp_path, "a"), blob_url(blob_kind, tmp_path, "b")
    a = Arrangement.open(ua, SCHEMA, consensus=cons)
    a.write(ups([1, 2]))
    a.seal(1)
    b = Arrangement.open(ub, SCHEMA, consensus=cons)
    assert contents(b) == []
    b.write(ups([7]))
    b.seal(1)
    b.maintain()
    a.write(ups([3], 1))
    a.seal(2)
    a.maintain()
    assert contents(Arrangement.open(ua, consensus=cons)) == [(1, 0, 1), (2, 0, 1), (3, 1, 1)]
    assert contents(Arrangement.open(ub, consensus=cons)) == [(7, 0, 1)]
    ia, ib = a.identity, b.identity
    assert ia.id != ib.id and ia.consensus_key != ib.consensus_key
    assert Arrangement.open(ua, consensus=cons).identity == ia
    # gc through either handle keeps both stores whole
    Arrangement.open(ua, consensus=cons).gc(lease_seconds=0)
    Arrangement.open(ub, consensus=cons).gc(lease_seconds=0)
    assert contents(Arrangement.open(ua, consensus=cons)) == [(1, 0, 1), (2, 0, 1), (3, 1, 1)]
    assert contents(Arrangement.open(ub, consensus=cons)) == [(7, 0, 1)]


_WRITER = textwrap.dedent("""
    import sys, colmz, pyarrow as pa
    from colmz.arrangement import Arrangement
    from colmz.storage.state import CommitConflict
    url, cons, base, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    t0 = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    a = Arrangement.open(url, {"k": pa.int64()}, consensus=cons)
    for i in range(5):
        u = colmz.Updates({"k": pa.array([base + i], pa.int64())}, time=[t0 + i], diff=[1])
        if not shared:
            a.write(u)
            a.seal(i + 1)
            a.maintain()
            continue
        while True:  # one store, two writers: a lost compare-and-set is retried
            try:
                a.write(u)
                break
            except CommitConflict:
                a.refresh()
    print(a.identity.id)
""")


def _run_writers(args_list):
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, *map(str, args)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for args in args_list]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_two_processes_two_stores_one_consensus(tmp_path):
    # Two real processes, each its own store directory, one SQLite consensus URL: before,
    # both committed into one record, naming each other's parts.
    cons = f"sqlite:///{tmp_path}/shared.sqlite"
    ua, ub = str(tmp_path / "a"), str(tmp_path / "b")
    ida, idb = _run_writers([(ua, cons, 0, 0), (ub, cons, 100, 0)])
    assert ida != idb
    assert contents(Arrangement.open(ua, consensus=cons)) == [(i, i, 1) for i in range(5)]
    assert contents(Arrangement.open(ub, consensus=cons)) == [(100 + i, i, 1) for i in range(5)]


def test_two_processes_create_one_store(tmp_path):
    # Two processes creating the same new store at once end with one identity and one
    # record holding both processes' rows.
    url = str(tmp_path / "s")
    cons = f"sqlite:///{tmp_path}/c.sqlite"
    ids = _run_writers([(url, cons, 0, 1), (url, cons, 100, 1)])
    assert ids[0] == ids[1]
    a = Arrangement.open(url, consensus=cons)
    assert a.identity.id == ids[0]
    assert contents(a) == sorted((b + i, i, 1) for b in (0, 100) for i in range(5))


def test_two_handles_create_one_store_deterministically(tmp_path):
    # The deterministic two-handle version: the second creator's identity write loses and
    # it opens the first one's store.
    loc = open_location(str(tmp_path / "s"))
    first = Arrangement.open(loc, SCHEMA)
    # a second creator that read "no identity" before the first wrote it
    from colmz.arrangement.identity import StoreIdentity, write_identity

    late = StoreIdentity.new("arrangement", 0)
    assert write_identity(loc.blob, late) == first.identity
    second = Arrangement.open(loc, SCHEMA)
    assert second.identity == first.identity
    first.write(ups([1]))
    second.refresh()
    assert contents(second) == [(1, 0, 1)]


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_lost_consensus_is_refused_not_recreated(tmp_path, damage):
    # Before: open() created an empty arrangement over the parts and gc() deleted them all.
    d = tmp_path / "s"
    a = Arrangement.open(str(d), SCHEMA)
    a.write(ups([1, 2]))
    a.seal(1)
    a.maintain()
    parts = a.store.list_keys(a.prefix)
    assert parts
    # the record gone under a handle opened before: its gc refuses
    conn = sqlite3.connect(d / "consensus.sqlite")
    with conn:
        conn.execute("DELETE FROM consensus")
    conn.close()
    with pytest.raises(MetadataLost, match="nothing was deleted"):
        a.gc(lease_seconds=0)
    assert a.store.list_keys(a.prefix) == parts
    a._log.consensus.close()  # this process's connection must not keep the old file alive
    if damage == "delete":
        os.unlink(d / "consensus.sqlite")
    else:
        (d / "consensus.sqlite").write_bytes(b"")
    for wal in ("consensus.sqlite-wal", "consensus.sqlite-shm"):
        (d / wal).unlink(missing_ok=True)
    for create in (True, False):
        with pytest.raises(MetadataLost, match="metadata was lost") as e:
            Arrangement.open(str(d), create=create)
        assert str(d) in str(e.value) and parts[0] in str(e.value)
    assert a.store.list_keys(a.prefix) == parts


def test_lost_identity_and_consensus_is_refused(tmp_path):
    # No identity file either (a blob copied without it): still parts, still refused.
    d = tmp_path / "s"
    a = Arrangement.open(str(d), SCHEMA)
    a.write(ups([1]))
    os.unlink(d / "consensus.sqlite")
    a.store.delete(identity_key("arrangement"))
    with pytest.raises(MetadataLost, match="neither an identity nor a consensus record"):
        Arrangement.open(str(d))


def test_state_of_another_store_is_refused(tmp_path):
    # A blob whose identity names a record that carries another store's id (an identity
    # file copied from elsewhere): open and gc refuse, naming both ids.
    cons = f"sqlite:///{tmp_path}/c.sqlite"
    a = Arrangement.open(str(tmp_path / "a"), SCHEMA, consensus=cons)
    a.write(ups([1]))
    b = Arrangement.open(str(tmp_path / "b"), SCHEMA, consensus=cons)
    b.write(ups([2]))
    # b's identity replaced by one naming a's record under b's id
    doc = json.loads(b.store.get(identity_key("arrangement")))
    doc["consensus_key"] = a.identity.consensus_key
    b.store.delete(identity_key("arrangement"))
    b.store.set(identity_key("arrangement"), json.dumps(doc).encode())
    with pytest.raises(IdentityMismatch) as e:
        Arrangement.open(str(tmp_path / "b"), consensus=cons)
    assert a.identity.id in str(e.value) and b.identity.id in str(e.value)
    before = b.store.list_keys()
    with pytest.raises(IdentityMismatch, match="nothing was deleted"):
        b.gc(lease_seconds=0)
    assert b.store.list_keys() == before


def test_gc_refuses_parts_older_than_the_store(tmp_path):
    d = tmp_path / "s"
    a = Arrangement.open(str(d), SCHEMA)
    a.write(ups([1]))
    key = a.store.list_keys(a.prefix)[0]
    old = a.prefix + "0000000001000-" + "f" * 32 + ".parquet"
    a.store.set(old, a.store.get(key))
    with pytest.raises(MetadataLost, match="before the store was created"):
        a.gc(lease_seconds=0)
    assert old in a.store.list_keys(a.prefix)
    # young garbage (after creation) is still collected
    a.store.delete(old)
    young = a.prefix + f"{a.identity.created_ms + 1:013d}-" + "e" * 32 + ".parquet"
    a.store.set(young, a.store.get(key))
    assert a.gc(lease_seconds=0) == [young]
    assert contents(a) == [(1, 0, 1)]


def _legacy_store(url, keys, consensus=None, name="arrangement"):
    """A store exactly as the code before identities wrote it: parts under ``<name>/parts/``
    and a state without an identity at consensus key ``name``."""
    loc = open_location(url, consensus=consensus)
    a = Arrangement(loc.blob, schema=SCHEMA, prefix=f"{name}/parts/")
    a.unsealed_append(ups(keys))
    a.validate_seal(1)
    a.update_seal(1)
    a.drain()
    doc = a._machine.encode(a.state)
    assert "identity" not in doc
    StateLog(loc.consensus, name).commit(None, doc)
    return loc


def test_legacy_store_is_adopted(tmp_path):
    d = str(tmp_path / "old")
    loc = _legacy_store(d, [1, 2])
    assert read_identity(loc.blob, "arrangement") is None
    a = Arrangement.open(d)
    assert contents(a) == [(1, 0, 1), (2, 0, 1)]
    ident = read_identity(loc.blob, "arrangement")
    assert ident == a.identity and ident.consensus_key == "arrangement" and ident.created_ms is None
    _, state = StateLog(loc.consensus, "arrangement").load()
    assert state["identity"]["id"] == ident.id
    # it keeps working, and reopens as the same store
    a.write(ups([3], 1))
    a.seal(2)
    a.maintain()
    b = Arrangement.open(d)
    assert b.identity == ident
    assert contents(b) == [(1, 0, 1), (2, 0, 1), (3, 1, 1)]
    assert b.gc(lease_seconds=0) == []


@pytest.mark.parametrize("cons_kind", ["sqlite", "postgres"])
def test_legacy_record_of_another_store_is_refused(tmp_path, cons_kind):
    # Two legacy stores that shared one consensus (the first one's state won the key): the
    # first is adopted; the second, holding parts the record does not name, is refused
    # with both sides named -- and a fresh, empty blob next to them creates its own.
    cons = shared_consensus(cons_kind, tmp_path)
    first = _legacy_store(str(tmp_path / "a"), [1], consensus=cons)
    loc_b = open_location(str(tmp_path / "b"), consensus=cons)
    b = Arrangement(loc_b.blob, schema=SCHEMA, prefix="arrangement/parts/")
    b.unsealed_append(ups([9]))  # parts the shared record never named
    with pytest.raises(IdentityMismatch, match="belongs to another store") as e:
        Arrangement.open(str(tmp_path / "b"), consensus=cons)
    assert str(tmp_path / "b") in str(e.value)
    a = Arrangement.open(str(tmp_path / "a"), consensus=cons)
    assert contents(a) == [(1, 0, 1)]
    assert read_identity(first.blob, "arrangement") == a.identity
    with pytest.raises(IdentityMismatch, match=a.identity.id):
        Arrangement.open(str(tmp_path / "b"), consensus=cons)
    c = Arrangement.open(str(tmp_path / "c"), SCHEMA, consensus=cons)
    assert contents(c) == [] and c.identity.consensus_key != "arrangement"
    c.write(ups([5]))
    assert contents(Arrangement.open(str(tmp_path / "a"), consensus=cons)) == [(1, 0, 1)]


def test_identity_is_written_once(tmp_path):
    d = str(tmp_path / "s")
    a = Arrangement.open(d, SCHEMA)
    raw = a.store.get(identity_key("arrangement"))
    a.write(ups([1]))
    a.seal(1)
    a.maintain()
    Arrangement.open(d).write(ups([2], 1))
    assert a.store.get(identity_key("arrangement")) == raw
    assert a.store.set_if_absent(identity_key("arrangement"), b"{}") is False
    assert a.store.get(identity_key("arrangement")) == raw


def test_names_stay_separate_in_one_store(tmp_path):
    d = str(tmp_path / "s")
    x = Arrangement.open(d, SCHEMA, name="x")
    y = Arrangement.open(d, SCHEMA, name="y")
    x.write(ups([1]))
    y.write(ups([2]))
    assert contents(Arrangement.open(d, name="x")) == [(1, 0, 1)]
    assert contents(Arrangement.open(d, name="y")) == [(2, 0, 1)]
    with pytest.raises(FileNotFoundError):
        Arrangement.open(d, name="z", create=False)


class PlainBlob:
    """A blob with the five calls of the contract and no atomic put-if-absent (as S3
    through pyarrow), over a MemBlob."""

    def __init__(self):
        from colmz.storage import MemBlob

        self.inner = MemBlob()

    def get(self, key):
        return self.inner.get(key)

    def set(self, key, value):
        self.inner.set(key, value)

    def delete(self, key):
        self.inner.delete(key)

    def list_keys(self, prefix=""):
        return self.inner.list_keys(prefix)

    def url_of(self, key):
        return self.inner.url_of(key)


def test_creation_race_without_put_if_absent_is_detected(monkeypatch):
    # On a blob without an atomic put-if-absent, a second creator that read "no identity"
    # can write its identity over the first one's; the first then finds, after committing
    # its (empty) record, that the blob is not its store, and says so instead of writing
    # into a record nobody reads.
    from colmz.arrangement.identity import StoreIdentity
    from colmz.storage import MemConsensus
    from colmz.storage.url import Location

    blob = PlainBlob()
    loc = Location(blob, MemConsensus(), "mem://plain")
    other = StoreIdentity.new("arrangement", 0)
    from colmz.arrangement.machine import Machine

    real = Machine.commit  # open's creating commit

    def racing_commit(self):
        blob.set(identity_key("arrangement"), other.to_bytes())  # the other creator's write
        monkeypatch.setattr(Machine, "commit", real)
        return real(self)

    monkeypatch.setattr(Machine, "commit", racing_commit)
    with pytest.raises(IdentityMismatch, match="created by two processes at once"):
        Arrangement.open(loc, SCHEMA)
    assert read_identity(blob, "arrangement") == other
    # reopening uses the stored identity (its record: created by its own opener)
    a = Arrangement.open(loc, SCHEMA)
    assert a.identity == other
    a.write(ups([1]))
    assert contents(Arrangement.open(loc)) == [(1, 0, 1)]


def test_two_processes_adopt_one_legacy_store(tmp_path):
    # Two real processes opening the same store from before identities at once: one
    # identity is written, both write into the one record, nothing is lost.
    d = str(tmp_path / "old")
    cons = f"sqlite:///{tmp_path}/c.sqlite"
    _legacy_store(d, [1000, 1001], consensus=cons)
    ids = _run_writers([(d, cons, 0, 1, 1), (d, cons, 100, 1, 1)])  # at times >= the seal
    assert ids[0] == ids[1]
    a = Arrangement.open(d, consensus=cons)
    assert a.identity.id == ids[0] and a.identity.consensus_key == "arrangement"
    assert contents(a) == sorted([(1000, 0, 1), (1001, 0, 1)]
                                 + [(b + i, 1 + i, 1) for b in (0, 100) for i in range(5)])


def test_gc_of_an_empty_state_over_committed_parts_refuses():
    # A core handle (no consensus) made over a store another arrangement used: before, its
    # gc deleted every part past the lease. A trace or unsealed part past the lease is one
    # a state held: refused, nothing deleted. A failed job's old run parts are collected.
    from colmz.arrangement.runs import write_run
    from colmz.storage import MemBlob

    blob = MemBlob()
    used = Arrangement(blob, schema=SCHEMA, prefix="arrangement/parts/", clock=lambda: 1000.0)
    used.unsealed_append(ups([1, 2]))
    parts = blob.list_keys("arrangement/parts/")
    fresh = Arrangement(blob, schema=SCHEMA, prefix="arrangement/parts/", clock=lambda: 100_000.0)
    with pytest.raises(MetadataLost, match="cannot account for it; nothing was deleted"):
        fresh.gc(lease_seconds=60)
    assert blob.list_keys("arrangement/parts/") == parts
    for k in parts:
        blob.delete(k)
    run = write_run(blob, fresh.schema, ups([3]), prefix="arrangement/parts/", clock=lambda: 1000.0)
    assert fresh.gc(lease_seconds=60) == list(run.keys)
