"""colmz.sql.setop_types: a bare string literal in a set operation's branch takes the common
type of its column, against PostgreSQL 15 (``CI=1`` makes a missing server fail).

Queries run in PostgreSQL and in a catalog holding the same rows (``sql_oracle.open_both``):
each answers as PostgreSQL does (names, values), or both raise, or colmz refuses by name --
never a different answer. Generated ones put literals of every kind of text (digits, blanks,
fractions, words, dates, booleans) beside columns, casts and literals of each type, in each
branch, under each set operation, nested; materialized views over such queries equal
PostgreSQL's views as their inputs change.
"""

from __future__ import annotations

import pytest

pytest.importorskip("duckdb")
import sql_oracle  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sql_oracle import require, views_equal_postgres  # noqa: E402

from colmz.sql import SQLError, UnsupportedSQL  # noqa: E402
from colmz.sql.column_rules import column_type_rules  # noqa: E402
from colmz.sql.setop_types import UNKNOWN, common_type  # noqa: E402

require("psycopg", "the PostgreSQL oracle needs psycopg")


@pytest.fixture(scope="module")
def both():
    conn, cat = sql_oracle.open_both()
    yield conn, cat
    conn.close()


def outcome(both, sql: str) -> tuple[str, str]:
    return sql_oracle.outcome(*both, sql)


# ----------------------------------------------------------------------------- the rule alone

PEOPLE = (("people", (("age", "exact", "integer"), ("name", "text", "text"), ("score", "double", "double precision"),
                      ("c", "other", None))),)


def setop_literal_rules(sql, relations):
    # the set operations' rule alone (colmz.sql.column_rules)
    return column_type_rules(sql, relations, ("setop",))


def test_common_type_is_postgresqls():
    assert common_type(UNKNOWN, "date") == "date" and common_type(UNKNOWN, UNKNOWN) == "text"
    assert common_type("smallint", "bigint") == "bigint" and common_type("numeric", "real") == "real"
    assert common_type("date", "timestamp without time zone") == "timestamp without time zone"
    assert common_type("jsonb", None) is None and common_type("integer[]", "integer[]") == "integer[]"
    with pytest.raises(SQLError, match="^EXCEPT types boolean and integer cannot be matched$"):
        common_type("boolean", "integer", "EXCEPT")
    with pytest.raises(SQLError, match="types date and time without time zone cannot be matched"):
        common_type("date", "time without time zone")


def test_the_literal_is_cast_as_translate_writes_the_cast():
    assert setop_literal_rules("SELECT age FROM people UNION ALL SELECT '5' AS z", PEOPLE) == \
        "SELECT age FROM people UNION ALL SELECT '5'::integer AS z"
    # the first branch's literal too; a text column, a NULL, a query without set operation: as written
    for sql in ("SELECT name FROM people UNION SELECT 'x'", "SELECT age FROM people UNION SELECT NULL",
                "SELECT '5' AS a FROM people"):
        assert setop_literal_rules(sql, PEOPLE) == sql
    assert setop_literal_rules("SELECT '5' UNION SELECT score FROM people", PEOPLE) == \
        "SELECT '5'::double precision UNION SELECT score FROM people"


def test_a_literal_beside_a_type_not_known_is_refused_by_name():
    with pytest.raises(UnsupportedSQL, match="untyped literal .a string or NULL. in a INTERSECT branch beside a "
                                             "column of a type colmz does not know"):
        setop_literal_rules("SELECT c FROM people INTERSECT SELECT 'x'", PEOPLE)
    with pytest.raises(UnsupportedSQL, match="untyped literal .a string or NULL. in a UNION branch"):
        setop_literal_rules("SELECT age FROM other UNION SELECT 'x'", PEOPLE)  # (a relation not named)
    # a literal meeting a text input is text, whatever the inputs after it
    sql = "SELECT name FROM people UNION SELECT 'x' UNION SELECT c FROM people"
    assert setop_literal_rules(sql, PEOPLE) == sql


def test_a_recursive_cte_is_typed_by_its_non_recursive_term():
    sql = "WITH RECURSIVE s(x) AS (SELECT 'a' UNION ALL SELECT x || 'a' FROM s WHERE length(x) < 4) SELECT x FROM s"
    assert setop_literal_rules(sql, ()) == sql


# ----------------------------------------------------------------------------- against PostgreSQL

#: Queries and how colmz must end: PostgreSQL's answer (``match``), both raising, or refused.
CASES = [
    ("SELECT age FROM people UNION SELECT '5'", "match"),
    ("SELECT '5' UNION SELECT age FROM people ORDER BY 1", "match"),
    ("SELECT 1 UNION SELECT '5'", "match"),
    ("SELECT 'a' UNION SELECT 'b'", "match"),
    ("SELECT age FROM people UNION ALL SELECT ' 5 ' UNION ALL SELECT '+5'", "match"),
    ("SELECT age FROM people EXCEPT ALL SELECT '30'", "match"),
    ("SELECT age FROM people UNION SELECT '5' UNION SELECT '6' ORDER BY 1", "match"),
    ("(SELECT age FROM people UNION SELECT '5') UNION SELECT 7", "match"),
    ("SELECT age, name, score FROM people UNION SELECT '5', 'bob', NULL", "match"),
    ("SELECT age, name FROM people UNION SELECT NULL, NULL", "match"),
    ("SELECT a + 1 AS b FROM (SELECT age AS a FROM people UNION SELECT '5') s", "match"),
    ("WITH c AS (SELECT age FROM people UNION SELECT '5') SELECT age + 1 AS b FROM c", "match"),
    ("SELECT x FROM (SELECT id AS x FROM orders UNION ALL SELECT '9000000000') s WHERE x > 5", "match"),
    ("SELECT score FROM people UNION SELECT 'NaN' UNION SELECT '-Infinity'", "match"),
    ("SELECT joined FROM people UNION SELECT '2024-01-01'", "match"),
    ("SELECT ts FROM orders UNION SELECT '2024-01-01 10:00'", "match"),
    ("SELECT true UNION SELECT 'yes' UNION SELECT 'off'", "match"),
    ("SELECT body FROM docs UNION ALL SELECT '{\"a\":1}'", "match"),
    ("SELECT 'a' AS x UNION ALL SELECT upper('b') ORDER BY x", "match"),
    ("SELECT joined FROM people INTERSECT ALL SELECT '2020-01-15'", "match"),
    ("SELECT age > 30 AS b FROM people UNION SELECT 'yes'", "match"),
    ("SELECT id, name, joined FROM people WHERE id < 3 UNION ALL SELECT '9', 'z', NULL ORDER BY 1", "match"),
    ("SELECT score FROM people EXCEPT SELECT 'NaN' ORDER BY 1", "match"),
    ("WITH c AS (SELECT k FROM nums UNION ALL SELECT '3') SELECT k * 2 AS d FROM c ORDER BY 1 NULLS LAST", "match"),
    ("SELECT age + 1 AS a FROM people UNION SELECT '5'", "match"),
    ("SELECT max(age) FROM people UNION SELECT '5'", "match"),
    ("SELECT count(*) FROM people UNION SELECT '5'", "match"),
    ("SELECT * FROM people UNION ALL SELECT 1, 'a', '5', 'b', '2.5', '2024-01-01'", "match"),
    ("SELECT age FROM people WHERE age IN (SELECT age FROM people UNION SELECT '30')", "match"),
    ("SELECT (SELECT max(a) FROM (SELECT age AS a FROM people UNION SELECT '99') s) AS m", "match"),
    # PostgreSQL's errors, in its words
    ("SELECT age FROM people UNION SELECT 'x'", "both fail"),
    ("SELECT age FROM people UNION SELECT '5.0'", "both fail"),
    ("SELECT age FROM people UNION SELECT 'x' FROM people WHERE false", "both fail"),
    ("SELECT score FROM people UNION SELECT 'x'", "both fail"),
    ("SELECT true UNION SELECT 'maybe'", "both fail"),
    ("SELECT x FROM nums UNION SELECT '1e3'", "both fail"),
    ("SELECT '5' UNION SELECT '6' UNION SELECT age FROM people", "both fail"),
    ("SELECT 1 UNION (SELECT '5' UNION SELECT '6')", "both fail"),
    ("SELECT 1 UNION SELECT '5' INTERSECT SELECT '6'", "both fail"),  # (INTERSECT first: text)
    ("SELECT age FROM people UNION ALL SELECT ' 5 ' INTERSECT SELECT '+5'", "both fail"),
    ("SELECT NULL UNION SELECT '5' UNION SELECT 1", "both fail"),
    ("SELECT age FROM people UNION SELECT DISTINCT '5'", "both fail"),
    ("SELECT age FROM people UNION SELECT '5' FROM people GROUP BY 1", "both fail"),
    ("SELECT age FROM people UNION SELECT '5'::text", "both fail"),
    ("SELECT '5' INTERSECT SELECT '5' UNION SELECT age > 30 FROM people", "both fail"),
    ("SELECT NULL UNION SELECT NULL UNION SELECT age FROM people", "both fail"),
    ("SELECT name FROM people UNION SELECT age FROM people", "both fail"),
    ("SELECT * FROM (SELECT '5' AS a) s UNION SELECT 1", "both fail"),
    # beside a value colmz cannot type: refused by name
    ("SELECT abs(age - 1.5)::int % 3 + extract(day FROM joined) AS a FROM people UNION SELECT '5'", "refused"),
    ("SELECT DISTINCT NULL UNION SELECT extract(day FROM joined) FROM people", "refused"),
]


@pytest.mark.parametrize("sql,want", CASES)
def test_answers_as_postgresql(both, sql, want):
    kind, detail = outcome(both, sql)
    assert kind == want, detail
    if want == "refused":
        assert "untyped literal" in detail


RANGE_OFFSETS = [
    # a bare string beside a date or timestamp key is an interval (DuckDB finds no function)
    ("SELECT id, count(*) OVER (ORDER BY ts RANGE BETWEEN '1 day' PRECEDING AND '12 hours' FOLLOWING) AS c "
     "FROM orders ORDER BY id", "match"),
    ("SELECT id, count(*) OVER (ORDER BY joined RANGE BETWEEN '1 year' PRECEDING AND CURRENT ROW) AS c "
     "FROM people ORDER BY id", "match"),
    ("SELECT id, count(*) OVER w AS c FROM people WINDOW w AS (ORDER BY joined DESC RANGE BETWEEN '400 days' "
     "PRECEDING AND '1 mon' FOLLOWING) ORDER BY id", "match"),
    ("SELECT id, count(*) OVER (ORDER BY age RANGE BETWEEN 5::bigint PRECEDING AND 5::smallint FOLLOWING) AS c "
     "FROM people ORDER BY id", "match"),
    ("SELECT id, count(*) OVER (ORDER BY score RANGE BETWEEN 10 PRECEDING AND 2.5 FOLLOWING) AS c "
     "FROM people ORDER BY id", "match"),
    # an offset type the key's in_range has not: PostgreSQL's error (DuckDB answers)
    ("SELECT id, count(*) OVER (ORDER BY age RANGE BETWEEN 2.5 PRECEDING AND CURRENT ROW) AS c FROM people",
     "both fail"),
    ("SELECT id, count(*) OVER (ORDER BY joined RANGE BETWEEN 30 PRECEDING AND CURRENT ROW) AS c FROM people",
     "both fail"),
    ("SELECT id, count(*) OVER (ORDER BY ts RANGE BETWEEN CURRENT ROW AND 1.5 FOLLOWING) AS c FROM orders",
     "both fail"),
]


@pytest.mark.parametrize("sql,want", RANGE_OFFSETS)
def test_range_offsets_as_postgresql(both, sql, want):
    kind, detail = outcome(both, sql)
    assert kind == want, detail
    if want == "both fail":
        assert "RANGE with offset PRECEDING/FOLLOWING is not supported for column type" in detail


def test_errors_are_postgresqls_words(both):
    cat = both[1]
    for sql, message in (("SELECT age FROM people UNION SELECT 'x'", 'invalid input syntax for type integer: "x"'),
                         ("SELECT name FROM people UNION SELECT age FROM people",
                          "UNION types text and integer cannot be matched"),
                         ("SELECT 1 INTERSECT (SELECT 'a' EXCEPT SELECT 'b')",
                          "INTERSECT types integer and text cannot be matched")):
        with pytest.raises(SQLError, match=f"^{message}$"):
            cat.sql(sql)
        with pytest.raises(Exception, match=message):
            both[0].execute(sql)


def test_case_coalesce_and_values_already_type_the_literal(both):
    # the typed value's type, as PostgreSQL (translate's own rules)
    for sql in ("SELECT CASE WHEN id > 2 THEN age ELSE '5' END AS a FROM people",
                "SELECT coalesce(age, '5') AS a, greatest(score, '1.5') AS b FROM people",
                "SELECT * FROM (VALUES (1), ('5')) v(a)"):
        assert outcome(both, sql)[0] == "match", sql


# ----------------------------------------------------------------------------- generated

#: Values of each type beside the literals, as a select item over ``people``-like tables.
TYPED = {
    "integer": ["age", "id", "7", "age + 1", "age::int"],
    "bigint": ["x", "9000000000", "x * 2"],
    "numeric": ["2.5", "age::numeric", "x::numeric"],
    "double precision": ["score", "f", "score * 2", "1.5::float8"],
    "text": ["name", "t", "upper(name)", "'q'::text"],
    "date": ["joined", "DATE '2024-01-01'"],
    "boolean": ["true", "age > 30", "k = 1"],
}
TABLE_OF = {"age": "people", "id": "people", "score": "people", "name": "people", "joined": "people",
            "x": "nums", "f": "nums", "t": "nums", "k": "nums"}
LITERALS = ["'5'", "' 7 '", "'-3'", "'+2'", "'2.5'", "'1e3'", "'x'", "''", "'NaN'", "'inf'", "'true'", "'no'",
            "'2024-02-29'", "'2024-01-01 10:00'", "'9000000000'", "NULL"]
OPS = ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]


def _from(e: str) -> str:
    tables = {t for w, t in TABLE_OF.items() if w in e.replace("(", " ").replace(")", " ").split()}
    return f" FROM {tables.pop()}" if len(tables) == 1 else ""


@st.composite
def setop_queries(draw) -> str:
    # one or two typed values (of one type or two: PostgreSQL matches some pairs, raises for others)
    typed = [draw(st.sampled_from(TYPED[t])) for t in draw(st.lists(st.sampled_from(sorted(TYPED)), min_size=1,
                                                                      max_size=2))]
    branches = [f"SELECT {e}{_from(e)}" for e in typed] + [f"SELECT {lit}" for lit in draw(
        st.lists(st.sampled_from(LITERALS), min_size=1, max_size=3))]
    order = draw(st.permutations(branches))
    sql = order[0]
    for b in order[1:]:
        # (a text opening with two parentheses, ((SELECT NULL) UNION ...), is not bound by the
        # catalog: a limitation of its own, not drawn here)
        part = draw(st.sampled_from([b, f"({b})"]))
        whole = f"({sql})" if not sql.startswith("(") and draw(st.booleans()) else sql
        sql = f"{whole} {draw(st.sampled_from(OPS))} {part}"
    return sql


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=setop_queries())
def test_generated_set_operations_never_answer_otherwise(both, sql):
    kind, detail = outcome(both, sql)
    assert kind in ("match", "both fail", "refused"), f"{sql}: {kind}: {detail}"


# ----------------------------------------------------------------------------- views

def test_views_equal_postgresql(pg):
    tables = ["CREATE TABLE t (k INT, s TEXT, f DOUBLE PRECISION)", "INSERT INTO t VALUES (1, 'a', 0.5), (2, NULL, 2.5)"]
    bodies = ["SELECT k FROM t UNION SELECT '5'",
              "SELECT k, s FROM t UNION ALL SELECT '7', 'z'",
              "SELECT f FROM t EXCEPT SELECT '2.5'",
              "SELECT a * 2 AS b FROM (SELECT k AS a FROM t UNION ALL SELECT '3') q WHERE a > 1"]
    script = ["INSERT INTO t VALUES (5, 'b', 1.0), (3, 'c', 2.5)", "DELETE FROM t WHERE k = 1"]
    assert views_equal_postgres(pg, tables, bodies, script) == len(bodies) * (len(script) + 1)
