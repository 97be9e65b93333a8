"""``colmz.spark.store_v01``, the atomic Parquet store of 0.1: stage, commit, refuse stale or
mismatched commits, clean up."""

from __future__ import annotations

import json

import pytest

from colmz.spark.store_v01 import MANIFEST, Store, StoreError, same_schema

pytestmark = pytest.mark.spark

SCHEMA = "k string, time long, diff long"


def test_new_store_is_empty(tmp_path):
    s = Store(tmp_path / "st")
    assert not s.exists() and s.version == 0 and s.files() == [] and s.rows == 0
    assert s.listing() == []


def test_stage_commit_read(spark, tmp_path):
    s = Store(tmp_path / "st")
    df = spark.createDataFrame([("a", 1, 1), ("b", 2, -1)], SCHEMA)
    staged = s.stage(df)
    assert staged.rows == 2 and s.version == 0 and not s.exists()  # nothing visible yet
    rec = s.commit(staged)
    assert rec["seq"] == 1 and s.version == 1 and s.rows == 2
    assert not (s.path / "_staging").exists()
    assert sorted(tuple(r) for r in s.read(spark).collect()) == [("a", 1, 1), ("b", 2, -1)]
    s.commit(s.stage(spark.createDataFrame([("c", 3, 1)], SCHEMA)))
    assert s.version == 2 and s.rows == 3
    assert sorted(s.read_arrow().column("k").to_pylist()) == ["a", "b", "c"]


def test_empty_stage_commits_nothing(spark, tmp_path):
    s = Store(tmp_path / "st")
    s.commit(s.stage(spark.createDataFrame([("a", 1, 1)], SCHEMA)))
    before = s.listing()
    assert s.commit(s.stage(spark.createDataFrame([], SCHEMA))) is None
    assert s.listing() == before and s.version == 1


def test_stale_base_version_is_refused(spark, tmp_path):
    s = Store(tmp_path / "st")
    df = spark.createDataFrame([("a", 1, 1)], SCHEMA)
    first, second = s.stage(df), s.stage(df)
    s.commit(first)
    with pytest.raises(StoreError, match="moved from version 0 to 1"):
        s.commit(second)
    assert s.version == 1 and s.rows == 1


def test_schema_mismatch_is_refused(spark, tmp_path):
    s = Store(tmp_path / "st")
    s.commit(s.stage(spark.createDataFrame([("a", 1, 1)], SCHEMA)))
    with pytest.raises(StoreError, match="store schema"):
        s.stage(spark.createDataFrame([(1, 1, 1)], "k long, time long, diff long"))


def test_failed_publish_leaves_store_as_it_was(spark, tmp_path, monkeypatch):
    s = Store(tmp_path / "st")
    s.commit(s.stage(spark.createDataFrame([("a", 1, 1)], SCHEMA)))
    before, manifest = s.listing(), (s.path / MANIFEST).read_bytes()
    staged = s.stage(spark.createDataFrame([("b", 2, 1)], SCHEMA))

    def boom():
        raise OSError("disk full")

    monkeypatch.setattr(s, "_before_publish", boom)
    with pytest.raises(OSError, match="disk full"):
        s.commit(staged)
    assert (s.path / MANIFEST).read_bytes() == manifest
    assert s.listing() == before


def test_clean_removes_leftovers(spark, tmp_path):
    s = Store(tmp_path / "st")
    s.commit(s.stage(spark.createDataFrame([("a", 1, 1)], SCHEMA)))
    before = s.listing()
    # leftovers of a killed run: a staging dir (no live owner) and a moved-but-unpublished
    # commit dir
    (s.path / "_staging" / "dead").mkdir(parents=True)
    (s.path / "commits" / "000002-dead").mkdir()
    removed = s.clean(lease_seconds=0)
    assert len(removed) == 2 and s.listing() == before


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(StoreError, match="not a colmz store"):
        Store(tmp_path).manifest()
    (tmp_path / MANIFEST).write_text(json.dumps({"format": "other"}))
    with pytest.raises(StoreError, match="not a colmz store manifest"):
        Store(tmp_path).manifest()


def test_same_schema_ignores_nullability():
    a = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "long", "nullable": True, "metadata": {}}]})
    b = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "long", "nullable": False, "metadata": {}}]})
    c = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "string", "nullable": True, "metadata": {}}]})
    assert same_schema(a, b) and not same_schema(a, c)
