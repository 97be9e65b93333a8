"""A durable commit encodes the catalog record's definitions only when they changed
(``colmz.catalog.store``, "The definitions are encoded once"): a data commit's record costs
what it changes, not how many objects the catalog holds -- and the record written is the
same, its check verified by every load."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
import colmz.storage.state as state_module
from colmz.arrangement.errors import CorruptMeta
from colmz.catalog.store import CatalogStore, record_check
from colmz.storage.base import VersionedData
from colmz.storage.url import open_location
from colmz.updates import Updates


def _catalog(path, n: int) -> colmz.Catalog:
    cat = colmz.Catalog(str(path), maintain_every=0)
    cat.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
    cat.execute("; ".join(f"CREATE TABLE src_{i} (k BIGINT, v BIGINT)" for i in range(n)))
    cat.execute("; ".join(f"INSERT INTO src_{i} VALUES (1, {i})" for i in range(n)))
    cat.execute("; ".join(f"CREATE MATERIALIZED VIEW v_{i} AS SELECT k, sum(v) AS s FROM src_{i} GROUP BY k"
                          for i in range(n)))
    cat.execute("INSERT INTO t VALUES (0, 0)")
    return cat


def _encoded_per_commit(cat: colmz.Catalog, monkeypatch, commits: int = 3) -> tuple[int, int]:
    """JSON values the state log encodes and definitions the store encodes, per one-row
    INSERT into a table no view reads."""
    calls = [0]
    leaf = state_module._leaf

    def counting(value, path):
        calls[0] += 1
        return leaf(value, path)

    monkeypatch.setattr(state_module, "_leaf", counting)
    before = cat.store_work.get("definitions_encoded", 0)
    for j in range(commits):
        cat.execute(f"INSERT INTO t VALUES ({j + 1}, {j})")
    monkeypatch.setattr(state_module, "_leaf", leaf)
    return calls[0] // commits, (cat.store_work.get("definitions_encoded", 0) - before) // commits


def test_data_commit_encodes_independent_of_catalog_size(tmp_path, monkeypatch):
    small = _encoded_per_commit(_catalog(tmp_path / "one", 1), monkeypatch)
    large = _encoded_per_commit(_catalog(tmp_path / "thirty", 30), monkeypatch)
    # 1 view or 30 (91 record entries): the same values encoded, no definition among them
    assert small == large
    assert large[1] == 0


def test_ddl_encodes_definitions_again_and_reopen_reads_them(tmp_path):
    cat = _catalog(tmp_path, 2)
    before = cat.store_work["definitions_encoded"]
    cat.execute("CREATE TABLE extra (a BIGINT)")
    assert cat.store_work["definitions_encoded"] == before + 1
    cat.execute("INSERT INTO extra VALUES (7)")
    cat.execute("DROP MATERIALIZED VIEW v_0")
    cat.execute("INSERT INTO t VALUES (9, 9)")
    state = cat._store.state
    assert state["check"] == record_check(state)
    again = colmz.Catalog(str(tmp_path))
    assert again._store.state["objects"] == state["objects"]
    assert "v_0" not in again.names and "extra" in again.names
    assert again.sql("SELECT a FROM extra").to_pylist() == [{"a": 7}]
    assert sorted(r["k"] for r in again.sql("SELECT k FROM t").to_pylist()) == [0, 9]


def test_definitions_mutated_in_place_are_encoded_again(tmp_path):
    store = CatalogStore(open_location(f"file://{tmp_path}"))
    store.arrangement("t-1", {"k": pa.int64()})
    defs = [{"name": "t", "key": "t-1", "stmt": {"columns": [("k", "BIGINT")]}}]
    u = Updates({"k": [5]}, time=[0], diff=[1])
    store.commit(defs, [("t", "t-1", 0, 1, u)], 1)
    store.apply(store.state)
    defs[0]["comment"] = "changed in place"  # the store compares with its own copy
    store.commit(defs, [], 1)
    assert store.stats["definitions_encoded"] == 2
    loaded = CatalogStore(store.loc).load()
    assert loaded["objects"] == [{"comment": "changed in place", "key": "t-1", "name": "t",
                                  "stmt": {"columns": [["k", "BIGINT"]]}}]
    assert loaded["check"] == record_check(loaded)


def test_reused_definitions_are_still_checked(tmp_path):
    cat = _catalog(tmp_path, 1)
    cat.execute("INSERT INTO t VALUES (5, 5)")
    cons = cat._store.loc.consensus
    key = cat._store.key
    head = cons.head(key)
    # the head, written with the definitions reused, changed to drop them (its check kept)
    assert b'"diff":{"set":{"check":' in bytes(head.data)
    bad = bytes(head.data).replace(b'"diff":{"set":{', b'"diff":{"set":{"objects":[],', 1)
    assert cons.compare_and_set(key, head.seqno, VersionedData(head.seqno + 1, bad))
    with pytest.raises(CorruptMeta, match="does not match its check"):
        colmz.Catalog(str(tmp_path))


def test_catalog_entries_are_frozen_so_the_store_compares_them_by_identity(tmp_path):
    # The store reuses the encoding while the entries compare equal to those it encoded: the
    # catalog's own entries are frozen (a change in place is impossible), so it keeps them
    # themselves and copies none -- at a data commit or a DDL, whatever the catalog holds.
    for n in (1, 30):
        cat = _catalog(tmp_path / f"n{n}", n)
        assert cat.store_work["entries_frozen"] == 0
        defs = cat._engine.definitions
        kept = cat._store._encoded_defs[0]
        assert all(any(k is d for k in kept) for d in defs)
        with pytest.raises(TypeError, match="cannot be changed in place"):
            defs[0]["comment"] = "changed in place"
        with pytest.raises(TypeError, match="cannot be changed in place"):
            defs[0]["stmt"]["columns"].append(("x", "BIGINT"))
        with pytest.raises(TypeError, match="cannot be changed in place"):
            kept[-1]["kind"] = "table"  # an operator state's entry
        cat.execute("CREATE TABLE extra (a BIGINT)")
        cat.execute("DROP TABLE extra")
        cat.execute("INSERT INTO t VALUES (3, 3)")
        assert cat.store_work["entries_frozen"] == 0
        again = colmz.Catalog(str(tmp_path / f"n{n}"))
        assert again._store.state["objects"] == cat._store.state["objects"]


def test_a_frozen_entry_is_compared_by_identity_a_mutable_one_by_its_frozen_copy(tmp_path):
    from colmz.storage.frozen import frozen

    store = CatalogStore(open_location(f"file://{tmp_path}"))
    store.arrangement("t-1", {"k": pa.int64()})
    mutable = {"name": "t", "key": "t-1", "stmt": {"columns": [("k", "BIGINT")]}}
    fixed = frozen({"name": "u", "key": "u-1", "stmt": {"columns": [("k", "BIGINT")]}})
    store.commit([mutable, fixed], [("t", "t-1", 0, 1, Updates({"k": [5]}, time=[0], diff=[1]))], 1)
    store.apply(store.state)
    assert store.stats["entries_frozen"] == 1 and store._encoded_defs[0][1] is fixed
    store.commit([mutable, fixed], [], 1)  # unchanged: reused
    assert store.stats["definitions_encoded"] == 1 and store.stats["entries_frozen"] == 1
    mutable["stmt"]["columns"].append(("v", "BIGINT"))  # deep in place: caught
    store.commit([mutable, fixed], [], 1)
    assert store.stats["definitions_encoded"] == 2
    assert CatalogStore(store.loc).load()["objects"][0]["stmt"]["columns"] == [["k", "BIGINT"], ["v", "BIGINT"]]
