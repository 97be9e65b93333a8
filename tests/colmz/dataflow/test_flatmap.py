"""Table functions in ``FROM`` (``generate_series``, ``unnest`` of one array) whose
arguments are the left side's columns or constants, and ``LATERAL (VALUES ...)`` lists
reading them (an unpivot), planned as a FlatMap over the left side
(one DuckDB call per commit, each output row keeping its input row's diff) -- views equal to
the recompute across inserts, deletes, duplicate rows, NULL arguments (no rows, or one NULL
row under ``LEFT JOIN``) and rows retracted to none."""

from __future__ import annotations

import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_durable_resume, check_random_scripts, check_script
from test_maintained import TABLES, script

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT t.k, g FROM t, LATERAL generate_series(1, t.v) g",
    "SELECT t.k, x FROM t CROSS JOIN generate_series(t.k, 3) AS s(x) WHERE t.s IS NOT NULL",
    "SELECT t.s, e FROM t LEFT JOIN LATERAL unnest(ARRAY[t.k, t.v]) AS e ON true",
    "SELECT t.k, count(*) AS n, sum(g) AS total FROM t, generate_series(0, t.v, 2) g GROUP BY t.k",
    "SELECT u.k, w2 FROM u, unnest(ARRAY[u.w, upper(u.w)]) AS w2",
    "SELECT t.k, t.v, g.g FROM t LEFT JOIN LATERAL generate_series(1, t.v) AS g ON true",
    "SELECT DISTINCT g FROM t, generate_series(1, 3) g WHERE t.k = 1",
    "SELECT t.k, g, u.w FROM t CROSS JOIN LATERAL generate_series(1, t.k) g JOIN u ON u.k = g",
    "SELECT t.k, x.name, x.val FROM t, LATERAL (VALUES ('k', t.k), ('v', t.v), ('k', t.k)) AS x(name, val)",
    "SELECT u.w, x.column2 FROM u LEFT JOIN LATERAL (VALUES (1, u.k + 1)) AS x ON true WHERE u.w IS NOT NULL",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'x'), (1, 3, 'y'), (NULL, 5, 'x'), (2, NULL, NULL), (4, -1, 'c'), (1, 2, 'x')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x'), (1, 'y')",
    "DELETE FROM t WHERE v = 2",  # a duplicated row retracted to none: all its rows go
    "INSERT INTO t VALUES (3, 0, NULL), (NULL, NULL, NULL), (NULL, NULL, NULL), (2, 4, 'z')",
    "UPDATE t SET v = v + 1 WHERE k = 1",
    "DELETE FROM u WHERE k = 1",
    "DELETE FROM t WHERE k IS NULL OR k = 2",
    "DELETE FROM t; DELETE FROM u",
]


def test_table_functions_equal_the_recompute():
    check_script(catalogs(BODIES), SCRIPT)


@settings(max_examples=us.examples(12), deadline=None)
@given(st.lists(script(), min_size=1, max_size=6))
def test_table_functions_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(catalogs(BODIES), scripts)


def test_explain_names_the_flat_map_and_its_cost_is_the_delta():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute(f"CREATE MATERIALIZED VIEW f AS {BODIES[0]}")
    text = str(cat.explain("f"))
    assert "FlatMap via SQL [generate_series(1, t.v)] (per row, one DuckDB call per commit)" in text
    assert "recompute" not in text
    cat.execute("INSERT INTO t VALUES (1, 3, 'a'), (2, 1, 'b')")
    cat.execute("INSERT INTO t VALUES (5, 2, 'c')")
    # the second commit's work: its one row's two output rows, not the table's
    assert sorted(cat.sql("SELECT * FROM f").to_pylist(), key=lambda r: (r["k"], r["g"])) == [
        {"k": 1, "g": 1}, {"k": 1, "g": 2}, {"k": 1, "g": 3}, {"k": 2, "g": 1}, {"k": 5, "g": 1}, {"k": 5, "g": 2}]


def test_a_table_function_with_ordinality_falls_back_by_name():
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    cat.execute("CREATE MATERIALIZED VIEW f AS SELECT t.k, g, n FROM t, generate_series(1, t.v) WITH ORDINALITY AS x(g, n)")
    mv = cat.object("f").maintained
    assert [f.reason for f in mv.plan.fallbacks()] == [
        "table function 'generate_series(1, t.v) WITH ORDINALITY AS x(g, n)': WITH ORDINALITY"]


def test_a_durable_catalog_resumes_flat_map_views_without_reading_inputs(tmp_path):
    check_durable_resume(str(tmp_path / "cat"), BODIES, SCRIPT, 4)
