"""colmz.sql.jsonb: PostgreSQL's jsonb functions and operators, initcap (and regexp_match, colmz.sql.pgfuncs').

The answers are PostgreSQL 15's (checked against a real server by the dialect corpus,
``tests/sql_corpus.py``'s ``jf_*`` queries); here: the Python functions, the catalog's
answers of each family, refusals by name, and each family inside a materialized view kept
equal to the query recomputed after inserts, deletes and updates.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("duckdb")

import colmz  # noqa: E402
from colmz.sql import UnsupportedSQL  # noqa: E402
from colmz.sql.jsonb import initcap, jsonb_contains, jsonb_exists, jsonb_path  # noqa: E402
from colmz.sql.pgfuncs import regexp_match  # noqa: E402

ROWS = """INSERT INTO d VALUES (1, '{"a": 1, "b": {"c": "x"}, "tags": ["p", "q"]}', 'hello wORLD'),
    (2, '{"a": 2.50, "tags": []}', 'ab12cd'), (3, NULL, NULL)"""


@pytest.fixture
def cat():
    c = colmz.Catalog()
    c.execute("CREATE TABLE d (k BIGINT, body JSONB, s TEXT)")
    c.execute(ROWS)
    return c


def col(cat, sql, name):
    return cat.sql(sql).column(name).to_pylist()


def test_python_functions():
    assert jsonb_path('{"a": [1, {"b": 1.50}]}', ["a", "1", "b"], False) == "1.50"
    assert jsonb_path('{"a": 1}', ["zz"], True) is None
    assert jsonb_exists('["a", {"b": 1}]', ["b"], "one") is False  # only string elements
    assert jsonb_contains('{"a": {"b": [1, 2], "c": 3}}', '{"a": {"b": [2]}}')
    assert not jsonb_contains('{"a": [1, 2]}', '{"a": 1}')  # a primitive only at the top level
    assert initcap("o'NEIL mc-DONALD x2y") == "O'Neil Mc-Donald X2y"
    assert regexp_match("abc", "(x)?b", "") == [None]


def test_typeof_paths_and_key_operators(cat):
    q = "SELECT k, jsonb_typeof(body -> 'a') AS t, body #>> '{b,c}' AS c, body #> '{tags,-1}' AS g FROM d ORDER BY k"
    assert col(cat, q, "t") == ["number", "number", None]
    assert col(cat, q, "c") == ["x", None, None]
    assert col(cat, q, "g") == ['"q"', None, None]
    q = "SELECT k, body ? 'tags' AS h, body ?| ARRAY['b', 'z'] AS a, body ?& '{a,tags}' AS l FROM d ORDER BY k"
    assert col(cat, q, "h") == [True, True, None]
    assert col(cat, q, "a") == [True, False, None]
    assert col(cat, q, "l") == [True, True, None]
    assert col(cat, "SELECT k FROM d WHERE body @> '{\"b\": {}}' ORDER BY k", "k") == [1]
    assert col(cat, "SELECT k FROM d WHERE '{\"a\": 2.5}' <@ body ORDER BY k", "k") == [2]


def test_builders_and_aggregates(cat):
    q = "SELECT jsonb_build_object('b', 1.0, 'a', 1e3, 'a', NULL, 'é', jsonb_build_array(true, 'x')) AS o"
    assert col(cat, q, "o") == ['{"a": null, "b": 1.0, "é": [true, "x"]}']
    q = "SELECT jsonb_agg(k ORDER BY k DESC) AS a, jsonb_object_agg(k::text, body -> 'a') AS o FROM d"
    assert col(cat, q, "a") == ["[3, 2, 1]"]
    assert col(cat, q, "o") == ['{"1": 1, "2": 2.50, "3": null}']
    assert col(cat, "SELECT jsonb_agg(k) AS a FROM d WHERE k > 9", "a") == [None]


def test_set_returning(cat):
    q = "SELECT k, key, value FROM d, jsonb_each_text(body) ORDER BY k, key"
    assert cat.sql(q).to_pylist()[:2] == [{"k": 1, "key": "a", "value": "1"}, {"k": 1, "key": "b", "value": '{"c": "x"}'}]
    q = "SELECT k, jsonb_array_elements(body -> 'tags') AS e FROM d ORDER BY k, e"
    assert col(cat, q, "e") == ['"p"', '"q"']
    assert col(cat, "SELECT e FROM d, jsonb_array_elements_text(body -> 'tags') AS e ORDER BY e", "e") == ["p", "q"]


def test_column_kinds_follow_subqueries(cat):
    # a text column through a subquery is still text: turned into jsonb, a JSON string
    assert col(cat, "SELECT jsonb_agg(x ORDER BY k) AS a FROM (SELECT k, s AS x FROM d) q", "a") == \
        col(cat, "SELECT jsonb_agg(s ORDER BY k) AS a FROM d", "a")


def test_refused_by_name(cat):
    for q, what in (("SELECT row_to_json(d) FROM d", "row_to_json"),
                    ("SELECT jsonb_agg(x) FROM (SELECT s::text || '' AS x FROM d) q", "turned into jsonb"),
                    ("SELECT body -> 'b' ? 'c' FROM d", "after jsonb's ->"),
                    ("SELECT jsonb_each(body) FROM d", "jsonb_each")):
        with pytest.raises(UnsupportedSQL, match=what):
            cat.sql(q)


VIEWS = [
    ("v1", "SELECT k, jsonb_typeof(body -> 'a') AS t, body #>> '{b,c}' AS c, body #> '{tags}' AS g FROM d"),
    ("v2", "SELECT k, body ? 'tags' AS h, body ?| ARRAY['b', 'z'] AS a, body @> '{\"a\": 1}' AS c FROM d"),
    ("v3", "SELECT k, jsonb_build_object('k', k, 'a', body -> 'a') AS o, jsonb_build_array(k, s::text) AS r FROM d"),
    ("v4", "SELECT k, jsonb_array_elements_text(body -> 'tags') AS e FROM d"),
    ("v5", "SELECT k, key, value FROM d, jsonb_each(body)"),
    ("v6", "SELECT k % 2 AS g, jsonb_agg(k ORDER BY k) AS a, jsonb_object_agg(k::text, body -> 'a') AS o "
           "FROM d GROUP BY k % 2"),
    ("v7", "SELECT k, initcap(s) AS i, (regexp_match(s, '([a-z]+)(\\d*)'))[2] AS m FROM d"),
    ("v8", "SELECT k, jsonb_strip_nulls(body) AS n, jsonb_pretty(body) AS p, jsonb_object_keys(body) AS key FROM d"),
]


@pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")
def test_each_family_in_a_materialized_view(cat):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, body in VIEWS:
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    cat.execute("""INSERT INTO d VALUES (4, '{"a": true, "b": {"c": null}, "tags": ["z"]}', 'x-y z')""")
    cat.execute("DELETE FROM d WHERE k = 1")
    cat.execute("""UPDATE d SET body = '{"a": [1], "tags": ["q"]}' WHERE k = 2""")
    for name, body in VIEWS:
        kept = sorted(map(repr, cat.sql(f"SELECT * FROM {name}").to_pylist()))
        assert kept == sorted(map(repr, cat.sql(body).to_pylist())), name
        assert kept, name


@pytest.mark.parametrize("rel", ["d", "v"])
def test_column_kinds_rules(cat, rel):
    # jsonb column with a string literal compares jsonb (the literal read as jsonb); || of
    # two jsonb columns merges; a jsonb operator of a text column is PostgreSQL's error --
    # through a table and a materialized view's columns alike (colmz.sql.jsonbcols)
    from colmz.sql import SQLError

    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT k, body, s FROM d")
    q = f"""SELECT k, body = '{{"tags":["p","q"], "b":{{"c":"x"}}, "a":1}}' AS e,
        body <> '{{"a":2.50,"tags":[]}}' AS n, body IN ('{{"a": 2.50, "tags": []}}') AS i,
        body || body AS m FROM {rel} ORDER BY k"""
    got = cat.sql(q)
    assert got.column("e").to_pylist() == [True, False, None]
    assert got.column("n").to_pylist() == [True, False, None]
    assert got.column("i").to_pylist() == [False, True, None]
    assert got.column("m").to_pylist()[1] == '{"a": 2.50, "tags": []}'
    with pytest.raises(SQLError, match="operator does not exist: text -> unknown"):
        cat.sql(f"SELECT s -> 'c' FROM {rel}")
    with pytest.raises(SQLError, match=r"operator does not exist: text \? unknown"):
        cat.sql(f"SELECT k FROM {rel} WHERE s ? 'c'")
    with pytest.raises(SQLError, match="invalid input syntax for type json"):
        cat.sql(f"SELECT k FROM {rel} WHERE body = 'nope'")
    # jsonb's order and equality (a number by its value: 2.50 is 2.5), not its text's
    assert cat.sql(f"""SELECT k FROM {rel} WHERE body < '{{"a": 3, "tags": []}}'""").to_pylist() == [{"k": 2}]
    assert cat.sql(f"""SELECT k FROM {rel} WHERE body = '{{"a": 2.5, "tags": []}}'""").to_pylist() == [{"k": 2}]
    # three columns all named ?column? (an Arrow table keeps repeated names, in order)
    three = cat.sql(f"SELECT body || body, body = '{{}}', k + 1 FROM {rel} ORDER BY k")
    assert three.column_names == ["?column?"] * 3
    assert three.columns[2].to_pylist() == [2, 3, 4]


def test_key_and_path_operators_named_like_postgres(cat):
    # PostgreSQL names an operator's result ?column?: jsonb's ?, ?|, #> and #>> too (DuckDB
    # reads ? as a parameter, so the names were DuckDB's text of the translated call)
    got = cat.sql("SELECT body ? 'a', body ?| array['zz'], body #> '{b}', body #>> '{b,c}' AS c FROM d ORDER BY k")
    assert got.column_names == ["?column?", "?column?", "?column?", "c"]
    assert got.columns[0].to_pylist() == [True, True, None]


def test_path_literal_read_as_array_in(cat):
    # a text[] path literal is read as PostgreSQL's array_in reads it (spaces, quotes, a
    # backslash escape outside quotes); malformed text raises its error, two dimensions are refused
    q = "SELECT body #>> '{ b , \"c\" }' AS c, body #>> '{b,\\c}' AS e FROM d ORDER BY k"
    assert col(cat, q, "c") == col(cat, q, "e") == ["x", None, None]
    from colmz.sql import SQLError

    with pytest.raises(SQLError, match="malformed array literal"):
        cat.sql("SELECT body #> '{b,,c}' FROM d")
    with pytest.raises(UnsupportedSQL, match="multi-dimensional text"):
        cat.sql("SELECT body #> '{{b}}' FROM d")


def test_maintained_view_of_kind_rules(cat):
    # a view whose answer hangs on a column being jsonb (compared with a literal, || of two)
    # is maintained by its operators, the rules applied to them as to the query
    # (tests/colmz/dataflow/test_jsonb_column_views.py); the literal cast to jsonb alike
    cat.execute("""CREATE MATERIALIZED VIEW w AS SELECT k FROM d WHERE body = '{"a":2.50,"tags":[]}'""")
    cat.execute("CREATE MATERIALIZED VIEW m AS SELECT k, body || body AS m FROM d")
    cat.execute("""CREATE MATERIALIZED VIEW c AS SELECT k FROM d WHERE body = '{"a":2.50,"tags":[]}'::jsonb""")
    for name in ("w", "m", "c"):
        mv = cat.object(name).maintained
        assert mv.incremental and not mv.plan.fallbacks(), name
    cat.execute("""INSERT INTO d VALUES (4, '{"tags": [], "a": 2.50}', NULL)""")
    assert sorted(col(cat, "SELECT k FROM w", "k")) == sorted(col(cat, "SELECT k FROM c", "k")) == [2, 4]
    assert col(cat, "SELECT m FROM m WHERE k = 4", "m") == ['{"a": 2.50, "tags": []}']


def test_a_column_turned_into_jsonb_and_minus_a_key_by_its_kind(cat):
    # (checked against PostgreSQL by the corpus's jn_column_to_jsonb, jn_agg_columns, ...)
    assert cat.sql("SELECT jsonb_agg(s ORDER BY k) AS a FROM d").column("a").to_pylist() == [
        '["hello wORLD", "ab12cd", null]']
    got = cat.sql("SELECT k, to_jsonb(body) AS b, body - 'tags' AS m FROM d ORDER BY k").to_pylist()
    assert got[1]["b"] == '{"a": 2.50, "tags": []}' and got[1]["m"] == '{"a": 2.50}' and got[2]["m"] is None


def test_text_read_as_numeric(cat):
    # ->> gives text; ::numeric reads it as PostgreSQL's numeric_in (exact value), numeric(p, s)
    # rounds half away from zero (values checked against PostgreSQL by the corpus's jn_*)
    from decimal import Decimal

    from colmz.sql import SQLError

    got = cat.sql("SELECT k, (body ->> 'a')::numeric AS a, (body ->> 'zz')::numeric AS z, "
                  "(body ->> 'a')::numeric(3,1) AS r FROM d ORDER BY k")
    assert got.column("a").to_pylist() == [Decimal(1), Decimal("2.5"), None]
    assert got.column("z").to_pylist() == [None, None, None]
    assert [str(x) for x in got.column("r").to_pylist()[:2]] == ["1.0", "2.5"]  # numeric(3,1)'s scale
    assert cat.sql("SELECT k FROM d WHERE (body ->> 'a')::numeric * 2 = 5").column("k").to_pylist() == [2]
    with pytest.raises(SQLError, match='^invalid input syntax for type numeric: "x"$'):
        cat.sql("SELECT (body #>> '{b,c}')::numeric FROM d")
    with pytest.raises(SQLError, match="^numeric field overflow$"):
        cat.sql("SELECT (body ->> 'a')::numeric(2,2) FROM d")
    # the text of the value would show colmz's scale (DECIMAL(38,9)), not PostgreSQL's 2.50
    for q in ("SELECT ((body ->> 'a')::numeric)::text FROM d", "SELECT (body ->> 'a')::numeric || 'x' FROM d",
              "SELECT to_jsonb((body ->> 'a')::numeric) FROM d",
              "SELECT jsonb_build_object('a', (body ->> 'a')::numeric + 1) FROM d",
              "SELECT concat((body ->> 'a')::numeric, '') FROM d",
              # through a subquery or WITH query too (refused by the value's DuckDB type)
              "SELECT x::text FROM (SELECT (body ->> 'a')::numeric AS x FROM d) s",
              "WITH c AS (SELECT (body ->> 'a')::numeric * 1.5 AS x FROM d) SELECT x || '', to_jsonb(x) FROM c"):
        with pytest.raises(UnsupportedSQL, match="the text of a numeric read from text"):
            cat.sql(q)
    # ... while a value of a fixed scale prints as PostgreSQL prints it (round: numeric's scale)
    assert cat.sql("SELECT round(x, 2)::text AS r FROM (SELECT (body ->> 'a')::numeric AS x FROM d) s "
                   "ORDER BY r").column("r").to_pylist() == ["1.00", "2.50", None]
    assert cat.sql("SELECT ((body ->> 'a')::numeric(4,2))::text AS t FROM d ORDER BY k").column("t").to_pylist() \
        == ["1.00", "2.50", None]
    for text, what in (("NaN", "NaN"), ("0.1234567891", "more than 9 digits after"),
                       ("1e30", "more than 29 digits before"), ("-Infinity", "-Infinity")):
        with pytest.raises(UnsupportedSQL, match=what):
            cat.sql(f"""SELECT ('{{"a": "{text}"}}'::jsonb ->> 'a')::numeric AS a""")


@pytest.mark.parametrize("text", [" 1.50 ", "-0", ".5", "5.", "+1e-3", "1E+2", "\t7\n", "0.000000001"])
def test_numeric_in_reads_what_decimal_reads(text):
    from decimal import Decimal

    from colmz.sql.numeric import numeric_in, numeric_typmod

    assert numeric_in(text) == Decimal(text.strip())
    assert numeric_typmod(text) == Decimal(text.strip())
    for bad in ("", " ", "1_0", "1e", "e1", "1.2.3", "0x10", "--1", "1 2"):
        with pytest.raises(ValueError, match="invalid input syntax for type numeric"):
            numeric_in(bad)
