"""``colmz.sql.transforms``: the table of call transforms, applied on DuckDB's parse tree."""

from __future__ import annotations

import pytest

from colmz.sql import UnsupportedSQL, connect, parse_tree, translate
from colmz.sql.tokens import tokenize
from colmz.sql.transforms import apply_transforms, may_transform


@pytest.fixture(scope="module")
def con():
    return connect()


def test_a_quoted_call_name_gets_postgresqls_meaning(con):
    # "lpad"(...) is the same function as lpad(...) in PostgreSQL: padded with spaces, and
    # "btrim" is DuckDB's trim (the call is matched on the tree, not on a bare word).
    got = con.sql(translate("SELECT \"lpad\"('ab', 4), \"btrim\"('xyx', 'x'), \"every\"(b) "
                            "FROM (VALUES (true), (false)) v(b)")).fetchall()
    assert got == [("  ab", "y", False)]


def test_calls_nest_and_sit_under_operators(con):
    # A node starting at a call's name is that call only when its own name is the call's
    # (f(x) * 2 is a multiplication node starting there); nested calls are rewritten inside
    # out, in one reading.
    rows = con.sql(translate("SELECT generate_series(1, 3) * 2 AS g ORDER BY g")).fetchall()
    assert rows == [(2,), (4,), (6,)]
    assert con.sql(translate("SELECT rpad(lpad(btrim(' a '), 2), 3) || '|'")).fetchall() == [(" a |",)]
    assert con.sql(translate("SELECT (SELECT lpad('x', 2)) WHERE EXISTS (SELECT every(true))")).fetchall() \
        == [(" x",)]


def test_a_predicate_is_read_as_one_expression(con):
    # translate() also rewrites bare expressions (continual tasks' predicates).
    assert translate("k > 1 AND lpad(s, 2) = ' a'") == "k > 1 AND lpad(s, 2, ' ') = ' a'"


def test_set_returning_calls_in_conditionals_are_refused_on_the_tree():
    for sql, inside in [("SELECT greatest(generate_series(1, 2), 0)", "greatest()"),
                        ("SELECT coalesce(1, CASE WHEN true THEN generate_series(1, 2) END)", "CASE")]:
        with pytest.raises(UnsupportedSQL, match=rf"generate_series\(\) inside {inside}"):
            translate(sql)
    # its own subquery is not inside the CASE around it
    assert "unnest(generate_series(1, 2))" in translate(
        "SELECT CASE WHEN true THEN (SELECT max(g) FROM (SELECT generate_series(1, 2) AS g) s) END")


def test_the_tree_is_read_only_for_texts_calling_a_name_of_the_table():
    # The cost of a text without such a call is a scan of its tokens: no parse by DuckDB.
    before = parse_tree.cache_info()
    sql = ("SELECT a, max(b), t1.x::date FROM t, t1 WHERE \"rounded\" > 1 AND pad IS NULL "
           "AND (a) = 2 GROUP BY a")
    assert not may_transform(sql, tokenize(sql)) and apply_transforms(sql, tokenize(sql)) == sql
    after = parse_tree.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert all(may_transform(s, tokenize(s)) for s in ("SELECT ROUND (x)", 'SELECT "lpad"(x, 2)', "SELECT 1.5",
                                          "SELECT a LIKE b", "SELECT (a, b) = (1, 2)", "SELECT x::numeric",
                                          "SELECT x::int", "SELECT CAST(x AS text)"))


def test_row_comparisons_give_postgresqls_answers(con):
    # Field by field: the first unequal or NULL pair decides; IN is the OR of the rows'
    # equalities; a row IS NULL when every field is. The NOT of a NOT IN and its IN are one
    # node's span in the tree, rewritten once.
    got = con.sql(translate(
        "SELECT (1, NULL) = (1, 2), (1, NULL) <> (2, 2), (1, 2) < (1, 3), (1, NULL) < (2, 0), "
        "(1, 2) NOT IN ((1, 2), (3, 4)), ROW(NULL, NULL) IS NULL, (1, NULL) IS NOT NULL, "
        "(lpad('a', 2), 1) = (' a', 1)")).fetchall()
    assert got == [(None, True, True, True, False, True, False, True)]
    with pytest.raises(UnsupportedSQL, match="with a subquery"):
        translate("SELECT (1, 2) = (SELECT 1, 2)")
    with pytest.raises(UnsupportedSQL, match="nested rows"):
        translate("SELECT (1, (2, 3)) = (1, (2, 3))")


def test_row_comparisons_that_would_repeat_a_volatile_call_are_refused(con):
    # (random(), 1) < (0.5, 2) compares field by field in a CASE that names each field up to
    # three times: random() would be drawn again each time, where PostgreSQL draws it once.
    for sql in ["SELECT (random(), 1) < (0.5, 2)", "SELECT (random(), 1) IN ((0.5, 1), (0.7, 1))"]:
        with pytest.raises(UnsupportedSQL, match=r"volatile call \(random\(\)\)"):
            translate(sql)
    # = and a one-row IN name each field once
    assert con.sql(translate("SELECT (random() < 2, 1) = (true, 1), (random() < 2, 1) IN ((true, 1))")).fetchall() \
        == [(True, True)]


def test_float_and_bytea_types_are_read_off_the_tree(con):
    # float is float8 wherever the tree has it as a type, a typed literal too (DuckDB's FLOAT
    # is 4 bytes: float '1.1' would not equal 1.1::float8); float(24) is left as written.
    # CAST(... AS bytea) of a string reads PostgreSQL's hex input as '...'::bytea does.
    got = con.sql(translate(r"SELECT float '1.1' = 1.1::float8, CAST(1.1 AS float) = 1.1::float8, "
                            r"CAST('\x0aff' AS bytea), 'ab'::bytea")).fetchall()
    assert got == [(True, True, b"\n\xff", b"ab")]
    assert translate("SELECT z::float(24), x AS float FROM t") == "SELECT z::float(24), x AS float FROM t"
    with pytest.raises(UnsupportedSQL, match="cast to bytea of anything but a string literal"):
        translate("SELECT CAST(b AS bytea) FROM t")
