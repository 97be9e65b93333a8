"""``x op ANY / ALL (subquery)`` in ``WHERE`` planned as a cross join with one global
reduce of the subquery and a filter (``colmz.dataflow.plan``'s ``quantified``): views equal
to the recompute across inserts, deletes, NULLs on either side, and the subquery emptied."""

from __future__ import annotations

import pytest
from test_maintained import TABLES, check_equal, run

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BODIES = [
    "SELECT k, v FROM t WHERE v > ALL (SELECT k FROM u WHERE w <> 'z')",
    "SELECT k, v FROM t WHERE v <= ALL (SELECT k FROM u)",
    "SELECT k, v FROM t WHERE v > ANY (SELECT k FROM u WHERE w IS NOT NULL)",
    "SELECT k, v FROM t WHERE v < SOME (SELECT k FROM u)",
    "SELECT k, s FROM t WHERE k = SOME (SELECT k FROM u)",
    "SELECT k, count(*) AS n FROM t WHERE v >= ALL (SELECT k FROM u) GROUP BY k",
]
#: Not planned: a Fallback (recomputed), the reason naming it.
FALLBACKS = [
    ("SELECT k FROM t WHERE s > ALL (SELECT w FROM u)", "integers only"),
    ("SELECT k FROM t WHERE v <> ALL (SELECT k FROM u)", "quantified comparison"),
    ("SELECT k FROM t WHERE NOT (v > ANY (SELECT k FROM u))", "quantified comparison"),
]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL), (4, 0, 'c')",
    "INSERT INTO u VALUES (1, 'x'), (2, 'y')",
    "INSERT INTO u VALUES (NULL, 'x')",  # a NULL in the subquery: ALL is never true
    "DELETE FROM u WHERE k IS NULL",
    "INSERT INTO u VALUES (4, 'z'), (0, NULL)",
    "DELETE FROM t WHERE k = 1",
    "DELETE FROM u",  # empty: ALL keeps every row (NULL ones too), ANY none
    "INSERT INTO t VALUES (NULL, NULL, NULL), (7, 7, 'q')",
    "INSERT INTO u VALUES (3, 'w')",
]


def test_quantified_comparisons_equal_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0] + "; " + TABLES[1])
        for i, b in enumerate(BODIES + [q for q, _ in FALLBACKS]):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    inc = cats[0]
    for i, b in enumerate(BODIES):
        mv = inc.object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), b
    for i, (b, why) in enumerate(FALLBACKS, len(BODIES)):
        mv = inc.object(f"v{i}").maintained
        assert not mv.incremental and why in " ".join(mv.reasons), (b, mv.reasons)
    check_equal(cats, "creation")
    for text in SCRIPT:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)


#: As select items' values, with PostgreSQL's NULLs (true, false or unknown).
VALUES = [
    "SELECT k, v, v > ALL (SELECT k FROM u WHERE w <> 'z') AS above FROM t",
    "SELECT k, v < ANY (SELECT k FROM u) AS below, v <= SOME (SELECT k FROM u WHERE w IS NOT NULL) AS le FROM t",
    "SELECT s, v >= ALL (SELECT k FROM u) AS ge, k < ALL (SELECT k FROM u) AS lt FROM t WHERE v IS NOT NULL OR k = 1",
]


def test_quantified_comparisons_as_values_equal_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0] + "; " + TABLES[1])
        for i, b in enumerate(VALUES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
    for i, b in enumerate(VALUES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    assert "MapFilter via SQL [v > ALL (SELECT k FROM u WHERE w <> 'z')]" in str(cats[0].explain("v0"))
    check_equal(cats, "creation")
    for text in SCRIPT + ["INSERT INTO u VALUES (NULL, NULL)", "DELETE FROM u WHERE k IS NOT NULL",
                          "INSERT INTO u VALUES (2, 'x'), (2, 'x')", "DELETE FROM u WHERE k = 2"]:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
    # the answers themselves, after the script: u holds (NULL, NULL) only, so v0's subquery
    # is empty (ALL true) and v1's holds one NULL (ANY unknown)
    assert cats[0].sql("SELECT DISTINCT above FROM v0").to_pylist() == [{"above": True}]
    assert cats[0].sql("SELECT DISTINCT below FROM v1").to_pylist() == [{"below": None}]


def test_a_subquery_inside_a_quantified_items_expression_still_falls_back():
    cat = colmz.Catalog()
    cat.execute(TABLES[0] + "; " + TABLES[1])
    cat.execute("CREATE MATERIALIZED VIEW f AS SELECT k, (v > ALL (SELECT k FROM u)) AND (SELECT true) AS x FROM t")
    mv = cat.object("f").maintained
    assert not mv.incremental or mv.plan.fallbacks()


#: An integer literal compared with ANY / ALL of a subquery (IN and NOT IN too), with or
#: without FROM: global counts of the subquery crossed in.
CONSTANTS = [
    "SELECT 2 > ALL (SELECT k FROM u) AS a, 2 = ANY (SELECT k FROM u) AS b, 1 NOT IN (SELECT k FROM u) AS c, "
    "1 IN (SELECT k FROM u WHERE w = 'x') AS d, 4 <> ANY (SELECT k FROM u) AS e, 0 <= SOME (SELECT k FROM u) AS f",
    "SELECT k, 1 = ALL (SELECT k FROM u WHERE w IS NOT NULL) AS same, 2 <> ALL (SELECT k FROM u) AS other FROM t",
]


def test_a_literal_compared_with_any_or_all_equals_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0] + "; " + TABLES[1])
        for i, b in enumerate(CONSTANTS):
            cat.execute(f"CREATE MATERIALIZED VIEW c{i} AS {b}")
    for i, b in enumerate(CONSTANTS):
        mv = cats[0].object(f"c{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    assert cats[0].sql("SELECT * FROM c0").to_pylist() == [
        {"a": True, "b": False, "c": True, "d": False, "e": False, "f": False}]  # u empty
    check_equal(cats, "creation")
    for text in SCRIPT + ["INSERT INTO u VALUES (NULL, NULL)", "DELETE FROM u WHERE k IS NOT NULL",
                          "INSERT INTO u VALUES (1, 'x'), (1, 'x')", "DELETE FROM u WHERE k IS NULL"]:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
    # u holds (1, 'x') twice: 1 is in it, every value is 1
    assert cats[0].sql("SELECT * FROM c0").to_pylist() == [
        {"a": True, "b": False, "c": False, "d": True, "e": True, "f": True}]


def test_a_row_in_a_subquery_is_a_semijoin_on_every_column():
    body = "SELECT k, v FROM t WHERE (k, s) IN (SELECT k, w FROM u WHERE k IS NULL OR k < 4)"
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLES[0] + "; " + TABLES[1])
        cat.execute(f"CREATE MATERIALIZED VIEW r AS {body}")
    mv = cats[0].object("r").maintained
    assert mv.incremental and not mv.plan.fallbacks(), mv.reasons
    for text in ["INSERT INTO t VALUES (1, 2, 'x'), (1, 3, 'x'), (NULL, 5, 'x'), (2, NULL, NULL), (4, 0, 'y')",
                 "INSERT INTO u VALUES (1, 'x'), (1, 'x'), (NULL, 'x'), (2, NULL), (4, 'y')",
                 "DELETE FROM u WHERE k = 1 AND w = 'x'", "INSERT INTO u VALUES (1, 'x')",
                 "UPDATE t SET s = 'y' WHERE k = 1 AND v = 2", "DELETE FROM t"]:
        assert run(cats, text) == [None, None]
        check_equal(cats, text)
        if text.startswith("INSERT INTO u"):
            # NULLs match nothing; the duplicate in u does not duplicate t's rows
            assert sorted(cats[0].sql("SELECT * FROM r").to_pylist(), key=str) in (
                [{"k": 1, "v": 2}, {"k": 1, "v": 3}], [{"k": 1, "v": 3}])
