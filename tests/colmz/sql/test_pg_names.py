"""colmz.sql.pg_names: DuckDB's own functions, operators and syntax get PostgreSQL's errors;
PostgreSQL's syntax DuckDB spells with its own function names does not (the corpus's
pgonly_* queries compare both with PostgreSQL)."""

from importlib import resources

import pytest

from colmz.sql import SQLError
from colmz.sql.pg_names import FUNCTIONS, OPERATORS
from colmz.sql.translate import translate


@pytest.mark.parametrize("name", ["pg_functions.txt", "pg_operators.txt"])
def test_name_files_are_sorted_and_unique(name):
    lines = resources.files("colmz.sql").joinpath(name).read_text().splitlines()
    assert lines == sorted(set(lines)) and all(line.strip() == line and line for line in lines)


def test_the_allowlists_hold_postgresqls_names_only():
    assert {"upper", "string_agg", "generate_series", "jsonb_build_object"} <= FUNCTIONS.keys()
    assert not {"strlen", "ifnull", "list_value", "median", "count_if", "list"} & FUNCTIONS.keys()
    assert {"||", "~~", "@>", "->>"} <= OPERATORS and not {"//", "**"} & OPERATORS


@pytest.mark.parametrize("sql, message", [
    ("SELECT strlen('a')", "function strlen(unknown) does not exist"),
    ("SELECT strlen(s) FROM t", r"function strlen(...) does not exist"),
    ("SELECT ifnull(1, 2)", "function ifnull(integer, integer) does not exist"),
    ("SELECT max(1, 2)", "function max(integer, integer) does not exist"),
    ("SELECT string_agg('a')", "function string_agg(unknown) does not exist"),
    ("SELECT 7 // 2", "operator does not exist: integer // integer"),
    ("SELECT 'a'.upper()", 'syntax error at or near "."'),
    ("SELECT s.upper() FROM t", 'schema "s" does not exist'),
    ("SELECT [1]", 'syntax error at or near "["'),
    ("SELECT a FROM t QUALIFY a = 1", 'syntax error at or near "a"'),
    ("SELECT a FROM t GROUP BY ALL", "syntax error at end of input"),
    ("SELECT a FROM t ORDER BY ALL", 'syntax error at or near "ALL"'),
    ("SELECT * EXCLUDE (a) FROM t", 'syntax error at or near "EXCLUDE"'),
    ("SELECT a FROM t LIMIT 10 % ", "syntax error at end of input"),
    ("SELECT count(*) FILTER (a > 1) FROM t", 'syntax error at or near "a"'),
    ("SELECT * FROM t x SEMI JOIN u y ON x.a = y.a", 'syntax error at or near "SEMI"'),
    ("SELECT 1::uinteger", 'type "uinteger" does not exist'),
    ("SELECT * FROM range(3)", r"function range(integer) does not exist"),
])
def test_duckdb_only_constructs_raise_postgresqls_error(sql, message):
    with pytest.raises(SQLError) as e:
        translate(sql)
    assert str(e.value) == message


@pytest.mark.parametrize("sql", [
    "SELECT extract(year FROM d), substring(s FROM 1 FOR 2), position('a' IN s), trim(both 'x' FROM s) FROM t",
    "SELECT s LIKE 'a', s ~ 'a', NOT (a > 1), ARRAY[[1, 2], [3, 4]], (ARRAY[1, 2])[1:2], ROW(1, 2) = ROW(a, 2) FROM t",
    "SELECT array_agg(a) FILTER (WHERE a > 1), count(*), max(a) FROM t GROUP BY a, b",
    "SELECT a FROM t WHERE a = ANY(ARRAY[1]) UNION ALL SELECT 1 FROM generate_series(1, 2)",
    "SELECT mz_now(), pg_catalog.upper('a'), 1::bool, 1::int4, 'a'::varchar(2)",
])
def test_postgresql_syntax_is_not_refused(sql):
    translate(sql)
