"""Where DuckDB would raise its own error for a query PostgreSQL answers, colmz answers as
PostgreSQL does or refuses the construct by name (``UnsupportedSQL``): answers and refusals
pinned by running them (colmz/sql/translate.py's rules, colmz/sql/run.py's reading of
DuckDB's errors, colmz/sql/numeric.py's fold of parenthesized constants).
"""

from __future__ import annotations

import pytest

pytest.importorskip("duckdb", reason="colmz's SQL needs duckdb (pip install 'colmz[sql]')")

from colmz.sql import SQLError, UnsupportedSQL, connect, run_query, translate  # noqa: E402

_CON = []


def run(sql: str):
    if not _CON:
        _CON.append(connect())
    table, _ = run_query(_CON[0], translate(sql), 0)
    return table.column_names, [tuple(c[i].as_py() for c in table.columns) for i in range(table.num_rows)]


@pytest.mark.parametrize(("sql", "rows"), [
    ("SELECT every(x > 1) AS e, every(x > 0) AS f FROM (VALUES (1), (2)) v(x)", [(False, True)]),
    ("SELECT EXISTS (SELECT 1)::text AS t, EXISTS (SELECT 1 WHERE false)::text AS f", [("true", "false")]),
    ("SELECT '{1,2,3}'::int[] AS a, '{}'::int[] AS b, '{a, b}'::text[] AS c", [([1, 2, 3], [], ["a", "b"])]),
    ("SELECT 1 = ANY ('{}'::int[]) AS a, 2 = ANY ('{1,2}'::bigint[]) AS b", [(False, True)]),
    ("SELECT array_length('{}'::int[], 1) AS e, array_length(ARRAY[1, 2], 1) AS l", [(None, 2)]),
    # avg of anything but an interval is DuckDB's (the guard folds away), and of no rows NULL
    ("SELECT avg(x) AS a, avg(DISTINCT x) FILTER (WHERE x > 1) AS b FROM (VALUES (1), (2), (2)) v(x)", [(5 / 3, 2.0)]),
    ("SELECT avg(x) AS a FROM (SELECT interval '1 day' WHERE false) v(x)", [(None,)]),
    # array_agg of arrays: one array of a dimension more, as PostgreSQL's
    ("SELECT array_agg(a ORDER BY a DESC) AS m FROM (VALUES (ARRAY[1, 2]), (ARRAY[3, NULL])) v(a)",
     [([[3, None], [1, 2]],)]),
    ("SELECT * FROM (VALUES (1), (2.5)) v(x) ORDER BY 1", [(1, ), (2.5, )]),
    ("SELECT sum(x) AS s FROM (VALUES (1), (2), (3.5)) v(x)", [(6.5,)]),
    ("SELECT array_to_string(ARRAY['a', NULL], ',', '*') AS a, string_to_array('a,b', ',', 'b') AS b, "
     "quote_literal('x') AS q", [("a,*", ["a", None], "'x'")]),
])
def test_answers_as_postgres(sql, rows):
    _, got = run(sql)
    assert [tuple(float(v) if type(v).__name__ == "Decimal" else v for v in r) for r in got] == rows


@pytest.mark.parametrize(("sql", "construct"), [
    ("SELECT 5 # 3", "the bitwise xor operator #"),
    ("SELECT regexp_matches('a1', '[[:digit:]]')", r"regexp_matches\(\) with a POSIX bracket class"),
    ("SELECT regexp_count('a1', '[0-9]')", r"regexp_count\(\) is not supported by colmz \(DuckDB has no such function\)"),
    # an interval whose type is not visible in the text (colmz.sql.pgfuncs divides a visible one)
    ("SELECT i / 2 FROM (SELECT INTERVAL '1 hour' AS i) s", r"/\(INTERVAL, INTEGER_LITERAL\) is not supported by colmz"),
    ("SELECT s, sum(sum(x)) OVER () FROM (VALUES ('a', 1::bigint)) v(s, x) GROUP BY s",
     r"sum\(\) of an aggregate"),
    ("SELECT -1 << 2", "a left shift of a negative number"),
    # PostgreSQL types the string by the values beside it; DuckDB's "Cannot combine types"
    ("SELECT * FROM (VALUES ('NaN'), (1.5)) v(x)", "a string literal beside decimal values"),
    ("SELECT * FROM (VALUES ('2024-01-01'), (DATE '2024-01-02')) v(d)", "a string literal beside date values"),
    ("SELECT x + 1 AS y FROM (VALUES ('1'), (2)) v(x)", "a string literal beside integer values"),
    # DuckDB's avg of intervals rounds otherwise than PostgreSQL's interval_div
    ("SELECT avg(x) AS a FROM (VALUES (interval '2 mon 1 day'), (interval '1 sec')) v(x)", r"avg\(\) of an interval"),
    ("SELECT avg(DISTINCT x) FILTER (WHERE x > interval '0 sec') AS a FROM (VALUES (interval '1 day')) v(x)",
     r"avg\(\) of an interval"),
    ("SELECT avg(x) OVER (ORDER BY x) AS a FROM (VALUES (interval '1 day')) v(x)", r"avg\(\) of an interval"),
    # an array's text by the other operand's type (PostgreSQL's {a,b}, DuckDB's [a, b])
    ("SELECT a = '{1,2}' AS e FROM (VALUES (ARRAY[1, 2])) v(a)", r"the text '\{1,2\}' read as integer\[\]"),
    # PostgreSQL has % and mod() of integers and numeric only
    ("SELECT mod(x, 2) AS a FROM (VALUES (5.5::real)) v(x)", r"% or mod\(\) of a float"),
    ("SELECT 5.5::float8 % 2 AS a", r"% or mod\(\) of a float"),
    # PostgreSQL's percentile_cont of a date or time does not exist
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS p FROM (VALUES (DATE '2024-01-01')) v(x)",
     r"percentile_cont\(\) of a date or time"),
    # a time of day past microseconds: PostgreSQL rounds, DuckDB truncates
    ("SELECT TIMESTAMP '2024-01-01 00:00:00.1234567' AS a", "more than 6 fractional digits"),
    ("SELECT '23:59:59.9999999'::time AS a", "more than 6 fractional digits"),
    # arrays of different dimensions in one VALUES column (one PostgreSQL array type)
    ("SELECT * FROM (VALUES (ARRAY[1]), (ARRAY[[1, 2]])) v(a)", "arrays of different dimensions in one column"),
    # a subquery inside an array function colmz writes with a lambda
    ("SELECT cardinality(ARRAY(SELECT x FROM (VALUES (1)) u(x) WHERE u.x = v.x)) AS c FROM (VALUES (1)) v(x)",
     "a subquery as the argument of an array function"),
])
def test_refused_by_name(sql, construct):
    with pytest.raises(UnsupportedSQL, match=construct):
        run(sql)


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT '2.5'::int", 'invalid input syntax for type integer: "2.5"'),
    ("SELECT CAST('1e2' AS bigint)", 'invalid input syntax for type bigint: "1e2"'),
    ("SELECT t::smallint FROM (VALUES ('7'), ('2.5')) v(t)", 'invalid input syntax for type smallint: "2.5"'),
    ("SELECT '1e400'::float8", '"1e400" is out of range for type double precision'),
    ("SELECT '-1e39'::real", '"-1e39" is out of range for type real'),
])
def test_text_casts_postgres_rejects_raise(sql, message):
    # DuckDB rounds text with a fraction to an integer and reads a float past its range as
    # an infinity; PostgreSQL raises, and so does colmz, with PostgreSQL's message.
    with pytest.raises(SQLError, match=message) as e:
        run(sql)
    assert not isinstance(e.value, UnsupportedSQL)


def test_text_casts_postgres_accepts_answer():
    assert run("SELECT ' 42 '::int AS a, '+7'::int8 AS b, 2.5::int AS c, CAST(CAST(x AS text) AS integer) AS d, "
               "'Infinity'::float8 AS e, '1e300'::float8 AS f, t::int AS g "
               "FROM (VALUES (5, '-3')) v(x, t)")[1] == [(42, 7, 3, 5, float("inf"), 1e300, -3)]


def test_cast_of_a_window_filter_or_ordered_set_call_takes_the_whole_call():
    # f(...) OVER (...)::t casts the window function's value (the cast's operand reached
    # back only to the OVER's parentheses: a parser error).
    names, rows = run("SELECT row_number() OVER (ORDER BY x)::bigint AS r, "
                      "count(*) FILTER (WHERE x > 1) OVER ()::text AS c "
                      "FROM (VALUES (1), (2), (3)) v(x) ORDER BY 1")
    assert names == ["r", "c"] and rows == [(1, "2"), (2, "2"), (3, "2")]
    assert run("SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x)::text AS m "
               "FROM (VALUES (1), (2), (3)) v(x)")[1] == [("2",)]


def test_to_hex_prints_an_int4_in_32_bits():
    assert run("SELECT to_hex(-1) AS a, to_hex(-1::bigint) AS b, to_hex(255) AS c, to_hex(x) AS d "
               "FROM (VALUES (-2::smallint)) v(x)")[1] == [("ffffffff", "ffffffffffffffff", "ff", "fffffffe")]


def test_similar_to_is_refused():
    # DuckDB's SIMILAR TO reads the pattern as a regular expression: 'abc' SIMILAR TO 'a%'
    # was false (PostgreSQL: true).
    with pytest.raises(UnsupportedSQL, match="SIMILAR TO is not supported by colmz"):
        run("SELECT 'abc' SIMILAR TO 'a%'")


def test_interval_text_is_postgres():
    # PostgreSQL prints months as mon(s) and -1 of a unit as plural; DuckDB as month(s), -1 day.
    assert run("SELECT (-INTERVAL '1 day')::text AS a, INTERVAL '1 year 2 months'::text AS b, "
               "CAST(INTERVAL '1 month' AS text) AS c, 'x' || INTERVAL '-1 year -1 month' AS d, "
               "'-11 days'::interval::text AS e, INTERVAL '90 seconds'::text AS f")[1] == [
        ("-1 days", "1 year 2 mons", "1 mon", "x-1 years -1 mons", "-11 days", "00:01:30")]
