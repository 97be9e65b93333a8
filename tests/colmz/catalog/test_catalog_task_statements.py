"""Continual tasks' statements in the catalog: self-referencing tasks without a column list
take their input's columns, INSERT arity errors in Materialize's words, and every error about
a statement names its number and construct."""

from __future__ import annotations

import pyarrow as pa
import pytest

import colmz
from colmz.sql import SQLError

SELF_REF = ("CREATE CONTINUAL TASK dedup FROM TRANSFORM input USING "
            "(SELECT * FROM input WHERE id NOT IN (SELECT id FROM dedup))")


def rows(cat, sql):
    return sorted(tuple(r.values()) for r in cat.sql(sql).to_pylist())


@pytest.mark.parametrize("durable", [False, True])
def test_self_referencing_task_without_columns_takes_the_inputs(tmp_path, durable):
    # Before: "columns= is required (no SQL INSERT to infer them from)".
    cat = colmz.Catalog(tmp_path if durable else None)
    cat.execute("CREATE TABLE input (id INT, v TEXT)")
    cat.execute(SELF_REF)
    # the ON INPUT form, with a DELETE besides, and a column the input names differently
    cat.execute("""CREATE CONTINUAL TASK latest ON INPUT input AS (
        DELETE FROM latest WHERE id IN (SELECT id FROM input);
        INSERT INTO latest SELECT id, v FROM input WHERE v NOT IN (SELECT v FROM latest))""")
    want = (colmz.ColumnSpec("id", pa.int32()), colmz.ColumnSpec("v", pa.string()))
    assert cat.object("dedup").schema == cat.object("latest").schema == want
    cat.execute("INSERT INTO input VALUES (1, 'a'), (2, 'b')")
    cat.execute("INSERT INTO input VALUES (2, 'c'), (3, 'a')")
    if durable:
        cat = colmz.Catalog(tmp_path)
        assert cat.object("dedup").schema == want
    cat.execute("INSERT INTO input VALUES (4, 'd'), (1, 'z')")
    assert rows(cat, "SELECT * FROM dedup") == [(1, "a"), (2, "b"), (3, "a"), (4, "d")]
    # latest: each time replaces the ids it sees, but never inserts a v it held at T-1
    assert rows(cat, "SELECT * FROM latest") == [(1, "z"), (2, "c"), (4, "d")]


def test_a_delete_is_a_self_reference_so_the_task_takes_the_inputs_columns():
    # Materialize resolves a task without a column list to its input's columns wherever
    # the body names the task, a DELETE's target included. Before: the columns (and their
    # names) came from the INSERT's query, here (x, w).
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE input (id INT, v TEXT)")
    cat.execute("CREATE CONTINUAL TASK t ON INPUT input AS ("
                "DELETE FROM t WHERE id IN (SELECT id FROM input); "
                "INSERT INTO t SELECT id AS x, upper(v) AS w FROM input)")
    assert cat.object("t").schema == (colmz.ColumnSpec("id", pa.int32()), colmz.ColumnSpec("v", pa.string()))
    cat.execute("INSERT INTO input VALUES (1, 'a'), (2, 'b')")
    cat.execute("INSERT INTO input VALUES (1, 'c')")
    assert rows(cat, "SELECT * FROM t") == [(1, "C"), (2, "B")]


def test_insert_arity_errors_are_materializes_and_name_the_statement():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE input (id INT, v TEXT)")
    for sql, msg in [
        # Before: accepted (columns inferred from this very INSERT: three of them).
        ("CREATE CONTINUAL TASK t ON INPUT input AS ("
         "INSERT INTO t SELECT * FROM input WHERE id NOT IN (SELECT id FROM t); "
         "INSERT INTO t SELECT *, 'extra' FROM input)",
         r"CONTINUAL TASK t statement 2 \(INSERT INTO t\) query columns did not match: "
         r"INSERT has more expressions than target columns"),
        # Before: DuckDB's parser message ("SELECT clause without selection list").
        ("CREATE CONTINUAL TASK t (id INT, v TEXT) ON INPUT input AS (INSERT INTO t SELECT FROM input)",
         r"CONTINUAL TASK t statement 1 \(INSERT INTO t\) query columns did not match: "
         r"INSERT has more target columns than expressions"),
        # Materialize's ct_errors.slt: a DELETE FROM the task is a self reference, so the task
        # without a column list takes the input's columns. Before: accepted, with the columns
        # of the INSERT (three).
        ("CREATE CONTINUAL TASK t ON INPUT input AS (DELETE FROM t; INSERT INTO t SELECT *, 'bar' FROM input;)",
         r"CONTINUAL TASK t statement 2 \(INSERT INTO t\) query columns did not match: "
         r"INSERT has more expressions than target columns"),
        ("CREATE CONTINUAL TASK t (id INT, v TEXT) ON INPUT input AS (INSERT INTO t SELECT id FROM input)",
         r"statement 1 \(INSERT INTO t\) query columns did not match: INSERT has more target columns "
         r"than expressions \(the task has 2 column\(s\) \['id', 'v'\], the query gives 1 \['id'\]\)"),
    ]:
        with pytest.raises(colmz.SchemaError, match=msg):
            cat.execute(sql)
        assert "t" not in cat and cat.names == ["input"]


def test_statement_errors_name_the_statement_number_and_construct(tmp_path):
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE input (id INT, v TEXT)")
    for sql, exc, msg in [
        # a DuckDB error at plan time: the statement, its construct, the user's names
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t SELECT id FROM input; "
         "DELETE FROM t WHERE nope > 1)",
         SQLError, r"^CONTINUAL TASK t statement 2 \(DELETE FROM t WHERE \.\.\.\): .*nope"),
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t SELECT nope FROM input)",
         SQLError, r"^CONTINUAL TASK t statement 1 \(INSERT INTO t\): .*nope"),
        # the parser's: a statement that is not INSERT/DELETE, a write to another object
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t SELECT id FROM input; "
         "UPDATE t SET id = 1)",
         SQLError, r"^CONTINUAL TASK t statement 2: statements are INSERT or DELETE, got 'UPDATE t SET id = 1'"),
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (DELETE FROM input WHERE true)",
         SQLError, r"^CONTINUAL TASK t statement 1 \(DELETE FROM input\): a continual task writes only its own output t"),
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t (id) SELECT id FROM input)",
         colmz.sql.UnsupportedSQL, r"^CONTINUAL TASK t statement 1: a column list in a CONTINUAL TASK INSERT"),
        # a qualified name of no object: Materialize's error (resolved before DuckDB runs it)
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t SELECT id FROM input; "
         "DELETE FROM t WHERE id IN (SELECT id FROM nope.input))",
         SQLError, r"^CONTINUAL TASK t statement 2 \(DELETE FROM t WHERE \.\.\.\): unknown schema 'nope'"),
        # no assignment cast: the statement, PostgreSQL's message
        ("CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (INSERT INTO t SELECT v FROM input)",
         colmz.SchemaError, r'^CONTINUAL TASK t statement 1 \(INSERT INTO t\) query columns did not match: '
                            r'column "id" is of type integer but expression is of type text'),
    ]:
        with pytest.raises(exc, match=msg):
            cat.execute(sql)
        assert cat.names == ["input"]
    # at run time: the second DELETE retracting a row the first already retracted
    cat.execute("""CREATE CONTINUAL TASK t (id INT) ON INPUT input AS (
        INSERT INTO t SELECT id FROM input WHERE v = 'new';
        DELETE FROM t WHERE id IN (SELECT id FROM input WHERE v = 'drop');
        DELETE FROM t WHERE id IN (SELECT id FROM input WHERE v = 'drop'))""")
    cat.execute("INSERT INTO input VALUES (1, 'new')")
    with pytest.raises(colmz.errors.NegativeMultiplicity, match="multiplicity -1"):
        cat.execute("INSERT INTO input VALUES (1, 'drop')")
    assert rows(cat, "SELECT * FROM t") == [(1,)]
