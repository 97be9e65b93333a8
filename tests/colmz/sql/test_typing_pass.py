"""The typing pass (``colmz.sql.typing_pass``): each node's type from the relations' column
kinds and the one type table, through subqueries, CTEs, set operations, CASE / coalesce
results, VALUES lists and JOIN sides; and the jsonb rules that hang on it (a CASE's, a scalar
subquery's, an IN subquery's jsonb compared as jsonb; USING / NATURAL merging jsonb refused
by name), checked against the answers PostgreSQL 15 gives over the same rows (each
expected list was read from PostgreSQL 15 over these rows)."""

from __future__ import annotations

import pytest

import colmz
from colmz.sql import UnsupportedSQL
from colmz.sql.transforms import table_refs
from colmz.sql.tree import parse_tree
from colmz.sql.typing_pass import TYPE_TABLE, Resolver, Typer, common_kind, type_kind


def typed(text: str, rels: dict) -> Typer:
    resolver = Resolver(text, rels, {})
    for q in parse_tree(text):
        resolver.query(q, [], {})
    return Typer(text, resolver.out, {}, items=resolver.items)


def item_kinds(text: str, rels: dict) -> list:
    t = typed(text, rels)
    return [t.kind(e) for e in parse_tree(text)[0].items]


RELS = {"t": {"k": "exact", "r": "real", "f": "double", "j": "jsonb", "s": "text"},
        "u": {"k": "exact", "j": "jsonb", "x": "double"}}


def test_type_table_is_postgresqls_categories():
    assert [type_kind(t) for t in ("int4", "BIGINT", "numeric(12, 2)", "float4", "float(30)", "double precision",
                                   "jsonb", "json", "varchar", "boolean", "timestamptz", "uuid", "int(3, 4, 5)")] == [
        "exact", "exact", "exact", "real", "double", "double", "jsonb", "json", "text", "bool", "datetime", None, None]
    assert set(TYPE_TABLE.values()) == {"exact", "jsonb", "json", "text", "bool", "datetime"}
    # PostgreSQL's select_common_type over numbers; another kind only with itself
    assert [common_kind(s) for s in ({"exact", "real"}, {"real", "double"}, {"exact"}, {"jsonb"},
                                     {"jsonb", "text"}, {"exact", None}, set())] == [
        "real", "double", "exact", "jsonb", None, None, None]


@pytest.mark.parametrize("text, kinds", [
    ("SELECT k, r + 1, f * k, j, s FROM t", ["exact", "double", "double", "jsonb", "text"]),
    # through a FROM subquery, a CTE, AS t(a, b) and a set operation's common type
    ("SELECT a, b FROM (SELECT r, j FROM t) AS s(a, b)", ["real", "jsonb"]),
    ("WITH c AS (SELECT r AS v FROM t UNION ALL SELECT f FROM t) SELECT v FROM c", ["double"]),
    ("SELECT column1, column2 FROM (VALUES (1, CAST('1' AS JSON)), (2.5, NULL)) v", ["exact", None]),
    # CASE, coalesce (a NULL and a string literal take the others' type), a scalar subquery
    ("SELECT CASE WHEN k > 0 THEN j ELSE CAST('1' AS JSON) END, coalesce(j, '0'), coalesce(r, 1) FROM t",
     ["jsonb", "jsonb", "real"]),
    ("SELECT (SELECT max(x) FROM u), (SELECT j FROM u LIMIT 1) FROM t", ["double", "jsonb"]),
    # a qualified reference by its FROM item; an ambiguous one not typed
    ("SELECT t.j, u.x, k FROM t, u", ["jsonb", "double", None]),
    # JOIN ... USING / NATURAL sides and an IN subquery's output
    ("SELECT j IN (SELECT j FROM u), x FROM t JOIN u USING (k)", [None, "double"]),
])
def test_items_are_typed_once(text, kinds):
    assert item_kinds(text, RELS) == kinds


def test_from_items_columns_are_kept_for_the_rules():
    text = "SELECT 1 FROM t JOIN (SELECT k, j AS i FROM u) s USING (k)"
    t = typed(text, RELS)
    cols = {r.type: t.items.get((r.start, r.end)) for r in table_refs(parse_tree(text)[0]) if r.type != "JOIN"}
    assert cols == {"BASE_TABLE": RELS["t"], "SUBQUERY": {"k": "exact", "i": "jsonb"}}


def test_derived_names_typed_without_a_fixpoint_loop():
    # a name defined through another derived name is typed through it; a cycle is not typed
    from colmz.sql.column_rules import column_type_rules

    cols = frozenset({("r", "real")})
    chained = "SELECT b + 1 FROM (SELECT a AS b FROM (SELECT r AS a FROM t) x) y, generate_series(1, 2) g"
    assert "CAST(b AS DOUBLE)" in column_type_rules(chained, (), ("float",), cols)
    cycle = "SELECT a + 1 FROM (SELECT b AS a FROM x) p, (SELECT a AS b FROM y) q"
    assert column_type_rules(cycle, (), ("float",), cols) == cycle


@pytest.fixture(scope="module")
def cat():
    c = colmz.Catalog()
    c.execute("CREATE TABLE jn (id INT, j JSONB)")
    c.execute("""INSERT INTO jn VALUES (1, '1'), (2, '1.0'), (3, '10'), (4, '[1.00]'), (5, '[1]'), (6, NULL),
                 (7, '{"a": 2.50}'), (8, '{"a": 2.5}')""")
    return c


def ids(cat, sql):
    return [tuple(r.values()) for r in cat.sql(sql).to_pylist()]


# each answer is PostgreSQL 15's over the same rows
@pytest.mark.parametrize("sql, want", [
    ("SELECT id FROM jn WHERE j IN (SELECT j FROM jn WHERE id IN (1, 4, 7)) ORDER BY id",
     [(1,), (2,), (4,), (5,), (7,), (8,)]),
    ("SELECT id FROM jn WHERE j NOT IN (SELECT j FROM jn WHERE id = 2) ORDER BY id",
     [(3,), (4,), (5,), (7,), (8,)]),
    ("SELECT id, j = ANY (SELECT j FROM jn WHERE id = 5) AS a FROM jn WHERE id < 6 ORDER BY id",
     [(1, False), (2, False), (3, False), (4, True), (5, True)]),
    ("SELECT id FROM jn a WHERE j IN (SELECT b.j FROM jn b WHERE b.id <> a.id) ORDER BY id",
     [(1,), (2,), (4,), (5,), (7,), (8,)]),
    ("SELECT id, CASE j WHEN '1' THEN 'a' WHEN '[1]' THEN 'b' WHEN '{\"a\": 2.5}' THEN 'c' END AS c FROM jn ORDER BY id",
     [(1, "a"), (2, "a"), (3, None), (4, "b"), (5, "b"), (6, None), (7, "c"), (8, "c")]),
    ("SELECT id FROM jn WHERE CASE WHEN id > 1 THEN j END = '1' ORDER BY id", [(2,)]),
    ("SELECT id FROM jn WHERE coalesce(j, '1.00') = '1' ORDER BY id", [(1,), (2,), (6,)]),
    ("SELECT id FROM jn WHERE (SELECT j FROM jn WHERE id = 2) = j ORDER BY id", [(1,), (2,)]),
    ("SELECT count(DISTINCT j) AS n FROM jn", [(4,)]),
    ("SELECT count(*) AS n, min(id) AS m FROM jn GROUP BY j ORDER BY m", [(2, 1), (1, 3), (2, 4), (1, 6), (2, 7)]),
    ("SELECT id, count(*) OVER (PARTITION BY j) AS n FROM jn ORDER BY id",
     [(1, 2), (2, 2), (3, 1), (4, 2), (5, 2), (6, 1), (7, 2), (8, 2)]),
])
def test_jsonb_compared_as_jsonb(cat, sql, want):
    assert ids(cat, sql) == want


@pytest.mark.parametrize("sql, word", [
    ("SELECT a.id FROM jn a JOIN jn b USING (j)", "JOIN ... USING merging the jsonb column \"j\""),
    ("SELECT a.id FROM (SELECT id, j FROM jn) a NATURAL JOIN (SELECT j FROM jn) b", "NATURAL JOIN merging"),
    ("SELECT id FROM jn WHERE j > ALL (SELECT j FROM jn WHERE id = 1)", "ALL \\(subquery\\)"),
    # a grouped jsonb value shown: PostgreSQL keeps one of the group's texts
    ("SELECT j, count(*) FROM jn GROUP BY j", "trailing zeros"),
])
def test_refused_by_name(cat, sql, word):
    with pytest.raises(UnsupportedSQL, match=word):
        cat.sql(sql)


def test_translates_jsonb_cast_is_jsonb_and_a_written_json_cast_is_json():
    # translate writes every jsonb value as CAST(... AS JSON); a cast the user wrote to json
    # stays as written, and PostgreSQL's json is not jsonb (kept as written, no equality)
    from colmz.sql.tree import parse_tree
    from colmz.sql.typing_pass import Typer

    for text, kind in (("SELECT CAST('{}' AS JSON)", "jsonb"), ("SELECT '{}'::json", "json"),
                       ("SELECT CAST('{}' AS json)", "json"), ("SELECT '{}'::jsonb", "jsonb")):
        item = parse_tree(text)[0].items[0]
        assert Typer(text, {}, {}).kind(item) == kind, text


@pytest.mark.parametrize(("text", "arrays"), [
    # through a CTE, a set operation (a NULL beside arrays is one), a star, VALUES, an outer FROM
    ("WITH c AS (SELECT ARRAY[1] AS a UNION ALL SELECT NULL) SELECT a[1:] FROM c", ["a"]),
    ("WITH c AS (SELECT NULL AS a UNION ALL SELECT NULL) SELECT a[1:] FROM c", []),
    ("WITH c AS (SELECT ARRAY[1] AS a UNION ALL SELECT 1) SELECT a[1:] FROM c", []),
    ("WITH c AS (SELECT ARRAY[1] AS a), d AS (SELECT * FROM c) SELECT a[1:], ARRAY[a] FROM d", ["a", "a"]),
    ("SELECT x[1:] FROM (VALUES (ARRAY[1]), (NULL)) AS v(x)", ["x"]),
    ("WITH c AS (SELECT ARRAY[1] AS a) SELECT (SELECT a[1:]) FROM c", ["a"]),
    # relations by the name the text writes, qualified too; AS t(b) renames by position
    ("SELECT a[1:], b[1:] FROM s.t", ["a"]),
    ("SELECT a[1:] FROM other.t", []),
    ("SELECT b[1:] FROM t AS x(b)", ["b"]),
    # not known: a FROM item whose columns are not (a table function), two items holding the
    # name, an ORDER BY expression's name that is also an output name (DuckDB reads the output)
    ("SELECT a[1:] FROM t, generate_series(1, 2) AS g", []),
    ("SELECT a[1:] FROM t, t AS u", []),
    ("WITH c AS (SELECT ARRAY[1] AS a) SELECT a[1:] AS a FROM c ORDER BY a[2:]", ["a"]),
])
def test_array_columns_resolve_as_the_typing_pass(text, arrays):
    from colmz.sql.typing_pass import array_columns

    rels = (("t", (("a", "array"), ("c", None))), ("s.t", (("a", "array"),)))
    spans = array_columns(parse_tree(text), text, rels)
    assert sorted(text[s:e] for s, e in spans) == arrays
