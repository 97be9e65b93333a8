"""PostgreSQL's numeric and float8 text in colmz's translation (colmz/sql/numeric.py and the
numeric, sum, round and concatenation rewrites of colmz/sql/translate.py).

The constant fold and :func:`colmz.sql.numeric.float8_text` are checked against the
machine's PostgreSQL 15 (``pg_url``, started by the tests) on generated expressions and
doubles; the rewrites against DuckDB answers (through :func:`colmz.sql.run_query`, so run
time refusals arrive as ``UnsupportedSQL``).
"""

from __future__ import annotations

import math
import random
import struct

import pytest

pytest.importorskip("duckdb", reason="colmz's SQL needs duckdb (pip install 'colmz[sql]')")

from colmz.sql import SQLError, UnsupportedSQL, connect, run_query, translate  # noqa: E402
from colmz.sql.numeric import divide, float4_text, float8_text, parse_literal  # noqa: E402

_CON = []


def run(sql: str):
    if not _CON:
        _CON.append(connect())
    table, _ = run_query(_CON[0], translate(sql), 0)
    return [tuple(c[i].as_py() for c in table.columns) for i in range(table.num_rows)]


# ----------------------------------------------------------------------------- the fold


@pytest.mark.parametrize("expr, text", [
    # each right-hand side is PostgreSQL 15's text of the left (checked by hand and by
    # test_fold_agrees_with_postgresql)
    ("7 / 2.0", "3.5000000000000000"), ("700000 / 2.0", "350000.000000000000"),
    ("1 / 3.0", "0.33333333333333333333"), ("0.001 / 7", "0.00014285714285714286"),
    ("10000 / 3.0", "3333.3333333333333333"), ("9999 / 3.0", "3333.0000000000000000"),
    ("0.1 * 0.25", "0.025"), ("0.1 + 0.2", "0.3"), ("5 - 7 / 2.0", "1.5000000000000000"),
    ("0.5 / 99999", "0.000005000050000500005000"), ("12345.678 / 0.0003", "41152260.000000000000"),
])
def test_fold_gives_postgresqls_digits_and_scale(expr, text):
    assert translate(f"SELECT {expr}") == f"SELECT {text}"  # one literal of that scale
    assert run(f"SELECT ({expr})::text") == [(text,)]


@pytest.mark.parametrize("sql, want", [
    # each right-hand side is PostgreSQL 15's answer: only whole constant subtrees are folded
    ("SELECT (x - 1.5 * 2)::text FROM (SELECT 1 AS x) s", "-2.0"),
    ("SELECT (1.5 + (2 * x))::text FROM (SELECT 1 AS x) s", "3.5"),
    ("SELECT (1 + 2.0::float8)::text", "3"), ("SELECT (7 / 2)::text", "3"),
    ("SELECT round(7 / 2.0, 2)::text", "3.50"), ("SELECT (-7 / 2.0)::text", "-3.5000000000000000"),
    ("SELECT (1e5)::text", "100000"), ("SELECT (1.5e-7)::text", "0.00000015"),
    ("SELECT (1e100::float8)::text", "1e+100"), ("SELECT (a[1])::text FROM (SELECT ARRAY[2.5] AS a) s", "2.5"),
])
def test_fold_replaces_only_whole_constant_expressions(sql, want):
    assert run(sql) == [(want,)]


def test_a_constant_division_by_zero_is_left_for_duckdb_to_raise():
    assert translate("SELECT 1.5 / 0") == "SELECT 1.5 / 0"
    with pytest.raises(SQLError, match="by zero"):
        run("SELECT 1.5 / 0")


def test_divide_scale_follows_select_div_scale():
    assert divide(parse_literal("-7"), parse_literal("2")).value == -3  # integers truncate
    q = divide(parse_literal("100000000000000000000"), parse_literal("3.0"))
    assert (str(q.value), q.scale) == ("33333333333333333333.3", 1)


def test_fold_agrees_with_postgresql(pg_url):
    psycopg = pytest.importorskip("psycopg")
    rng = random.Random(7)

    def literal():
        k = rng.random()
        if k < 0.3:
            return str(rng.randint(-999, 99999))
        whole, places = rng.randint(0, 10**rng.randint(0, 6)), rng.randint(1, 8)
        return f"{whole}.{rng.randint(0, 10**places - 1):0{places}d}"

    def expr(depth=0):
        if depth > 2 or rng.random() < 0.3:
            return literal()
        return f"({expr(depth + 1)} {rng.choice('+-*/')} {expr(depth + 1)})"

    exprs = [e for e in (expr() for _ in range(300)) if "." in e]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for e in exprs:
            try:
                want = conn.execute(f"SELECT ({e})::text").fetchone()[0]
            except psycopg.errors.DataError:  # division by zero, int4 out of range
                with pytest.raises(SQLError):
                    run(f"SELECT ({e})::text")
                continue
            if len(want.replace("-", "").replace(".", "")) > 38:
                with pytest.raises(UnsupportedSQL, match="38 digits"):  # beyond DuckDB's DECIMAL
                    run(f"SELECT ({e})::text")
                continue
            assert run(f"SELECT ({e})::text") == [(want,)], e


# ----------------------------------------------------------------------------- float8 text


def test_float8_text_agrees_with_postgresql(pg_url):
    psycopg = pytest.importorskip("psycopg")
    rng = random.Random(11)
    values = [1e23, 5e22, 9.15e21, -3.86128214421919e16, 2.0, 1e15, 1e-5, 5e-324, -0.0,
              1.7976931348623157e308, 0.1, 123456789012345678.0, 2.0**53, 2.0**53 + 2]
    for _ in range(1500):
        k = rng.random()
        if k < 0.4:  # short decimals times large powers of ten: where halfway digits occur
            values.append(float(f"{rng.randint(1, 9999)}e{rng.randint(14, 40)}"))
        elif k < 0.7:
            v = struct.unpack("d", struct.pack("Q", rng.getrandbits(63)))[0]
            if math.isfinite(v):
                values.append(v)
        else:
            values.append(rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-30, 30))
    array = "ARRAY[" + ",".join(f"'{v!r}'::float8" for v in values) + "]"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        want = [r[0] for r in conn.execute(
            f"SELECT x::text FROM unnest({array}) WITH ORDINALITY u(x, i) ORDER BY i").fetchall()]
    assert [float8_text(v) for v in values] == want
    # DuckDB's path: SQL for most doubles, float8_text for whole ones from 2^53 to 1e38
    con = connect()
    got = con.sql(translate(f"SELECT x::text AS t FROM (SELECT unnest({array}) AS x)")).fetchall()
    assert [r[0] for r in got] == want


def test_float4_text_agrees_with_postgresql(pg_url):
    psycopg = pytest.importorskip("psycopg")
    rng = random.Random(13)
    values = [2.0, 1e6, 0.1, 308148.125, 3.75e9, 1.4e-45, 3.4028234663852886e38, 16777217.0, -0.0]
    for _ in range(1500):
        k = rng.random()
        if k < 0.4:
            v = float(f"{rng.randint(1, 999)}e{rng.randint(4, 30)}")
        elif k < 0.7:
            v = struct.unpack("f", struct.pack("I", rng.getrandbits(31)))[0]
        else:
            v = rng.uniform(-1e4, 1e4) * 10.0 ** rng.randint(-20, 20)
        if math.isfinite(v) and abs(v) < 3.4e38:
            values.append(struct.unpack("f", struct.pack("f", v))[0])  # the real it is
    array = "ARRAY[" + ",".join(f"'{v!r}'::real" for v in values) + "]"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        want = [r[0] for r in conn.execute(
            f"SELECT x::text FROM unnest({array}) WITH ORDINALITY u(x, i) ORDER BY i").fetchall()]
    assert [float4_text(v) for v in values] == want
    got = connect().sql(translate(f"SELECT x::text AS t FROM (SELECT unnest({array}) AS x)")).fetchall()
    assert [r[0] for r in got] == want


# ----------------------------------------------------------------------------- rewrites


def test_numeric_casts_keep_postgresqls_scale():
    assert run("SELECT '1.50'::numeric::text, 7::numeric::text, (x::numeric * 1.5)::text, "
               "CAST(-2.5 AS numeric)::text FROM (SELECT 30 AS x)") == [("1.50", "7", "45.0", "-2.5")]
    with pytest.raises(UnsupportedSQL, match="NaN"):
        translate("SELECT 'NaN'::numeric")
    with pytest.raises(SQLError, match="invalid input syntax for type numeric"):
        translate("SELECT 'x1'::numeric")
    with pytest.raises(UnsupportedSQL, match="text to numeric"):
        run("SELECT c::numeric FROM (SELECT '1.5' AS c)")
    with pytest.raises(UnsupportedSQL, match="38 digits"):
        translate("SELECT CAST(1e100 AS numeric)")


def test_round_with_places_has_that_scale():
    assert run("SELECT round(2.5, 3)::text, round(x, 2)::text, round(2.345, 2)::text "
               "FROM (SELECT 30 AS x)") == [("2.500", "30.00", "2.35")]


def test_sum_of_bigint_divides_as_numeric():
    # regression: DuckDB's HUGEINT sum divided as integers (1 where PostgreSQL says 1.5)
    assert run("SELECT sum(x) / count(*) AS m, sum(DISTINCT x) / 2 AS d, sum(x) FILTER "
               "(WHERE x > 1) / 4 AS f FROM (VALUES (1::bigint), (2::bigint)) v(x)") == [(1.5, 1.5, 0.5)]
    # a sum of int is bigint in PostgreSQL: integer division stays
    assert run("SELECT sum(x) / count(*) FROM (VALUES (1), (2)) v(x)") == [(1,)]


def test_a_quoted_sum_of_bigint_divides_as_numeric():
    # "sum" is PostgreSQL's sum (a quoted lower-case name): its argument is read off the
    # tree, so it is typed as sum's (was left to DuckDB's HUGEINT sum: 1 where PostgreSQL says 1.5)
    assert run('SELECT "sum"(x) / count(*) AS m FROM (VALUES (1::bigint), (2::bigint)) v(x)') == [(1.5,)]
    assert run("SELECT SUM( x + 0 ) OVER () / 2 FROM (VALUES (1::bigint)) v(x)") == [(0.5,)]


def test_concatenation_prints_operands_as_postgresql():
    assert run("SELECT 'a' || 2.0::float8, 1e20::float8 || 'b', 'c' || x, concat('d', x, 1.50), "
               "concat_ws('/', x, 'e') FROM (SELECT 66.0::float8 AS x)") == \
        [("a2", "1e+20b", "c66", "d661.50", "66/e")]
    assert run("SELECT ARRAY[1, 2] || ARRAY[3]") == [([1, 2, 3],)]  # arrays stay arrays
    assert translate("SELECT 'a' || x || upper(y) || 'b'") == "SELECT 'a' || __colmz_text(x) || __colmz_upper(y) || 'b'"
    with pytest.raises(UnsupportedSQL, match="array"):
        run("SELECT 'a' || x FROM (SELECT ARRAY[1, 2] AS x)")
    with pytest.raises(UnsupportedSQL, match="bytea"):  # PostgreSQL prints \x and hex digits
        run("SELECT x::text FROM (SELECT 'ab'::bytea AS x)")


def test_text_of_a_numeric_computed_as_double_is_refused():
    # PostgreSQL prints numeric digits (15.0000000000000000); DuckDB has a DOUBLE
    for sql in ["SELECT (x / 2.0)::text FROM (SELECT 30 AS x)",
                "SELECT avg(x)::text FROM (VALUES (1), (2)) v(x)",
                "SELECT 'a' || avg(x) FROM (VALUES (1), (2)) v(x)",
                "SELECT (x::numeric)::text FROM (SELECT 1.5::float8 AS x)"]:
        with pytest.raises(UnsupportedSQL, match="numeric value colmz computes as a double"):
            run(sql)
    # an avg of doubles is a double in PostgreSQL: printed
    assert run("SELECT avg(x)::text FROM (VALUES (1.5::float8), (2.0::float8)) v(x)") == [("1.75",)]


def test_text_of_a_real_divided_by_an_integer_is_a_doubles():
    # PostgreSQL's float48div: a double (psql: (1::real / 3)::text is 0.3333333333333333),
    # not a numeric, so it is printed, not refused
    assert run("SELECT (1::real / 3)::text, (3 / 2::real)::text") == [("0.3333333333333333", "1.5")]
    # a real with a numeric literal is float48 too (psql: (1::real / 3.0)::text is
    # 0.3333333333333333, (1::real * 3.0)::text 3, (3.0 - 1::real)::text 2)
    assert run("SELECT (1::real / 3.0)::text, (1::real * 3.0)::text, (3.0 - 1::real)::text") == \
        [("0.3333333333333333", "3", "2")]
