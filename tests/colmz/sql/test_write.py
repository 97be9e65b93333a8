"""``colmz.sql.write``: INSERT/UPDATE planning, one implementation for the catalog and for
continual tasks."""

from __future__ import annotations

import datetime
import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz.sql.write as write
from colmz.order import ColumnSpec
from colmz.sql import SQLError, session
from colmz.updates import SchemaError

SCHEMA = (ColumnSpec("a", pa.int32()), ColumnSpec("b", pa.string()), ColumnSpec("c", pa.date32()))


@pytest.mark.parametrize(("given", "targets", "words"), [
    (3, 2, "INSERT has more expressions than target columns"),
    (1, 2, "INSERT has more target columns than expressions"),
    (2, 2, None),
])
def test_arity_message_is_postgres_wording(given, targets, words):
    assert write.arity_message(given, targets) == words


def test_insert_targets_fill_the_first_columns_or_the_named_ones():
    targets, cols = write.insert_targets(SCHEMA, None, 2, "INSERT INTO t", "t")
    assert [c.name for c in targets] == ["a", "b"] and cols == ["a", "b"]
    targets, cols = write.insert_targets(SCHEMA, None, 3, "INSERT INTO t", "t")
    assert [c.name for c in targets] == ["a", "b", "c"] and cols is None
    targets, cols = write.insert_targets(SCHEMA, ["c", "a"], 2, "INSERT INTO t", "t")
    assert [c.name for c in targets] == ["c", "a"] and cols == ["c", "a"]
    with pytest.raises(SQLError, match="INSERT INTO t: no column 'z'"):
        write.insert_targets(SCHEMA, ["z"], 1, "INSERT INTO t", "t")
    with pytest.raises(SchemaError, match="INSERT INTO t: INSERT has more expressions than target columns"):
        write.insert_targets(SCHEMA, ["a"], 2, "INSERT INTO t", "t")


def test_insert_rows_coerces_literals_assigns_and_fills_nulls():
    con = session()
    rows = pa.table({"x": ["2024-01-02"], "y": [7]})
    out = write.insert_rows(con, rows, SCHEMA, ["c", "b"], literals=True, what="INSERT INTO t", table="t")
    assert out.schema.names == ["a", "b", "c"]
    assert out.to_pylist() == [{"a": None, "b": "7", "c": datetime.date(2024, 1, 2)}]
    with pytest.raises(OverflowError, match="INSERT INTO t: integer out of range"):
        write.insert_rows(con, pa.table({"x": [2**40]}), SCHEMA[:1], None, literals=False,
                          what="INSERT INTO t", table="t")
    # Text is no date outside VALUES: PostgreSQL has no assignment cast from text.
    with pytest.raises(SchemaError, match='column "c" is of type date but expression is of type text'):
        write.insert_rows(con, pa.table({"x": ["2024-01-02"]}), SCHEMA[2:], None, literals=False,
                          what="INSERT INTO t", table="t")


def test_the_catalog_and_continual_tasks_plan_writes_with_this_module(monkeypatch):
    # One implementation, both callers: a catalog INSERT and a continual task's INSERT INTO
    # its output both plan their assignment casts through colmz.sql.write.assignment_query.
    import colmz.continual.batched

    assert colmz.continual.batched.assignment_query is write.assignment_query
    calls = []
    real = write.assignment_select
    monkeypatch.setattr(write, "assignment_select", lambda rel, *a: calls.append(rel) or real(rel, *a))
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k SMALLINT, v TEXT)")
    cat.execute("INSERT INTO t SELECT 1.5::DOUBLE, 2")  # double -> smallint, int -> text: a query
    assert len(calls) == 1 and cat.sql("SELECT k, v FROM t").to_pylist() == [{"k": 2, "v": "2"}]
    cat.execute("""CREATE CONTINUAL TASK ct (k INT, v TEXT) ON INPUT t AS (
        INSERT INTO ct SELECT k, k FROM t)""")
    assert len(calls) == 2 and calls[1].startswith("(")  # the task converts inside its own query
    cat.execute("INSERT INTO t VALUES (3, 'x')")
    assert cat.sql("SELECT k, v FROM ct ORDER BY k").to_pylist() == [{"k": 2, "v": "2"}, {"k": 3, "v": "3"}]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet="ab é", max_size=6)), max_size=8), st.integers(0, 4))
def test_fit_lengths_is_postgresqls_varchar_assignment(values, n):
    # the naive model: PostgreSQL's varchar(): too long is an error unless the excess is blanks
    def model(v):
        if v is None or len(v) <= n:
            return v
        if v[n:].strip(" "):
            raise SQLError(f"value too long for type character varying({n})")
        return v[:n]

    rows = pa.table({"k": pa.array(range(len(values)), pa.int64()), "v": pa.array(values, pa.string())})
    try:
        expected = [model(v) for v in values]
    except SQLError:
        with pytest.raises(SQLError, match=rf"value too long for type character varying\({n}\)"):
            write.fit_lengths(rows, {1: n})
        return
    out = write.fit_lengths(rows, {1: n})
    assert out.column(1).to_pylist() == expected and out.schema == rows.schema
    assert out.column(0).to_pylist() == list(range(len(values)))


def test_varchar_lengths_read_postgresqls_spellings_only():
    assert write.varchar_lengths(["VarChar(3)", "character  varying(12)", "varchar", "char(3)", "text", "int[]"]) == {
        0: 3, 1: 12}


def test_check_json_sources_refuses_what_postgresql_has_no_assignment_cast_for():
    targets = [("j", "jsonb"), None, ("k", "json")]
    write.check_json_sources([pa.string(), pa.int32(), pa.null()], targets, "INSERT INTO t")
    for t, name in [(pa.int64(), "bigint"), (pa.bool_(), "boolean"), (pa.list_(pa.string()), "text[]")]:
        with pytest.raises(SchemaError, match=f'column "k" is of type json but expression is of type {re.escape(name)}'):
            write.check_json_sources([pa.string(), pa.string(), t], targets, "INSERT INTO t")


def test_insert_targets_refuse_a_column_named_twice():
    with pytest.raises(SQLError, match='column "a" specified more than once'):
        write.insert_targets(SCHEMA, ["a", "b", "a"], 3, "INSERT INTO t", "t")
