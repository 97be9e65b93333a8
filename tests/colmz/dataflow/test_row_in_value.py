"""``(a, b, ...) IN (subquery)`` as a select item's value, with PostgreSQL's NULLs for row
comparisons (``SubqueryLowering.row_in_value``): true when a row equals, else NULL when a
row's every comparison is true or unknown, else false -- views equal to the recompute after
a fixed and random change scripts (NULLs at every position on either side, duplicates,
deletes to an empty subquery) and after a durable catalog's reopen; PostgreSQL's answer is
checked by ``test_views_postgres.py`` (view ``q7``)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import updates_strategies as us
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_models import catalogs, check_durable_resume, check_random_scripts, check_script
from test_maintained import script

from colmz.dataflow.plan import plan

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}, "u": {"k": pa.int64(), "w": pa.string()}}

BODIES = [
    "SELECT k, w, (k, w) IN (SELECT k, s FROM t) AS x FROM u",
    "SELECT k, v, (k, v) IN (SELECT t2.k, t2.v FROM t t2 WHERE t2.s = 'a') AS x FROM t",
    "SELECT k, s, (k, v, s) IN (SELECT k, k, w FROM u) AS x FROM t",
    "SELECT u.k, (w, k) IN (SELECT s, v FROM t WHERE v < 5) AS x, u.w FROM u WHERE u.k IS NOT NULL OR w = 'x'",
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'x'), (1, NULL, 'y'), (NULL, 5, 'x'), (2, NULL, NULL), (4, 4, NULL), (1, 2, 'x')",
    "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (2, NULL), (NULL, 'x'), (1, 'y'), (NULL, NULL), (4, 'z')",
    "INSERT INTO t VALUES (2, 2, 'a'), (NULL, 1, 'a'), (4, NULL, 'a'), (NULL, NULL, 'a')",
    "DELETE FROM t WHERE s IS NULL",
    "UPDATE t SET s = 'a' WHERE k = 1 AND v = 2",
    "DELETE FROM u WHERE k = 1; INSERT INTO u VALUES (2, 'a'), (NULL, 'y')",
    "DELETE FROM t WHERE k IS NULL",
    "DELETE FROM t",
    "INSERT INTO t VALUES (NULL, NULL, NULL); DELETE FROM u WHERE w IS NULL",
]


def test_row_in_values_equal_the_recompute():
    check_script(catalogs(BODIES), SCRIPT)


@settings(max_examples=us.examples(10), deadline=None)
@given(st.lists(script(), min_size=1, max_size=5))
def test_row_in_values_equal_the_recompute_after_random_scripts(scripts):
    check_random_scripts(catalogs(BODIES), scripts)


def test_a_durable_catalog_resumes_them_without_reading_inputs(tmp_path):
    check_durable_resume(str(tmp_path / "cat"), BODIES, SCRIPT, 4)


def test_the_plan_is_a_branch_per_null_pattern():
    p = plan(BODIES[0], SCHEMAS)
    text = p.explain()
    assert p.incremental and p.names == ["k", "w", "x"]
    # four NULL patterns of (k, w); 3 ** 2 = 9 lookups of t's rows by their own patterns
    assert text.count("MapFilter via SQL [(k, w) IN (SELECT k, s FROM t)]") == 4
    assert text.count("Distinct") == 5 and text.count("Reduce group_by=[] aggregates=") == 4
    assert "where=[t.k IS NOT NULL AND t.s IS NOT NULL] select=[t.k AS " in text  # the true match


@pytest.mark.parametrize("text,word", [
    ("SELECT k, (k, v, s, k) IN (SELECT k, v, s, k FROM t) AS x FROM t", "IN of an expression"),  # too wide
    ("SELECT k, (k, v + 1) IN (SELECT k, v FROM t) AS x FROM t", "IN of an expression"),
    ("SELECT k, (k, s) IN (SELECT k, w FROM u WHERE u.k = t.v) AS x FROM t", "correlated"),
    ("SELECT k, (k, v) IN (SELECT k, w FROM u) AS x FROM t", "a cast"),
])
def test_other_row_ins_fall_back(text, word):
    falls = plan(text, SCHEMAS).fallbacks()
    assert falls and any(word in f.reason for f in falls), [f.reason for f in falls]
