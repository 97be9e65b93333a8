"""PostgreSQL's domain checks of math functions in colmz's translation (``CHECKED_MATH`` and
``MATH_MACROS`` of colmz/sql/translate.py): answers and errors pinned by running them.

PostgreSQL raises for a logarithm of zero or a negative, a square root of a negative, a
complex or undefined power and an ``exp`` past a double's range, where DuckDB answers NaN or
an infinity; colmz raises as PostgreSQL does (``SQLError`` with its message), refuses what
it cannot compute (``exp`` of a numeric past a double) and answers the rest unchanged.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("duckdb", reason="colmz's SQL needs duckdb (pip install 'colmz[sql]')")

from colmz.sql import SQLError, UnsupportedSQL, connect, run_query, translate  # noqa: E402

_CON = []


def run(sql: str):
    if not _CON:
        _CON.append(connect())
    table, _ = run_query(_CON[0], translate(sql), 0)
    return [tuple(c[i].as_py() for c in table.columns) for i in range(table.num_rows)]


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT ln(0)", "cannot take logarithm of zero"),
    ("SELECT ln(-1.0)", "cannot take logarithm of a negative number"),
    ("SELECT log(0)", "cannot take logarithm of zero"),
    ("SELECT log10(-10::float8)", "cannot take logarithm of a negative number"),
    ("SELECT log(2, 0)", "cannot take logarithm of zero"),
    ("SELECT log(1, 8)", "division by zero"),
    ("SELECT LN('-Infinity'::float8)", "cannot take logarithm of a negative number"),
    ("SELECT sqrt(-1)", "cannot take square root of a negative number"),
    ("SELECT exp(1000::float8)", "value out of range: overflow"),
    ("SELECT exp(-1000::float8)", "value out of range: underflow"),
    ("SELECT power(-8::float8, 0.5::float8)", "a negative number raised to a non-integer power"),
    ("SELECT pow(0, -1)", "zero raised to a negative power is undefined"),
    ("SELECT power(10::float8, 400)", "value out of range: overflow"),
    ("SELECT sqrt(x) FROM (VALUES (4), (-4)) v(x)", "cannot take square root of a negative number"),
])
def test_postgres_domain_errors_raise(sql, message):
    with pytest.raises(SQLError, match=message) as e:
        run(sql)
    assert not isinstance(e.value, UnsupportedSQL)


def test_numeric_past_a_double_is_refused():
    with pytest.raises(UnsupportedSQL, match=r"exp\(\) of a numeric"):
        run("SELECT exp(1000.0)")


def test_values_in_the_domain_answer_as_before():
    [row] = run("SELECT ln(exp(1::float8)), log(100), log(2, 8), log10(1000), sqrt(16), exp(0), "
                "power(2, 10), pow(-8, 3), power(-8::float8, 2), sqrt('NaN'::float8), "
                "ln('Infinity'::float8), exp('-Infinity'::float8)")
    expected = (1.0, 2.0, 3.0, 3.0, 4.0, 1.0, 1024.0, -512.0, 64.0, math.nan, math.inf, 0.0)
    for got, want in zip(row, expected):
        assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want), (row, expected)
    # aggregates and columns as arguments
    assert run("SELECT round(ln(sum(x))::numeric, 6) FROM (VALUES (1), (2)) v(x)") == [(1.098612,)]
    assert run("SELECT sqrt(x) FROM (VALUES (9), (0)) v(x) ORDER BY 1") == [(0.0,), (3.0,)]
