"""A materialized view's column types beside its query's (``docs/continual.md``, "SQL dialect").

colmz's columns have no decimal kind, so where ``Catalog.sql`` of a view's query gives a
``DECIMAL`` of scale 0 the view's column is ``BIGINT``; a scaled ``DECIMAL`` is refused when
the view is created, and a value past ``bigint`` raises and changes nothing. These tests pin
that table, so the documentation stays true.
"""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest

pytest.importorskip("duckdb")

import colmz  # noqa: E402
from colmz import SchemaError  # noqa: E402

#: (select expression, the query's type in Catalog.sql, the view's column type)
TYPES = [
    ("sum(i)", pa.decimal128(38, 0), pa.int64()),
    ("sum(b)", pa.decimal128(38, 0), pa.int64()),
    ("sum(s)", pa.decimal128(38, 0), pa.int64()),
    ("sum(b) + 1", pa.decimal128(38, 0), pa.int64()),
    ("sum(f)", pa.float64(), pa.float64()),
    ("count(*)", pa.int64(), pa.int64()),
    ("min(b)", pa.int64(), pa.int64()),
    ("max(i)", pa.int32(), pa.int32()),
    ("avg(i)", pa.float64(), pa.float64()),
    ("avg(b)", pa.float64(), pa.float64()),
    ("sum(b) / 2", pa.float64(), pa.float64()),
]


def _catalog():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (g INT, i INT, b BIGINT, f DOUBLE PRECISION, s SMALLINT)")
    cat.execute("INSERT INTO t VALUES (1, 1, 10, 1.5, 2), (1, 2, 20, 2.5, 3), (2, 3, 30, 3.5, 4)")
    return cat


@pytest.mark.parametrize("expr, query_type, view_type", TYPES)
def test_view_column_type_beside_the_querys(expr, query_type, view_type):
    cat = _catalog()
    query = f"SELECT g, {expr} AS c FROM t GROUP BY g"
    got = cat.sql(query + " ORDER BY g")
    assert got.schema.field("c").type == query_type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a view recomputed at each commit warns so; its types are the point
        cat.execute(f"CREATE MATERIALIZED VIEW v AS {query}")
    view = cat.sql("SELECT c FROM v ORDER BY g")
    assert view.schema.field("c").type == view_type
    assert [float(x) for x in view.column("c").to_pylist()] == [float(x) for x in got.column("c").to_pylist()]


def test_a_view_sum_past_bigint_raises_and_changes_nothing():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE u (g INT, b BIGINT)")
    cat.execute("CREATE MATERIALIZED VIEW w AS SELECT g, sum(b) AS s FROM u GROUP BY g")
    with pytest.raises(OverflowError, match="outside int64"):
        cat.execute("INSERT INTO u VALUES (1, 9223372036854775807), (1, 1)")
    assert cat.sql("SELECT * FROM u").num_rows == 0 and cat.sql("SELECT * FROM w").num_rows == 0
    # the query itself answers PostgreSQL's numeric
    cat.execute("INSERT INTO u VALUES (1, 9223372036854775807)")
    assert cat.sql("SELECT sum(b) + 1 AS s FROM u").column("s").to_pylist()[0] == 9223372036854775808


def test_a_view_of_a_scaled_decimal_is_refused_by_name():
    cat = _catalog()
    with pytest.raises(SchemaError, match=r"x: a column is DECIMAL\(2,1\); colmz has no decimal columns"):
        cat.execute("CREATE MATERIALIZED VIEW x AS SELECT g, 1.5 AS c FROM t")
