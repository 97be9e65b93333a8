"""Uncorrelated scalar subqueries that are not one row by their shape (no aggregate, or
``GROUP BY``/``LIMIT``), decorrelated as Materialize does: the subquery's rows, or a NULL
while it has none, crossed in -- and, while a commit leaves the subquery with more than one
row, an error of the view (``colmz.dataflow.guard``): the commit lands, reading the view (or
a view over it) raises PostgreSQL's "more than one row returned by a subquery used as an
expression", and once a later commit leaves one row or none the view reads again. The
views err exactly when the recompute's do (its query raising is the same error of the
view) and, when they do not, equal it -- across inserts, deletes, NULLs, the subquery
emptied and overfull; reads as of a time before the error answer; a failed commit rolls the
error back; a durable catalog reopened while a view holds the error still holds it, and
answers once it clears (views kept by operators: their guards' state is durable).
"""

from __future__ import annotations

import pytest
from test_maintained import TABLES, check_equal, contents, run

import colmz
from colmz.sql import SQLError

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

MORE = "more than one row returned by a subquery used as an expression"

BODIES = [
    "SELECT t.k, t.v, (SELECT w FROM u WHERE u.k = 1) AS w1 FROM t",
    "SELECT (SELECT w FROM u WHERE k = 2) AS w2, 'tag' AS tag",
    "SELECT k, s FROM t WHERE v > (SELECT k FROM u WHERE w = 'top')",
    "SELECT k, (SELECT k FROM u ORDER BY k DESC NULLS LAST LIMIT 1) AS top FROM t WHERE k IS NOT NULL",
    "SELECT (SELECT count(*) FROM t GROUP BY s HAVING s = 'a') AS na",
]

#: (commit, the views holding the error after it)
SCRIPT = [
    ("INSERT INTO t VALUES (1, 2, 'a'), (1, 3, 'b'), (NULL, 5, 'a'), (2, NULL, NULL)", set()),
    ("INSERT INTO u VALUES (1, 'x'), (2, NULL), (0, 'top')", set()),
    ("INSERT INTO u VALUES (1, 'y')", {"v0"}),  # two rows under k = 1: v0 errs, the commit lands
    ("INSERT INTO u VALUES (3, 'top'); INSERT INTO t VALUES (9, 9, 'z')", {"v0", "v2"}),
    ("UPDATE u SET w = 'z' WHERE k = 1", {"v0", "v2"}),
    ("DELETE FROM u WHERE k = 1 AND w = 'z'", {"v2"}),  # v0 reads again (no row: NULL)
    ("INSERT INTO t VALUES (4, 1, 'a')", {"v2"}),
    ("INSERT INTO u VALUES (1, NULL), (5, 'top'); DELETE FROM u WHERE k = 0", {"v2"}),
    ("DELETE FROM u WHERE w = 'top' AND k <> 5", set()),
    ("INSERT INTO t VALUES (5, 1, 'a')", set()),  # one group s = 'a' however many rows: one row
    ("DELETE FROM t; DELETE FROM u", set()),
]


def erring(cat: colmz.Catalog, names) -> set[str]:
    """The views of ``names`` whose read raises the error (any other error fails the test)."""
    out = set()
    for n in names:
        try:
            cat.sql(f"SELECT * FROM {n}")
        except SQLError as e:
            assert str(e) == MORE, (n, e)
            out.add(n)
    return out


def catalogs() -> list[colmz.Catalog]:
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute("; ".join(TABLES))
        for i, b in enumerate(BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {b}")
        cat.execute("CREATE MATERIALIZED VIEW over0 AS SELECT count(*) AS n FROM v0")
    for i, b in enumerate(BODIES):
        mv = cats[0].object(f"v{i}").maintained
        assert mv.incremental and not mv.plan.fallbacks(), (b, mv.reasons)
    return cats


def test_guarded_scalar_subqueries_equal_the_recompute_and_err_as_it_does():
    cats = catalogs()
    assert "at most one row, else an error" in str(cats[0].explain("v0"))
    names = [f"v{i}" for i in range(len(BODIES))]
    check_equal(cats, "creation")
    for text, errs in SCRIPT:
        assert run(cats, text) == [None, None], text  # the commit lands
        for cat in cats:
            assert erring(cat, names) == errs, (text, cat)
            # a view over an erring view errs too (Materialize's errors flow downstream)
            assert erring(cat, ["over0"]) == ({"over0"} if "v0" in errs else set()), text
        # the rows of a view holding an error are never read: the others equal
        for n in [*names, "over0"]:
            if n not in errs and not (n == "over0" and "v0" in errs):
                assert contents(cats[0], n) == contents(cats[1], n), (n, text)
    check_equal(cats, "end")


@pytest.mark.parametrize("views", ["incremental", "recompute"])
def test_reads_before_the_error_answer_and_a_failed_commit_rolls_it_back(views):
    cat = colmz.Catalog(views=views)
    cat.execute("; ".join(TABLES))
    cat.execute(f"CREATE MATERIALIZED VIEW v AS {BODIES[0]}")
    cat.execute("INSERT INTO t VALUES (1, 2, 'a'); INSERT INTO u VALUES (1, 'x')")
    good = cat.now
    cat.execute("INSERT INTO u VALUES (1, 'y')")
    with pytest.raises(SQLError, match=MORE):
        cat.sql("SELECT * FROM v")
    with pytest.raises(SQLError, match=MORE):
        cat.read("v")
    assert cat.sql("SELECT * FROM v", as_of=good).to_pylist() == [{"k": 1, "v": 2, "w1": "x"}]
    bad = cat.now
    # the delete that would clear it, then a failing statement: the whole call rolls back
    with pytest.raises(SQLError):
        cat.execute("DELETE FROM u WHERE w = 'y'; INSERT INTO nowhere VALUES (1)")
    with pytest.raises(SQLError, match=MORE):
        cat.sql("SELECT * FROM v")
    cat.execute("DELETE FROM u WHERE w = 'y'")
    assert cat.sql("SELECT * FROM v").to_pylist() == [{"k": 1, "v": 2, "w1": "x"}]
    with pytest.raises(SQLError, match=MORE):
        cat.sql("SELECT * FROM v", as_of=bad)


@pytest.mark.parametrize("views", ["incremental", "recompute"])
def test_create_over_an_overfull_subquery_fails_as_the_query_does(views):
    cat = colmz.Catalog(views=views)
    cat.execute("; ".join(TABLES))
    cat.execute("INSERT INTO t VALUES (1, 2, 'a'); INSERT INTO u VALUES (1, 'x'), (1, 'y')")
    with pytest.raises(SQLError, match=MORE):
        cat.execute(f"CREATE MATERIALIZED VIEW v AS {BODIES[0]}")
    assert "v" not in cat.names


def test_a_durable_catalog_reopened_while_a_view_errs_still_errs(tmp_path):
    # (its operators' state holds the error: views="recompute" keeps none durably)
    from colmz.catalog.durable import Catalog

    views = "incremental"

    url = str(tmp_path / "cat")
    cat = Catalog(url, views=views)
    cat.execute("; ".join(TABLES))
    cat.execute(f"CREATE MATERIALIZED VIEW v AS {BODIES[0]}")
    cat.execute("INSERT INTO t VALUES (1, 2, 'a'); INSERT INTO u VALUES (1, 'x')")
    cat.execute("INSERT INTO u VALUES (1, 'y')")
    again = Catalog(url, views=views)
    with pytest.raises(SQLError, match=MORE):
        again.sql("SELECT * FROM v")
    again.execute("DELETE FROM u WHERE w = 'x'")
    assert again.sql("SELECT * FROM v").to_pylist() == [{"k": 1, "v": 2, "w1": "y"}]
