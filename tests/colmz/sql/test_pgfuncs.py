"""colmz.sql.pgfuncs: PostgreSQL's functions DuckDB lacks, against PostgreSQL 15.

Each Python function is compared with the machine's PostgreSQL (``CI=1`` makes a missing
server fail) on values Hypothesis generates -- to_char's templates built from every keyword,
prefix and suffix with text between them, date_bin's strides and origins on both sides of the
source, intervals of mixed signs for the justify functions and division, names for
quote_ident -- and the catalog's answers of each function are PostgreSQL's, NULLs and errors
(PostgreSQL's own message) included.
"""

from __future__ import annotations

import datetime

import pytest

pytest.importorskip("duckdb")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sql_oracle import catalog_beside, require  # noqa: E402

import colmz  # noqa: E402
from colmz.sql import SQLError, UnsupportedSQL  # noqa: E402
from colmz.sql.pgfuncs import (  # noqa: E402
    date_bin,
    decode,
    encode,
    interval_div,
    interval_text,
    justify_days,
    justify_hours,
    justify_interval,
    quote_ident,
    quote_literal,
    to_char,
)

require("psycopg", "the PostgreSQL oracle needs psycopg")

EPOCH = datetime.datetime(1970, 1, 1)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def micros_of(ts: datetime.datetime) -> int:
    d = ts - EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def pg_one(pg, sql, *args):
    return pg.execute(sql, args).fetchone()


# ----------------------------------------------------------------------------- to_char

KEYWORDS = ["A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "Day", "Dy", "D", "FF1",
            "FF3", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY", "IY", "I", "J", "MI",
            "MM", "MONTH", "MON", "MS", "Month", "Mon", "OF", "P.M.", "PM", "Q", "RM", "SSSSS", "SSSS", "SS",
            "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y", "a.m.", "am", "day", "dy",
            "month", "mon", "rm", "tz", "yyyy", "hh24", "mi", "ss", "pm", "bc", "Mon", "iw", "w", "q"]
PIECES = st.one_of(
    st.builds(lambda p, k, s: p + k + s, st.sampled_from(["", "", "FM", "fm", "TM"]), st.sampled_from(KEYWORDS),
              st.sampled_from(["", "", "TH", "th", "SP"])),
    st.sampled_from([" ", "-", ":", "/", ",", ".", "x", '"DD of"', '\\"', '"a\\"b"', "T", "S", "F", "E", "FM", "TM",
                     "TH", "tm", '"', "\\"]),
)
TIMESTAMPS = st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31))


@SETTINGS
@given(ts=TIMESTAMPS, pieces=st.lists(PIECES, min_size=1, max_size=6))
def test_to_char_is_postgresqls(pg, ts, pieces):
    fmt = "".join(pieces)
    (want,) = pg_one(pg, "SELECT to_char(%s::timestamp, %s)", ts.isoformat(), fmt)
    assert to_char(micros_of(ts), fmt) == want, fmt


def test_to_char_of_each_keyword_over_a_year(pg):
    # every keyword on days spread over a leap year and its ISO-week edges
    days = [datetime.datetime(2024, 1, 1) + datetime.timedelta(days=d, hours=d % 24, minutes=d, microseconds=d * 7919)
            for d in range(-3, 370, 11)]
    fmt = " ".join(KEYWORDS) + " FMDD FMHH12 FMMonth FMDay FMRM DDth DDTH FMDDth Dth Qth"
    for ts in days:
        (want,) = pg_one(pg, "SELECT to_char(%s::timestamp, %s)", ts.isoformat(), fmt)
        assert to_char(micros_of(ts), fmt) == want, ts


# ----------------------------------------------------------------------------- date_bin

STRIDES = st.tuples(st.integers(0, 40), st.integers(-10**6, 10**11))


@SETTINGS
@given(stride=STRIDES, source=TIMESTAMPS, origin=TIMESTAMPS)
def test_date_bin_is_postgresqls(pg, stride, source, origin):
    days, us = stride
    iv = f"{days} days {us} microseconds"
    try:
        (want,) = pg_one(pg, "SELECT date_bin(%s::interval, %s::timestamp, %s::timestamp)", iv, source.isoformat(),
                         origin.isoformat())
    except Exception as e:  # noqa: BLE001 - its message is compared
        with pytest.raises(ValueError) as ours:
            date_bin((0, days, us), micros_of(source), micros_of(origin))
        assert str(ours.value) == str(e).splitlines()[0]
        return
    got = date_bin((0, days, us), micros_of(source), micros_of(origin))
    assert got == micros_of(want)


def test_date_bin_at_bin_edges(pg):
    # sources on a bin's edge and just inside it, before and after the origin
    origin = datetime.datetime(2024, 1, 1)
    for stride_us in (1, 7, 900_000_000, 86_400_000_000 + 3):
        for k in (-3, -1, 0, 1, 2):
            for off in (-1, 0, 1):
                source = origin + datetime.timedelta(microseconds=k * stride_us + off)
                (want,) = pg_one(pg, "SELECT date_bin(%s::interval, %s::timestamp, %s::timestamp)",
                                 f"{stride_us} microseconds", source.isoformat(), origin.isoformat())
                assert date_bin((0, 0, stride_us), micros_of(source), micros_of(origin)) == micros_of(want)


# ----------------------------------------------------------------------------- intervals

INTERVALS = st.tuples(st.integers(-5000, 5000), st.integers(-50_000, 50_000), st.integers(-(2**50), 2**50))
_PARTS = ("SELECT extract(year FROM x) * 12 + extract(month FROM x), extract(day FROM x), "
          "extract(hour FROM x) * 3600000000 + extract(minute FROM x) * 60000000 + extract(microseconds FROM x) "
          "FROM (SELECT {} AS x) s")
_MAKE = "(make_interval(months => %s, days => %s) + %s * interval '1 microsecond')"


def pg_parts(pg, expr, iv, *extra):
    row = pg_one(pg, _PARTS.format(expr.format(_MAKE)), *iv, *extra)
    return tuple(int(v) for v in row)


@SETTINGS
@given(iv=INTERVALS)
def test_justify_is_postgresqls(pg, iv):
    assert justify_hours(*iv) == pg_parts(pg, "justify_hours({})", iv)
    assert justify_days(*iv) == pg_parts(pg, "justify_days({})", iv)
    assert justify_interval(*iv) == pg_parts(pg, "justify_interval({})", iv)


@SETTINGS
@given(iv=INTERVALS, factor=st.one_of(st.integers(-50, 50).filter(bool).map(float),
                                      st.floats(-1000, 1000).filter(lambda f: abs(f) > 1e-3)))
def test_interval_division_is_postgresqls(pg, iv, factor):
    assert interval_div(*iv, factor) == pg_parts(pg, "{} / %s::float8", iv, factor)


@SETTINGS
@given(iv=INTERVALS)
def test_interval_text_is_postgresqls(pg, iv):
    (want,) = pg_one(pg, f"SELECT {_MAKE}::text", *iv)
    assert interval_text(*iv) == want


# ----------------------------------------------------------------------------- quoting

NAMES = st.one_of(st.text(alphabet='abAZ_ 1"$é', max_size=6),
                  st.sampled_from(["select", "table", "user", "name", "text", "abs", "left", "xmltable", "int4"]))


@SETTINGS
@given(name=NAMES, text=st.text(alphabet="ab'\\\" ", max_size=6))
def test_quoting_is_postgresqls(pg, name, text):
    ident, literal = pg_one(pg, "SELECT quote_ident(%s), quote_literal(%s::text)", name, text)
    assert quote_ident(name) == ident
    assert quote_literal(text) == literal


@SETTINGS
@given(data=st.binary(max_size=80), fmt=st.sampled_from(["hex", "base64", "escape", "HEX", "Base64"]))
def test_encode_is_postgresqls(pg, data, fmt):
    (want,) = pg_one(pg, "SELECT encode(%s::bytea, %s)", data, fmt)
    assert encode(data, fmt) == want
    assert decode(want, fmt) == data


@SETTINGS
@given(text=st.text(alphabet="0aF=+/ \n\\7g", max_size=10), fmt=st.sampled_from(["hex", "base64", "escape"]))
def test_decode_is_postgresqls(pg, text, fmt):
    import psycopg

    try:
        (want,) = pg_one(pg, "SELECT decode(%s, %s)", text, fmt)
    except psycopg.Error as e:
        with pytest.raises(ValueError) as ours:
            decode(text, fmt)
        assert str(e).startswith(str(ours.value))  # (a digit named may be a line break)
        return
    assert decode(text, fmt) == want


# ----------------------------------------------------------------------------- in the catalog

QUERIES = [
    "SELECT to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS') AS a, to_char(ts, 'FMDay, FMDDth FMMonth YYYY') AS b, "
    "to_char(ts, 'HH12:MI AM Q IW \"week\"') AS c FROM t ORDER BY k",
    "SELECT to_char(d, 'DD Mon YYYY') AS a, to_char(NULL::timestamp, 'YYYY') AS b, to_char(ts, NULL) AS c "
    "FROM t ORDER BY k",
    "SELECT date_bin(INTERVAL '15 minutes', ts, TIMESTAMP '2024-01-01') AS a, "
    "date_bin('1 day 2 hours', ts, TIMESTAMP '2030-01-01 00:00:07') AS b, "
    "date_bin(INTERVAL '1 hour', NULL::timestamp, TIMESTAMP '2024-01-01') AS c FROM t ORDER BY k",
    "SELECT justify_hours(iv)::text AS a, justify_days(iv)::text AS b, justify_interval(iv)::text AS c, "
    "(iv::interval / 4)::text AS e FROM (SELECT k, INTERVAL '30 hours' * k - INTERVAL '40 days' + "
    "INTERVAL '1 month' * (k % 2) - INTERVAL '1 microsecond' * k AS iv FROM t) s ORDER BY k",
    "SELECT justify_interval(INTERVAL '1 month -1 hour')::text AS a, (INTERVAL '1 month 3 days' / 2.5)::text AS b, "
    "(INTERVAL '1 hour' / NULL::float8) IS NULL AS c",
    "SELECT quote_ident(s) AS a, quote_literal(s) AS b, quote_nullable(s) AS c, quote_literal(k) AS d "
    "FROM t ORDER BY k",
    "SELECT array_to_string(ARRAY[s, NULL, 'z'], '-', '?') AS a, array_to_string(ARRAY[1, NULL, 3], ',', NULL) AS b, "
    "array_to_string(ARRAY[true, NULL], ',', 'n') AS c, array_to_string(ARRAY[1.5::float8, NULL], ';', '') AS d "
    "FROM t ORDER BY k",
    "SELECT string_to_array(s, 'b', 'a') AS a, string_to_array('x,,y', ',', '') AS b, "
    "string_to_array('x,y', NULL, 'y') AS c FROM t ORDER BY k",
    "SELECT encode(decode(s, 'escape'), 'hex') AS a, decode('6162', 'hex') AS c, "
    "encode('\\x00ff', 'escape') AS d FROM t WHERE k < 3 ORDER BY k",
    "SELECT (TIME '10:00' - TIME '12:30:00.5')::text AS a, (CAST('23:59' AS time) - TIME '00:00')::text AS b, "
    "(INTERVAL '1 day 25 hours')::time AS c, (INTERVAL '-1 hour -2 minutes')::time AS d",
    "SELECT k, regexp_matches(s, '[a-z]', 'g') AS m FROM t ORDER BY k, m",
    "SELECT k, m, m[1] AS first FROM t, regexp_matches(s, '^(.)(.)') AS m ORDER BY k",
    "SELECT * FROM regexp_matches('a1b22', '([a-z])([0-9]+)', 'g') AS r(x) ORDER BY x",
    "SELECT regexp_matches.regexp_matches[1] AS a FROM regexp_matches('a1b22', '[0-9]+', 'g') ORDER BY 1",
    "SELECT k, regexp_split_to_array(s, '\\s*') AS a, regexp_split_to_array(s, 'E', 'i') AS b FROM t ORDER BY k",
    "SELECT k, w FROM t CROSS JOIN LATERAL regexp_split_to_table(s, ' ') AS w ORDER BY k, w",
    "SELECT date_part('second', ts) AS a, date_part('milliseconds', ts) AS b, date_part('dow', d) AS c, "
    "date_part('epoch', ts) AS e FROM t ORDER BY k",
    "SELECT pg_size_pretty(k * 123456789::bigint) AS a, pg_size_pretty(-20971519::bigint) AS b FROM t ORDER BY k",
    "SELECT k, get_byte(decode(s, 'escape'), 0) AS a, get_byte('\\x0a0b', 1) AS b, convert_from(decode(s, 'escape'), "
    "'UTF8') AS c, convert_from('\\xe9', 'latin1') AS d, length(decode(s, 'escape'), 'utf-8') AS e, "
    "bit_length(decode(s, 'escape')) AS f, bit_length(s) AS g FROM t WHERE k <> 3 ORDER BY k",
    "SELECT * FROM generate_subscripts(ARRAY[[1, 2, 3], [4, 5, 6]], 2) AS i",
    "SELECT k, i FROM t, generate_subscripts(string_to_array(s, 'b'), 1, true) AS i ORDER BY k, i",
    "SELECT generate_subscripts(ARRAY[10, 20], 1) AS i, generate_subscripts(NULL::int[], 1) IS NULL AS n",
    "SELECT array_cat(ARRAY[[1, 2]], ARRAY[[3, 4]]) AS a, array_cat(ARRAY[[1, 2]], NULL) AS b, "
    "array_cat(ARRAY[]::int[], ARRAY[1]) AS c, array_cat(ARRAY[[[1], [2]]], ARRAY[[[3], [4]]]) AS d",
    "SELECT sha224('abc'::bytea) AS a, sha256('\\x6162') AS b, encode(sha512(decode(s, 'escape')), 'hex') AS c "
    "FROM t WHERE k < 3 ORDER BY k",
]
FAILING = [
    "SELECT date_bin(INTERVAL '1 month', ts, TIMESTAMP '2024-01-01') FROM t",
    "SELECT date_bin(INTERVAL '0 seconds', ts, TIMESTAMP '2024-01-01') FROM t",
    "SELECT date_bin(INTERVAL '-1 hour', ts, TIMESTAMP '2024-01-01') FROM t",
    "SELECT INTERVAL '1 hour' / 0 AS a",
    "SELECT justify_days(INTERVAL '2147483647 months 60 days') AS a",
    "SELECT decode('61x', 'hex') AS a",
    "SELECT decode('Y===', 'base64') AS a",
    "SELECT encode('\\x00'::bytea, 'base32') AS a",
    "SELECT regexp_matches(s, 'a', 'z') FROM t",
    "SELECT regexp_split_to_array(s, 'a', 'g') FROM t",
    "SELECT * FROM regexp_split_to_table('a', 'a', 'g')",
    "SELECT regexp_matches(s, '(') FROM t",
    "SELECT regexp_split_to_array(s, '[a') FROM t",
    "SELECT get_byte('\\x0102'::bytea, 2) AS a",
    "SELECT get_byte(decode(s, 'escape'), -1) FROM t WHERE k = 1",
    "SELECT convert_from('\\x61e282'::bytea, 'UTF8') AS a",
    "SELECT convert_from('\\x6100'::bytea, 'LATIN1') AS a",
    "SELECT convert_from('\\x80'::bytea, 'SQL_ASCII') AS a",
    "SELECT convert_from('\\x61'::bytea, 'nope') AS a",
    "SELECT length('\\xff'::bytea, 'UTF8') AS a",
    "SELECT array_cat(ARRAY[[1, 2]], ARRAY[[3, 4, 5]]) AS a",
    "SELECT array_cat(ARRAY[[[1], [2]]], ARRAY[[[3, 5], [4, 6]]]) AS a",
]
SETUP = ["CREATE TABLE t (k INT, ts TIMESTAMP, d DATE, s TEXT)",
         "INSERT INTO t VALUES (1, '2024-03-01 14:05:06.789', '2024-02-29', 'abc'), "
         "(2, '1999-12-31 23:59:59', '2021-01-03', 'Select'), "
         "(3, '2024-12-30 00:00:00', '2020-12-31', 'it''s \\ here'), "
         "(4, NULL, NULL, NULL)"]


@pytest.fixture(scope="module")
def both(pg):
    return catalog_beside(pg, SETUP, ("t",))


@pytest.mark.parametrize("sql", QUERIES)
def test_catalog_answers_are_postgresqls(both, sql):
    from sql_oracle import outcome

    pg, cat = both
    assert outcome(pg, cat, sql) == ("match", "")


@pytest.mark.parametrize("sql", FAILING)
def test_catalog_errors_are_postgresqls(both, sql):
    import psycopg

    pg, cat = both
    with pytest.raises(psycopg.Error) as theirs:
        pg.execute(sql).fetchall()
    with pytest.raises(SQLError) as ours:
        cat.sql(sql)
    assert str(ours.value) == str(theirs.value).splitlines()[0]


def test_refused_by_name():
    cat = colmz.Catalog()
    for sql, what in [("SELECT to_char(1.5, '9.9')", "to_char() of a number or an interval"),
                      ("SELECT to_char(INTERVAL '1 hour', 'HH24')", "to_char() of a number or an interval"),
                      ("SELECT quote_literal(1.5::float8)", "quote_literal() of a value other than text"),
                      # PostgreSQL's, not Materialize's: refused by name
                      ("SELECT width_bucket(5.35, 0.024, 10.06, 5)", "width_bucket()"),
                      ("SELECT array_dims(ARRAY[1])", "array_dims()"),
                      ("SELECT format('%s', 1)", "format()"), ("SELECT 'a' SIMILAR TO 'a'", "SIMILAR TO"),
                      ("SELECT regexp_matches('a', '[[:alpha:]]')", "POSIX bracket class"),
                      ("SELECT CASE WHEN true THEN regexp_matches('a', 'a') END", "regexp_matches() inside CASE"),
                      ("SELECT pg_size_pretty(1.5)", "pg_size_pretty() of a value that is not an integer"),
                      ("SELECT sha256('a'::text)", "sha256() of a value that is not bytea"),
                      ("SELECT convert_from('\\x61'::bytea, 'EUC_JP')", "convert_from() from the encoding 'EUC_JP'"),
                      ("SELECT regexp_matches('ab', '(?<=a+)b')", "a pattern Python cannot read"),
                      ("SELECT array_cat(ARRAY[[1, 2]], ARRAY[3, 4])", "array_cat() or || of arrays of different dimensions"),
                      ("SELECT * FROM regexp_split_to_table('a', ',') WITH ORDINALITY AS m(x, n)",
                       "regexp_split_to_table() WITH ORDINALITY"),
                      ("SELECT date_part(s, ts) FROM (SELECT 'year' AS s, now() AS ts) x",
                       "date_part() of a unit that is not a string literal")]:
        with pytest.raises(UnsupportedSQL, match=what.replace("(", r"\(").replace(")", r"\)")):
            cat.sql(sql)


def test_a_view_keeps_them(both):
    # a materialized view kept by the catalog holds what the query gives when recomputed
    _, cat = both
    body = ("SELECT k, to_char(ts, 'YYYY-MM-DD HH24') AS h, date_bin(INTERVAL '1 hour', ts, TIMESTAMP '2000-01-01') AS b, "
            "quote_ident(s) AS q FROM t")
    cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
    cat.execute("INSERT INTO t VALUES (5, '2024-06-01 08:30:00', NULL, 'New')")
    cat.execute("DELETE FROM t WHERE k = 1")
    got = cat.sql("SELECT * FROM v ORDER BY k")
    want = cat.sql(body + " ORDER BY k")
    assert got.to_pylist() == want.to_pylist()
    assert "2024-06-01 08" in got.column("h").to_pylist()


# ----------------------------------------------------------------------------- regular expressions

ATOMS = st.sampled_from(["a", "b", "ab", "aa", ".", "[ab]", "[^a]", "\\s", "\\w", "x", " ", "\\y"])
QUANTIFIERS = st.sampled_from(["", "", "*", "+", "?", "{1,2}", "{2}"])


@st.composite
def patterns(draw, depth=2):
    # regular expressions both read alike: atoms, groups, alternations, quantifiers, anchors
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if depth and draw(st.integers(0, 3)) == 0:
            inner = draw(patterns(depth - 1))
            alt = draw(patterns(depth - 1)) if draw(st.booleans()) else None
            atom = f"({inner}|{alt})" if alt is not None else f"({inner})"
        else:
            atom = draw(ATOMS)
        pieces.append(atom + draw(QUANTIFIERS))
    body = "".join(pieces)
    if depth == 2 and draw(st.integers(0, 4)) == 0:
        body += "|" + draw(patterns(1))
    return draw(st.sampled_from(["", "", "^"])) + body + draw(st.sampled_from(["", "", "$"]))


SUBJECTS = st.text(alphabet="ab x\n", max_size=8)


def _pg_or_error(pg, sql, *args):
    import psycopg

    try:
        return pg.execute(sql, args).fetchall(), None
    except psycopg.Error as e:
        return None, str(e).splitlines()[0]


def _ours(fn, *args):
    # fn's answer, or None where colmz refuses the pattern (Python reads it otherwise)
    try:
        return fn(*args)
    except ValueError as e:
        if "not supported by colmz" in str(e):
            return None
        raise


@SETTINGS
@given(s=SUBJECTS, pattern=patterns(), flags=st.sampled_from(["", "g", "i", "gi", "c"]))
def test_regexp_matches_is_postgresqls(pg, s, pattern, flags):
    from colmz.sql.pgfuncs import regexp_matches

    rows, error = _pg_or_error(pg, "SELECT regexp_matches(%s, %s, %s)", s, pattern, flags)
    if error is not None:
        with pytest.raises(ValueError):
            regexp_matches(s, pattern, flags)
        return
    got = _ours(regexp_matches, s, pattern, flags)
    assert got is None or got == [r[0] for r in rows], (s, pattern, flags)


@SETTINGS
@given(s=SUBJECTS, pattern=patterns(), flags=st.sampled_from(["", "i", "g"]))
def test_regexp_split_is_postgresqls(pg, s, pattern, flags):
    from colmz.sql.pgfuncs import regexp_split

    rows, error = _pg_or_error(pg, "SELECT regexp_split_to_array(%s, %s, %s)", s, pattern, flags)
    if error is not None:
        with pytest.raises(ValueError) as ours:
            regexp_split(s, pattern, flags)
        if "global" in error:
            assert str(ours.value) == error
        return
    got = _ours(regexp_split, s, pattern, flags)
    assert got is None or got == rows[0][0], (s, pattern, flags)


def test_regular_expressions_python_reads_otherwise_are_refused():
    from colmz.sql.pgfuncs import regexp_matches

    for pattern, flags, what in [("[[:alpha:]]", "", "POSIX bracket class"), ("a+?", "", "non-greedy quantifier"),
                                 ("a", "n", "the flag 'n'"), ("\\q", "", "the escape \\q"),
                                 ("(?P<x>a)", "", "named group"), ("(a)+", "", "repeated capture group")]:
        with pytest.raises(ValueError, match="not supported by colmz") as e:
            regexp_matches("a", pattern, flags)
        assert what in str(e.value)


@SETTINGS
@given(size=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**24), 2**24),
                      st.sampled_from([10239, 10240, 20 * 1024**2 - 1, 20 * 1024**2, -10240, 0])))
def test_pg_size_pretty_is_postgresqls(pg, size):
    from colmz.sql.pgfuncs import pg_size_pretty

    (want,) = pg_one(pg, "SELECT pg_size_pretty(%s::bigint)", size)
    assert pg_size_pretty(size) == want


VIEW_BODIES = [
    "SELECT k, regexp_matches(s, '[a-z]+', 'g') AS m FROM t",
    "SELECT k, m FROM t, regexp_matches(s, '([a-z])([0-9])?') AS m",
    "SELECT k, w FROM t, regexp_split_to_table(s, '[0-9]+') AS w",
    "SELECT k, regexp_split_to_array(s, '\\s*') AS a, date_part('second', ts) AS sec, "
    "pg_size_pretty(k * 100000::bigint) AS p, sha256(decode(s, 'escape')) AS h FROM t",
    "SELECT count(*) AS n, sum(date_part('milliseconds', ts)) AS ms FROM t",
]


def test_views_of_them_are_postgresqls():
    # materialized views kept by the catalog (incrementally, or recomputed where the delta
    # rules have no form for a call) equal PostgreSQL's views after each commit
    import warnings

    from sql_oracle import fresh_connection, views_equal_postgres

    tables = ["CREATE TABLE t (k INT, s TEXT, ts TIMESTAMP)",
              "INSERT INTO t VALUES (1, 'ab12cd', '2024-01-01 10:00:01.5'), (2, NULL, NULL), "
              "(3, 'x y', '2024-02-01 00:00:00')"]
    script = ["INSERT INTO t VALUES (4, 'zz9', '2024-03-01 00:00:02.25')", "DELETE FROM t WHERE k = 1",
              "UPDATE t SET s = 'q1 r2' WHERE k = 3"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a Fallback's warning: recomputed, still compared)
        for body in VIEW_BODIES:  # (one connection each: PostgreSQL's cached plans of a view)
            conn = fresh_connection()
            try:
                assert views_equal_postgres(conn, tables, [body], script) == 4
            finally:
                conn.close()


# ----------------------------------------------------------------------------- years BC


@SETTINGS
@given(days=st.integers(-800_000, 800_000), micros=st.integers(0, 86_400_000_000 - 1),
       unit=st.sampled_from(["year", "decade", "century", "millennium", "isoyear"]))
def test_years_bc_as_postgresql(pg, days, micros, unit):
    # a date, timestamp and timestamptz some days before or after 0001-01-01 (years BC and
    # AD): their text, the year's units of each and the decade each is truncated to
    d = f"(DATE '0001-01-01' + {days})"
    ts = f"({d} + interval '{micros} microseconds')"
    sql = (f"SELECT {d}::text AS a, {ts}::text AS b, {ts}::timestamptz::text AS c, extract({unit} FROM {d}) AS e, "
           f"extract({unit} FROM {ts}) AS f, extract({unit} FROM {ts}::timestamptz) AS g, "
           f"date_part('{unit}', {ts}) AS h, date_trunc('decade', {ts})::text AS i, "
           f"date_trunc('decade', {ts}::timestamptz)::text AS j")
    want = pg.execute(sql).fetchone()
    got = colmz.Catalog().sql(sql).to_pylist()[0]
    assert list(got.values()) == [float(w) if k == "h" else int(w) if k in "efg" else w
                                  for k, w in zip("abcefghij", want)], sql
