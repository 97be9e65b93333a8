"""Continual tasks follow PostgreSQL's rules that hang on a column's type as a catalog's
queries do (:mod:`colmz.sql.column_rules`): each task's statement answers as the catalog
answers the same query over a table of the same rows -- a set operation's string literal
of its column's type, interval arithmetic and aggregates of an interval column, ``||`` of
array columns -- batched and time by time.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from sql_oracle import require
from test_continual import push, rows

import colmz
from colmz.continual import ContinualTask, MemoryCollection

require("duckdb", "continual tasks' SQL needs duckdb (pip install 'colmz[sql]')")


def task_rows(schema, data, query, columns, batch):
    # the rows a task writes for ``INSERT INTO o <query>`` over an input ``inp`` whose rows
    # ``data`` are all inserted at time 0 (the statement reads the inserts of a time)
    inp = MemoryCollection(schema)
    push(inp, 0, colmz.Updates({n: pa.array([r[i] for r in data], typ) for i, (n, typ) in enumerate(schema.items())},
                               time=[0] * len(data), diff=[1] * len(data)))
    task = ContinualTask("o", {"inp": inp}, [f"INSERT INTO o {query}"], columns=columns, as_of=0, batch=batch)
    task.run()
    return rows(task.output, 0)


def catalog_rows(create, data, query):
    # the catalog's answer to ``query`` over a table ``inp`` of ``data``
    cat = colmz.Catalog()
    cat.execute(create)
    for row in data:
        cat.execute("INSERT INTO inp VALUES (" + ", ".join(row) + ")")
    return sorted(tuple(r.values()) for r in cat.sql(query).to_pylist())


@pytest.mark.parametrize("batch", [True, False])
def test_set_operation_literal_takes_its_columns_type(batch):
    # PostgreSQL reads '01' as the integer 1 (the column's type), so UNION keeps one 1;
    # DuckDB alone would union the texts '1' and '01'
    query = "SELECT k FROM inp UNION SELECT '01'"
    got = task_rows({"k": pa.int64()}, [(1,), (2,)], query, {"k": pa.int64()}, batch)
    assert got == catalog_rows("CREATE TABLE inp (k bigint)", [("1",), ("2",)], query) == [(1,), (2,)]


@pytest.mark.parametrize("batch", [True, False])
def test_interval_column_divided_and_summed(batch):
    # interval_div: '1 mon' / 2 is 15 days (DuckDB has no interval / number); sum of intervals
    # keeps months and days apart
    schema = {"k": pa.int64(), "d": pa.month_day_nano_interval()}
    one_month = pa.scalar((1, 0, 0), pa.month_day_nano_interval()).as_py()
    ten_days = pa.scalar((0, 10, 0), pa.month_day_nano_interval()).as_py()
    data = [(1, one_month), (2, ten_days)]
    create = "CREATE TABLE inp (k bigint, d interval)"
    sql_rows = [("1", "INTERVAL '1 month'"), ("2", "INTERVAL '10 days'")]
    query = "SELECT k, d / 2 AS h FROM inp"
    got = task_rows(schema, data, query, {"k": pa.int64(), "h": pa.month_day_nano_interval()}, batch)
    assert got == catalog_rows(create, sql_rows, query)
    assert [h.days for _, h in got] == [15, 5]
    query = "SELECT sum(d) AS s FROM inp"
    got = task_rows(schema, data, query, {"s": pa.month_day_nano_interval()}, batch)
    assert got == catalog_rows(create, sql_rows, query)
    assert [(s.months, s.days) for s, in got] == [(1, 10)]


@pytest.mark.parametrize("batch", [True, False])
def test_array_columns_concatenated(batch):
    # || of arrays is array_cat (a NULL operand left out), of an array and an element
    # array_append
    schema = {"k": pa.int64(), "a": pa.list_(pa.int64()), "b": pa.list_(pa.int64())}
    data = [(1, [1, 2], [3]), (2, [4], None)]
    query = "SELECT k, a || b AS c, a || k AS e FROM inp"
    columns = {"k": pa.int64(), "c": pa.list_(pa.int64()), "e": pa.list_(pa.int64())}
    got = task_rows(schema, data, query, columns, batch)
    want = catalog_rows("CREATE TABLE inp (k bigint, a bigint[], b bigint[])",
                        [("1", "ARRAY[1, 2]", "ARRAY[3]"), ("2", "ARRAY[4]", "NULL")], query)
    assert got == [(k, tuple(c), tuple(e)) for k, c, e in want] or got == want
    assert sorted((k, list(c), list(e)) for k, c, e in got) == [(1, [1, 2, 3], [1, 2, 1]), (2, [4], [4, 2])]
