"""``colmz.sql.tree``: DuckDB's parse tree as colmz's nodes."""

from __future__ import annotations

import dataclasses

import pytest

from colmz.sql import SQLError
from colmz.sql.tree import check_expression, parse_tree


def test_spans_cover_each_node_and_its_children():
    text = "SELECT a IS NULL, x::INT, k IN (SELECT k FROM u), f(a, 'é') FROM t WHERE a BETWEEN 1 AND 2"
    q, = parse_tree(text)
    assert [text[e.start:e.end] for e in q.items] == ["a IS NULL", "x::INT", "k IN (SELECT k FROM u)", "f(a, 'é')"]
    assert text[q.where.start:q.where.end] == "a BETWEEN 1 AND 2"
    sub = q.items[2]
    assert sub.cls == "SUBQUERY" and sub.subquery.from_.name == ("u",)
    assert [(e.cls, e.name) for e in q.items[3].walk()] == [("FUNCTION", ("f",)), ("COLUMN_REF", ("a",)), ("CONSTANT", ())]
    # parentheses around a child are its parent's text; around the node itself, not
    text = "SELECT ((a + b))::text, (a) NOT IN ((1), 2), f((x)), ((y))"
    q, = parse_tree(text)
    assert [text[e.start:e.end] for e in q.items] == ["((a + b))::text", "(a) NOT IN ((1), 2)", "f((x))", "y"]


def test_a_bound_left_out_of_a_slice_has_no_span():
    # DuckDB's tree holds an empty list_value() for it, the upper one placed at the ':'
    text = "SELECT a[2:], a[:3], a[ : ], a[[]:1] FROM t"
    q, = parse_tree(text)
    assert [text[e.start:e.end] for e in q.items] == ["a[2:]", "a[:3]", "a[ : ]", "a[[]:1]"]
    assert all(e.type == "ARRAY_SLICE" for e in q.items)
    bounds = [[(k.name, k.start, k.end) for k in e.children[1:]] for e in q.items]
    absent = (("list_value",), -1, -1)
    assert bounds[0][1] == absent and bounds[1][0] == absent and bounds[2] == [absent, absent]
    assert text[bounds[3][0][1]:bounds[3][0][2]] == "[]"  # an empty list written is placed
    for e in q.items:
        assert all(check_expression(text[k.start:k.end], "p") for k in e.walk() if k.start >= 0)


def test_offsets_are_characters_not_bytes():
    text = "SELECT 'ééé' || x AS y, z"
    q, = parse_tree(text)
    assert [text[e.start:e.end] for e in q.items] == ["'ééé' || x", "z"]
    assert q.items[0].alias == "y"


def test_queries_set_operations_ctes_and_tables():
    a, b = parse_tree("WITH w AS (SELECT 1 AS k) SELECT k FROM w UNION ALL SELECT 2 ORDER BY 1; "
                      "SELECT * FROM s.t AS x JOIN u ON x.k = u.k GROUP BY ALL")
    assert a.type == "SET_OPERATION_NODE" and (a.setop, a.setop_all) == ("UNION", True)
    assert len(a.children) == 2 and [m.type for m in a.modifiers] == ["ORDER_MODIFIER"]
    assert [name for name, _ in a.ctes] == ["w"]
    j = b.from_
    assert j.type == "JOIN" and [c.name for c in j.children] == [("s", "t"), ("u",)]
    assert j.children[0].alias == "x" and j.expressions[0].type == "COMPARE_EQUAL"
    assert b.aggregate_handling == "FORCE_AGGREGATES"


def test_nodes_are_frozen_and_cached():
    q1, = parse_tree("SELECT 1")
    assert parse_tree("SELECT 1")[0] is q1
    with pytest.raises(dataclasses.FrozenInstanceError):
        q1.items[0].cls = "X"


def test_errors_are_sqlerror_and_type_checked():
    with pytest.raises(SQLError, match="syntax error"):
        parse_tree("SELECT FROM WHERE")
    with pytest.raises(SQLError, match="Only SELECT"):
        parse_tree("DELETE FROM t")
    with pytest.raises(TypeError, match="text must be a str of SQL text, got bytes"):
        parse_tree(b"SELECT 1")
    with pytest.raises(TypeError, match="p must be a str of SQL text, got NoneType"):
        check_expression(None, "p")


def test_check_expression_counts_only_comments_and_parentheses_outside():
    assert check_expression("((k = 1)) /* a /* b */ c */ -- d\r", "p").type == "COMPARE_EQUAL"
    with pytest.raises(SQLError, match="reaching outside"):
        check_expression("1) OR (2 = 2", "p")  # DuckDB places the OR at the wrapping parenthesis
    with pytest.raises(SQLError, match="'WINDOW w AS"):
        check_expression("1) WINDOW w AS (", "p")
    with pytest.raises(SQLError, match="reaching outside"):
        check_expression(") OR (", "p")  # the wrapping parentheses are not the predicate's
    with pytest.raises(SQLError, match="empty"):
        check_expression(" \n", "p")


def test_a_tree_too_deep_to_read_is_refused_by_name():
    # DuckDB nests a || chain one level per operator; Python's JSON reader recursed past
    # its limit (a raw RecursionError) on some hundred.
    from colmz.sql import UnsupportedSQL

    deep = " || ".join(["a"] * 600)  # DuckDB itself refuses past 1000
    with pytest.raises(UnsupportedSQL, match="nested deeper than colmz reads DuckDB's parse tree"):
        parse_tree("SELECT " + deep)
    with pytest.raises(UnsupportedSQL, match="nested deeper"):
        check_expression(deep + " = 'x'", "p")
    assert check_expression(" AND ".join(["a"] * 2000), "p").type == "CONJUNCTION_AND"  # flat


def test_every_span_of_the_corpus_is_one_expression():
    # A node's span is all of its text (its children's parentheses included, as in
    # (a + b)::text): cut out of the dialect corpus's queries, each is one expression again.
    # DuckDB's simple CASE (CASE x WHEN v ...) makes comparisons x = v of no text of their own.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2]))
    from sql_corpus import QUERIES

    def expressions(q):
        yield from q.items
        yield from (e for e in (q.where, q.having, q.qualify) if e is not None)
        yield from q.group_by
        for m in q.modifiers:
            yield from m.expressions
        for c in (*q.children, *(c for _, c in q.ctes)):
            yield from expressions(c)

    checked = 0
    for _, text in QUERIES:
        try:
            stmts = parse_tree(text)
        except SQLError:  # jsonb operators DuckDB does not parse
            continue
        for q in stmts:
            for top in expressions(q):
                for e in top.walk():
                    frag = text[e.start:e.end]
                    if e.start < 0 or e.cls in ("TYPE", "STAR") or frag.split()[1:2] == ["WHEN"]:
                        continue
                    if " WINDOW " in text.upper() and "OVER" in frag.upper():
                        continue  # a call over a named window: alone, without WINDOW w AS (...)
                    assert check_expression(frag, "p") is not None, frag
                    checked += 1
    assert checked > 1500


# ---------------------------------------------------------------- what a relational plan reads


def test_join_type_and_reference_kind():
    q, = parse_tree("SELECT * FROM t LEFT JOIN u ON t.k = u.k, v")
    comma = q.from_
    assert (comma.join_type, comma.ref_type, comma.implicit) == ("INNER", "CROSS", True)
    left = comma.children[0]
    assert (left.join_type, left.ref_type, left.implicit) == ("LEFT", "REGULAR", False)
    kinds = {}
    for sql, want in [("t JOIN u ON a = b", ("INNER", "REGULAR")), ("t INNER JOIN u ON a = b", ("INNER", "REGULAR")),
                      ("t RIGHT JOIN u ON a = b", ("RIGHT", "REGULAR")),
                      ("t FULL OUTER JOIN u ON a = b", ("FULL", "REGULAR")),
                      ("t CROSS JOIN u", ("INNER", "CROSS")), ("t NATURAL JOIN u", ("INNER", "NATURAL"))]:
        j = parse_tree(f"SELECT * FROM {sql}")[0].from_
        kinds[sql] = (j.join_type, j.ref_type)
        assert kinds[sql] == want, sql
        assert not j.implicit
    j = parse_tree("SELECT * FROM t JOIN u USING (a, b)")[0].from_
    assert j.using == ("a", "b") and j.expressions == ()
    assert parse_tree("SELECT * FROM t AS x(a, b)")[0].from_.column_aliases == ("a", "b")
    assert parse_tree("SELECT * FROM t")[0].from_.join_type == ""


def test_order_by_direction_and_nulls_and_limit():
    q, = parse_tree("SELECT a FROM t ORDER BY a DESC NULLS FIRST, b ASC, c NULLS LAST LIMIT 5 OFFSET 2")
    order, limit = q.modifiers
    assert [(o.expression.name, o.direction, o.nulls) for o in order.orders] == [
        (("a",), "DESCENDING", "NULLS FIRST"), (("b",), "ASCENDING", "ORDER_DEFAULT"),
        (("c",), "ORDER_DEFAULT", "NULLS LAST")]
    assert order.expressions == tuple(o.expression for o in order.orders)  # unchanged
    assert (limit.limit.literal.value, limit.offset.literal.value) == (5, 2)
    q, = parse_tree("SELECT a FROM t OFFSET 4")
    assert q.modifiers[0].limit is None and q.modifiers[0].offset.literal.value == 4


def test_aggregate_distinct_filter_and_order_flags():
    text = "SELECT count(DISTINCT x) FILTER (WHERE y > 1), sum(x), string_agg(s, ',' ORDER BY y DESC) FROM t"
    a, b, c = parse_tree(text)[0].items
    assert a.distinct and a.filter is not None and text[a.filter.start:a.filter.end] == "y > 1"
    assert a.filter in a.children  # still among the children, as before
    assert not b.distinct and b.filter is None and b.order_by == ()
    assert [(o.expression.name, o.direction) for o in c.order_by] == [(("y",), "DESCENDING")]
    # a column or an operator carries none of them
    assert not parse_tree("SELECT x")[0].items[0].distinct


def test_constant_values_and_kinds():
    import decimal

    items = parse_tree("SELECT 1, -3, 10000000000, 1.5, 1e3, 'it''s', true, false, NULL")[0].items
    assert [e.literal.kind for e in items] == ["INTEGER", "INTEGER", "INTEGER", "NUMERIC", "NUMERIC",
                                               "STRING", "BOOLEAN", "BOOLEAN", "NULL_LITERAL"]
    assert [e.literal.value for e in items] == [1, -3, 10000000000, decimal.Decimal("1.5"), decimal.Decimal("1e3"),
                                                "it's", True, False, None]
    assert parse_tree("SELECT x")[0].items[0].literal is None
    cast = parse_tree("SELECT DATE '2020-01-01'")[0].items[0]
    assert cast.cls == "CAST" and cast.children[0].literal.kind == "STRING"


def test_star_relation_and_modifiers():
    a, b, c = parse_tree("SELECT t.*, *, * EXCLUDE (k) FROM t")[0].items
    assert (a.relation, a.star_modified) == ("t", False)
    assert (b.relation, b.star_modified) == ("", False)
    assert c.star_modified


def test_a_call_over_a_named_window_spans_the_call_only():
    # DuckDB copies WINDOW w's PARTITION BY and ORDER BY into each call over w, positioned in
    # the WINDOW clause: they are the call's children but not part of its text.
    text = ("SELECT id, sum(age) OVER w AS s, 1 + 2 AS k, lag(x, 1) OVER (w ROWS 1 PRECEDING) "
            "FROM people WINDOW w AS (PARTITION BY city ORDER BY id)")
    q, = parse_tree(text)
    spans = [text[e.start : e.end] for e in q.items]
    assert spans == ["id", "sum(age) OVER w", "1 + 2", "lag(x, 1) OVER (w ROWS 1 PRECEDING)"]
    assert sorted(text[c.start : c.end] for c in q.items[1].children) == ["age", "city", "id"]


def test_a_window_call_holds_its_partitions_order_and_frame():
    from colmz.sql.shapes import remap_tree
    from colmz.sql.tree import read_tree

    text = "SELECT rank() OVER (PARTITION BY g, h ORDER BY v DESC NULLS FIRST, w) AS r FROM t"
    w = parse_tree(text)[0].items[0]
    assert w == read_tree(text)[0].items[0]  # colmz's own reading of the call is DuckDB's
    over = w.over
    assert [p.name for p in over.partitions] == [("g",), ("h",)]
    assert [(o.expression.name, o.direction, o.nulls) for o in over.orders] == [
        (("v",), "DESCENDING", "NULLS FIRST"), (("w",), "ORDER_DEFAULT", "ORDER_DEFAULT")]
    assert over.partitions[0] is w.children[0] and over.orders[0].expression is w.children[2]  # the same nodes
    assert (over.start, over.end, over.exclude, over.ignore_nulls) == ("UNBOUNDED_PRECEDING", "CURRENT_ROW_RANGE",
                                                                      "NO_OTHER", False)
    framed = parse_tree("SELECT sum(x) OVER (ORDER BY v ROWS BETWEEN 2 PRECEDING AND CURRENT ROW "
                        "EXCLUDE CURRENT ROW) FROM t")[0].items[0].over
    assert (framed.start, framed.end, framed.exclude) == ("EXPR_PRECEDING_ROWS", "CURRENT_ROW_ROWS", "CURRENT_ROW")
    assert parse_tree("SELECT f(x) FROM t")[0].items[0].over is None
    # a tree remapped to a text of the same shape moves the window's nodes with the rest
    text = "SELECT rank() OVER (PARTITION BY g, h ORDER BY v DESC NULLS FIRST, w) + 1 AS r FROM t WHERE x = 5"
    other = "SELECT rank() OVER (PARTITION BY g, h ORDER BY v DESC NULLS FIRST, w) + 1 AS r FROM t WHERE x = 12345"
    moved = remap_tree(other, text, read_tree(text))
    assert moved is not None and moved == read_tree(other)
    assert moved[0].items[0].children[0].over.orders[1].expression.start == other.index("w)")
    assert parse_tree("SELECT * FROM t TABLESAMPLE 10%")[0].from_.modified
    assert not parse_tree("SELECT * FROM t")[0].from_.modified


def test_a_negation_is_known_one_expression_without_a_parse():
    # Work counter: NOT (p) of a checked p is not parsed again (parse_tree is not asked).
    from colmz.sql import clear_caches
    from colmz.sql.tree import negation, require_expression

    clear_caches()
    out = negation("ts + INTERVAL '2s' > mz_now() /* c */", "predicate")
    misses = parse_tree.cache_info().misses
    require_expression(out, "predicate")
    assert parse_tree.cache_info().misses == misses
    with pytest.raises(SQLError, match="reaching outside"):  # p itself must be one
        negation("1) OR (2", "predicate")


_PIECES = ["a", "1", " ", "(", ")", ",", "'x)'", '"q("', "/* ) */", "-- c\n", "NOT", "AND", "=", "+", ";",
           "SELECT", "FROM", "AS", "::int", "[1]", "IN", "EXISTS"]


@pytest.mark.parametrize("seed", range(3))
def test_a_negation_is_one_expression_as_duckdb_reads_it(seed):
    # What negation knows is what DuckDB's check decides: for texts that are one expression,
    # NOT (text) is read by DuckDB as one expression too.
    import random

    from colmz.sql import clear_caches
    from colmz.sql.tree import _one_expression, require_expression

    rnd = random.Random(seed)
    ones = 0
    for _ in range(150):
        text = "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(1, 8)))
        try:
            require_expression(text, "p")
        except SQLError:
            continue
        ones += 1
        clear_caches()
        assert _one_expression(f"NOT ({text})") is None, text
    assert ones > 10


_WRITTEN = [
    ("t", ["k", "v"], {"v": "v || '!'", "k": "k + 1"}, "k BETWEEN 3 AND 7"),
    (("x", 'we"ird'), ["a", 'b"c', "d"], {"d": "(SELECT max(k) FROM u WHERE u.k = a)", "a": "a::text"}, None),
    ("é", ["ü", "v"], {"v": "'é' || v"}, "ü IN (1, 2) AND v LIKE 'x%'"),
    ("t", ["k"], {"k": "count(*) FILTER (WHERE k > 1)"}, "k = 1 /* c ) */"),
    ("t", ["k", "v"], {"v": "CASE WHEN k > 1 THEN v ELSE (v, 1) END"}, "NOT (k IN (SELECT k FROM u)) OR v IS NULL"),
    ("t", ["k", "v"], {"k": "-k * 2 % 3", "v": "upper(v) || lower(v)"}, "(k) = ANY (SELECT 1)"),
]


@pytest.mark.parametrize("case", _WRITTEN)
def test_a_written_select_has_the_tree_duckdb_gives_it(case, monkeypatch):
    # update_select and select_where note how their texts are made: the tree asked for is
    # made from the checks' trees (offsets moved) -- the tree DuckDB gives the text -- and
    # colmz's reader does not read the text again when every check's tree was its own.
    from colmz.sql import clear_caches, grammar
    from colmz.sql.build import select_where, update_select
    from colmz.sql.tree import read_tree

    table, columns, assigned, predicate = case
    real = grammar.read_query
    read: list[str] = []

    def counted(t):
        read.append(t)
        return real(t)

    for make in (lambda: update_select(table, columns, assigned, predicate), lambda: select_where(table, predicate)):
        clear_caches()
        text = make()
        read.clear()
        monkeypatch.setattr(grammar, "read_query", counted)
        got = parse_tree(text)
        monkeypatch.setattr(grammar, "read_query", real)
        assert got == read_tree(text), text
        pieces = [*assigned.values(), *([predicate] if predicate else [])]
        if all(real(f"SELECT ({p})") is not None for p in pieces):
            assert text not in read, text  # made, not read
