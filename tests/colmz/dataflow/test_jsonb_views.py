"""Views over a jsonb column planned without a Fallback, equal to the recompute across
inserts, deletes, duplicate rows, NULL documents and rows retracted to none: jsonb's
``#>``, ``#>>``, ``?``, ``?|``, ``?&`` (which DuckDB's parser does not read: the planner
reads the text translate spells them in, colmz/sql/jsonb.py ``spell_operators``)."""

from __future__ import annotations

import pytest
from reference_models import check_script
from test_maintained import TABLES

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

DOCS = "CREATE TABLE d (k INT, j JSONB)"

OPERATORS = [
    "SELECT d.k, d.j #> '{a,b}' AS p, d.j #>> '{t,1}' AS q, d.j #>> '{t,-1}' AS r FROM d",
    "SELECT d.k FROM d WHERE d.j #>> '{a,b}' = 'x'",
    "SELECT d.k, d.j ? 'a' AS a, (d.j -> 't') ? 'p' AS b FROM d WHERE d.j ?| ARRAY['a', 't']",
    "SELECT d.j ?& ARRAY['a', 't'] AS both_, count(*) AS n FROM d GROUP BY d.j ?& ARRAY['a', 't']",
]

SCRIPT = [
    """INSERT INTO d VALUES (1, '{"a": {"b": "x"}, "t": ["p", "q"]}'), (2, '{"a": {"b": "y"}}'),
       (3, '{"t": ["p"]}'), (4, NULL), (1, '{"a": {"b": "x"}, "t": ["p", "q"]}'), (5, '[1, "a"]')""",
    "DELETE FROM d WHERE k = 1",  # a duplicated row retracted to none
    """INSERT INTO d VALUES (6, '{"a": 1, "t": []}'), (7, '"a"'), (NULL, '{"a": {"b": "x"}}')""",
    "UPDATE d SET j = '{\"a\": {\"b\": \"x\"}, \"t\": [\"z\"]}' WHERE k = 2",
    "DELETE FROM d WHERE k IS NULL OR k = 3",
    "DELETE FROM d",
]


TABLE_FUNCTIONS = [
    "SELECT d.k, key, value FROM d, jsonb_each(d.j)",
    "SELECT d.k, e.key, e.value FROM d CROSS JOIN LATERAL jsonb_each_text(d.j) AS e",
    "SELECT d.k, x.a, x.b FROM d LEFT JOIN LATERAL jsonb_each(d.j -> 'o') AS x(a, b) ON true",
    "SELECT d.k, e FROM d, jsonb_array_elements(d.j -> 't') AS e",
    "SELECT d.k, value FROM d LEFT JOIN LATERAL jsonb_array_elements_text(d.j -> 't') ON true",
    "SELECT k2, count(*) AS n FROM d, jsonb_object_keys(d.j) AS k2 GROUP BY k2",
]

AGGREGATES = [
    "SELECT jsonb_agg(d.k ORDER BY d.k) AS a FROM d",
    "SELECT jsonb_agg(d.k ORDER BY d.k) AS a FROM d WHERE d.k > 10",  # over no rows: one NULL
    "SELECT d.k % 2 AS g, jsonb_agg(d.j -> 'a' ORDER BY d.k, d.j ->> 'a') AS a, count(*) AS n FROM d GROUP BY d.k % 2",
    "SELECT jsonb_agg(d.k ORDER BY d.k DESC) FILTER (WHERE d.k > 1) AS a, jsonb_agg('x' || d.k ORDER BY d.k) AS b "
    "FROM d",
    "SELECT jsonb_object_agg('k' || d.k, d.j -> 't' ORDER BY d.k, (d.j -> 't')::text) AS o FROM d "
    "WHERE d.k IS NOT NULL",
]

#: Documents that are objects or NULL (jsonb_each of an array or a scalar is an error).
OBJECTS = [
    """INSERT INTO d VALUES (1, '{"a": 1, "t": ["p", "q", "p"], "o": {"x": null, "y": "s"}}'), (2, '{}'),
       (3, NULL), (1, '{"a": 1, "t": ["p", "q", "p"], "o": {"x": null, "y": "s"}}'), (4, '{"n": null, "o": {}}')""",
    "DELETE FROM d WHERE k = 1",  # a duplicated row retracted to none: all its rows go
    """INSERT INTO d VALUES (5, '{"é": [1.0], "t": [{"b": 1.50}, "1", 1]}'), (NULL, '{"o": {"z": [1]}}')""",
    "UPDATE d SET j = '{\"t\": [\"z\"], \"o\": {\"x\": 2}}' WHERE k = 2 OR k IS NULL",
    "DELETE FROM d WHERE k = 4",
    "DELETE FROM d",
]


def jsonb_catalogs(bodies: list[str]) -> list[colmz.Catalog]:
    """An incremental and a recompute catalog holding ``d`` and the views ``v0, v1, ...``;
    every view planned without a Fallback."""
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join([*TABLES, DOCS]))
        cat.execute(";\n".join(f"CREATE MATERIALIZED VIEW v{i} AS {b}" for i, b in enumerate(bodies)))
    for i, b in enumerate(bodies):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and mv.plan is not None and not mv.plan.fallbacks(), (b, mv.reasons)
    return cats


def test_jsonb_path_and_exists_operators_plan_and_equal_the_recompute():
    check_script(jsonb_catalogs(OPERATORS), SCRIPT)


def test_jsonb_table_functions_in_from_plan_as_flat_maps_and_equal_the_recompute():
    cats = jsonb_catalogs(TABLE_FUNCTIONS)
    text = str(cats[0].explain("v0"))
    assert "FlatMap via SQL [jsonb_each(d.j)]" in text and "recompute" not in text
    check_script(cats, OBJECTS)


def test_jsonb_aggregates_plan_as_a_basic_reduce_and_equal_the_recompute():
    check_script(jsonb_catalogs(AGGREGATES), SCRIPT)


def test_a_from_subquery_recomputed_alone_reads_the_spelled_operators():
    # the subquery falls back (WITH ORDINALITY): its text, cut from the spelled one, is
    # translated and run alone at each commit; the join above it is incremental
    body = ("SELECT x.p, x.n, y.k FROM (SELECT d.j #>> '{a,b}' AS p, n FROM d, generate_series(1, 2) "
            "WITH ORDINALITY AS g(v, n)) x JOIN d y ON x.p = y.j #>> '{a,b}' WHERE y.j ? 't'")
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join([*TABLES, DOCS]))
        cat.execute(f"CREATE MATERIALIZED VIEW v0 AS {body}")
    mv = cats[0].object("v0").maintained
    assert mv.incremental and [f.reason for f in mv.plan.fallbacks()] == [
        "table function 'generate_series(1, 2) WITH ORDINALITY AS g(v, n)': WITH ORDINALITY"]
    check_script(cats, SCRIPT)
    cats[0].execute(SCRIPT[0])  # (after DELETE FROM d) the first rows again: 4 docs with a.b 'x'
    assert len(cats[0].sql("SELECT * FROM v0")) == 8


def test_a_fallbacks_text_and_reason_quote_the_users_operators():
    # the planner reads the text with #>, #>>, ?, ?|, ?& spelled as operators DuckDB parses;
    # what it shows -- a Fallback's text and reason, EXPLAIN's segments, the refusal of a
    # view that must be incremental -- quotes the operators as the user wrote them
    import pyarrow as pa

    from colmz.dataflow.plan import plan
    from colmz.sql import UnsupportedSQL

    spelled = ("<<@@", "@@<<")
    body = "SELECT d.j #> '{a}' AS p, d.j?'x' AS q, d.j #>> '{t}' || random() AS r FROM d"
    p = plan(body, {"d": {"k": pa.int64(), "j": pa.string()}})
    (f,) = p.fallbacks()
    assert f.text == "d.j #> '{a}' AS p, d.j?'x' AS q, d.j #>> '{t}' || random()"
    assert f.reason == """"d.j #>> '{t}' || random()": random is volatile"""
    segment = plan("SELECT d.k FROM d WHERE d.j ?| ARRAY['a'] AND d.j ?& ARRAY['b', 'c']",
                   {"d": {"k": pa.int64(), "j": pa.string()}}).explain()
    assert "[d.j ?| ARRAY['a'], d.j ?& ARRAY['b', 'c']]" in segment and not any(s in segment for s in spelled)
    cat = colmz.Catalog()
    cat.execute(DOCS)
    with pytest.raises(UnsupportedSQL) as e:
        cat.execute(f"CREATE MATERIALIZED VIEW w WITH (INCREMENTAL = 'require') AS {body}")
    assert "d.j #>> '{t}' || random()" in str(e.value) and not any(s in str(e.value) for s in spelled)
    recursive = ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
                 "SELECT d.j #>> '{a}' AS x FROM d, r WHERE d.j ? 'a'")
    cat.execute(f"CREATE MATERIALIZED VIEW v AS {recursive}")
    shown = str(cat.explain("v"))
    assert "d.j #>> '{a}'" in shown and not any(s in shown for s in spelled), shown
    # a string literal holding a spelling: the text is shown as the planner read it
    literal = plan("SELECT d.j ? ' <<@@ ' AS a, random() AS r FROM d", {"d": {"k": pa.int64(), "j": pa.string()}})
    assert "' <<@@ '" in literal.fallbacks()[0].text
