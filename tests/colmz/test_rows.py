"""``colmz.rows``: the row <-> ``Updates`` conversions the catalog and continual tasks share."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
import colmz.catalog.ddl
import colmz.catalog.engine
import colmz.continual.batched
import colmz.continual.model
from colmz.errors import NegativeMultiplicity
from colmz.ops import consolidate
from colmz.order import ColumnSpec
from colmz.rows import EXPAND_LIMIT, at_time, cast_to, conform, expand, rows_to_updates
from colmz.updates import SchemaError


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.sampled_from(["a", "b", None]), st.integers(1, 4)),
                max_size=20))
def test_expand_then_rows_to_updates_gives_the_collection_back(rows):
    u = colmz.Updates({"k": pa.array([r[0] for r in rows], pa.int64()),
                       "s": pa.array([r[1] for r in rows], pa.string())},
                      time=[3] * len(rows), diff=[r[2] for r in rows])
    table = expand(u)
    assert table.num_rows == sum(r[2] for r in rows)
    back = rows_to_updates(table, 3)
    assert consolidate(back).to_pylist() == consolidate(u).to_pylist()


def test_expand_refuses_negative_and_huge_multiplicities_naming_the_row():
    with pytest.raises(NegativeMultiplicity, match=r"input 'x' holds row \{'k': 2\} with multiplicity -1"):
        expand(colmz.Updates({"k": [1, 2]}, time=[0, 0], diff=[1, -1]), "input 'x'")
    with pytest.raises(ValueError, match=f"EXPAND_LIMIT = {EXPAND_LIMIT}"):
        expand(colmz.Updates({"k": [1]}, time=[0], diff=[EXPAND_LIMIT + 1]))


def test_conform_matches_by_position_casts_within_a_kind_and_refuses_across():
    schema = (ColumnSpec("k", pa.int32()), ColumnSpec("s", pa.string()))
    out = conform(pa.table({"a": pa.array([1], pa.int64()), "b": ["x"]}), schema, "T")
    assert out.schema.names == ["k", "s"] and out.schema.field("k").type == pa.int32()
    with pytest.raises(SchemaError, match="column 2 's' is string but the query gives 'b' of type int64"):
        conform(pa.table({"a": [1], "b": [2]}), schema, "T")
    with pytest.raises(SchemaError, match="the task has 2 column"):
        conform(pa.table({"a": [1]}), schema, "T")
    with pytest.raises(OverflowError, match="does not fit int32"):
        conform(pa.table({"a": [2**40], "b": ["x"]}), schema, "T")
    with pytest.raises(TypeError, match="must return a pyarrow Table"):
        conform([1, "x"], schema, "T")


def test_cast_to_and_at_time():
    u = colmz.Updates({"k": [1, 2]}, time=[0, 4], diff=[1, -1])
    assert cast_to(u, (ColumnSpec("k", pa.int64()),)) is u
    assert cast_to(u, (ColumnSpec("k", pa.int16()),)).schema[0].type == pa.int16()
    with pytest.raises(SchemaError, match="column 'k' is string"):
        cast_to(u, (ColumnSpec("k", pa.string()),))
    assert at_time(u, 9).to_pylist() == [(1, 9, 1), (2, 9, -1)]


def test_the_catalog_and_the_tasks_convert_rows_with_these_functions():
    for module in (colmz.catalog.engine, colmz.catalog.ddl, colmz.continual.model, colmz.continual.batched):
        for name in ("conform", "expand", "rows_to_updates"):
            if hasattr(module, name):
                assert getattr(module, name) is getattr(colmz.rows, name), (module.__name__, name)
    assert colmz.catalog.engine.conform is colmz.rows.conform and colmz.continual.batched.expand is colmz.rows.expand


def test_array_columns_of_views_and_tasks_are_kept_and_records_refused_by_name():
    # An array is kept as its order bytes (colmz.order_bytes); a record has no kind, and is
    # refused by name rather than by the column encoder's TypeError.
    from colmz.rows import storable
    from colmz.sql import UnsupportedSQL

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE people (id INT, city TEXT); INSERT INTO people VALUES (1, 'a'), (2, 'a')")
    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT city, array_agg(id ORDER BY id) AS ids FROM people GROUP BY city")
    cat.execute("CREATE CONTINUAL TASK c ON INPUT people AS (INSERT INTO c SELECT ARRAY[id] AS a FROM people)")
    cat.execute("INSERT INTO people VALUES (0, 'a')")
    assert cat.sql("SELECT * FROM v").to_pylist() == [{"city": "a", "ids": [0, 1, 2]}]
    assert sorted(r["a"] for r in cat.sql("SELECT * FROM c").to_pylist()) == [[0], [1], [2]]
    assert storable(pa.large_list(pa.large_string())) == pa.list_(pa.string())
    with pytest.raises(UnsupportedSQL, match="a record"):
        storable(pa.struct([("a", pa.int32())]), "w")
