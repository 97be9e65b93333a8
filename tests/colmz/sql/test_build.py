"""``colmz.sql.build``: the one quoting of names and values, and the statements colmz writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from colmz.sql import (
    SQLError,
    cast_select,
    connect,
    create_table,
    identifier,
    literal,
    select_where,
    tokenize,
    update_select,
)

SPECIAL = "\"'.;<>\n\\ $-/*()éß日本\t"
texts = st.text(alphabet=st.sampled_from(list(SPECIAL) + list("aZ0_")), min_size=1, max_size=16)


@settings(max_examples=60, deadline=None)
@given(texts)
def test_identifier_and_literal_are_one_token_that_duckdb_reads_back(text):
    ident, lit = identifier(text), literal(text)
    (tok,) = tokenize(ident)
    assert tok.kind == "qident" and tok.name == text
    (tok,) = tokenize(lit)
    assert tok.kind == "string" and tok.text == lit
    con = connect()
    rel = con.sql(f"SELECT {lit} AS {ident}")
    assert rel.columns == [text] and rel.fetchall() == [(text,)]


@settings(max_examples=30, deadline=None)
@given(texts, texts)
def test_create_table_names_every_table_and_column_exactly(table, column):
    ddl = create_table(table, [(column, "BIGINT"), ("k", "TEXT")])
    con = connect()
    assert len(con.extract_statements(ddl)) == 1  # no name can end the statement
    con.execute(ddl)
    rel = con.sql(f"SELECT * FROM {identifier(table)}")
    assert rel.columns == [column, "k"]


def test_literal_values():
    con = connect()
    got = con.sql(f"SELECT {literal(None)}, {literal(True)}, {literal(-3)}, {literal(2.5)}, "
                  f"{literal(float('inf'))}, {literal('')}").fetchall()
    assert got == [(None, True, -3, 2.5, float("inf"), "")]
    for bad in ["a\x00b", b"bytes", object()]:
        with pytest.raises(SQLError):
            literal(bad)
    for bad in ["", "a\x00", 3]:
        with pytest.raises(SQLError, match="identifier"):
            identifier(bad)


def test_statements_take_user_text_only_as_one_expression():
    assert select_where("t") == 'SELECT * FROM "t"'
    assert select_where('a"b', "k = ';'") == 'SELECT * FROM "a""b" WHERE (k = \';\')'
    for bad in ["1=0); COPY (SELECT 42) TO 'f.csv'; SELECT * FROM t WHERE (1=0",
                "1=0) UNION SELECT 1 --", "k = 1; DROP TABLE t", "x) OR (1=1"]:
        with pytest.raises(SQLError, match="DELETE FROM t: predicate"):
            select_where("t", bad)
    assert update_select("t", ["k", "v"], {"k": "k + 1"}) == 'SELECT (k + 1) AS "k", "v" FROM "t"'
    with pytest.raises(SQLError, match=r"UPDATE t: value of 'k'"):
        update_select("t", ["k"], {"k": "1); SET integer_division = false; SELECT (1"})
    with pytest.raises(SQLError, match="UPDATE t: predicate"):
        update_select("t", ["k"], {"k": "1"}, "1=1; SELECT 1")
    with pytest.raises(SQLError, match="no column 'x'"):
        update_select("t", ["k"], {"x": "1"})
    assert cast_select("v", [("a b", "TIMESTAMP WITH TIME ZONE")]) == \
        'SELECT CAST("v"."a b" AS TIMESTAMP WITH TIME ZONE) AS "a b" FROM "v"'
    with pytest.raises(SQLError, match="type name"):
        cast_select("v", [("a", "INT); SELECT (1")])
