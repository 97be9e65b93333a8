"""Bad input at ``CREATE MATERIALIZED VIEW``: one clear error, the catalog unchanged.

A view over a missing relation, a type error in a scalar, a view reading itself or closing a
cycle of views (a view reads only objects that exist before it, and no statement replaces
a view's query, so a cycle can only be attempted by these two), a bad column: each raises
one error naming the culprit, and the catalog -- its objects, its time, the views already
there and their contents, and for a durable catalog what a reopen reads -- is as before,
in both ways of maintaining views and in a statement list whose earlier statements
succeeded.
"""

from __future__ import annotations

import pytest

import colmz
from colmz.sql import SQLError, UnsupportedSQL

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

BAD = [
    ("SELECT * FROM nowhere", SQLError, r"^unknown catalog item 'nowhere'$"),
    ("SELECT t.k, n.x FROM t JOIN nowhere n ON t.k = n.x", SQLError, r"unknown catalog item 'nowhere'"),
    ("SELECT k FROM t WHERE k IN (SELECT k FROM nowhere)", SQLError, r"unknown catalog item 'nowhere'"),
    ("SELECT k + s AS x FROM t", UnsupportedSQL, r"\+\(BIGINT, VARCHAR\)"),
    ("SELECT upper(k) AS u FROM t", UnsupportedSQL, r"upper\(\) with these arguments"),
    ("SELECT k, sum(s) AS total FROM t GROUP BY k", UnsupportedSQL, r"sum\(VARCHAR\)"),
    ("SELECT k FROM t WHERE s > 1", SQLError, r"Cannot compare values of type VARCHAR and type INTEGER"),
    ("SELECT nope FROM t", SQLError, r'column "nope" not found'),
    ("SELECT k FROM t GROUP BY s", SQLError, r'column "k" must appear in the GROUP BY clause'),
    # a view reading itself: it does not exist yet
    ("SELECT * FROM v", SQLError, r"^unknown catalog item 'v'$"),
    ("SELECT a.k FROM a JOIN v ON a.k = v.k", SQLError, r"^unknown catalog item 'v'$"),
]


def catalog(mode: str, path=None) -> colmz.Catalog:
    cat = colmz.Catalog(path, views=mode) if path is not None else colmz.Catalog(views=mode)
    cat.execute("CREATE TABLE t (k BIGINT, s TEXT)")
    cat.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    cat.execute("CREATE MATERIALIZED VIEW a AS SELECT k, count(*) AS n FROM t GROUP BY k")
    cat.execute("CREATE MATERIALIZED VIEW b AS SELECT k FROM a WHERE n > 0")
    return cat


def state(cat: colmz.Catalog):
    return (cat.names, cat.now, sorted(cat.sql("SELECT * FROM a").to_pylist(), key=str),
            sorted(cat.sql("SELECT * FROM b").to_pylist(), key=str))


@pytest.mark.parametrize("mode", ["incremental", "recompute"])
@pytest.mark.parametrize("body, error, match", BAD)
def test_a_bad_view_is_one_error_and_changes_nothing(mode, body, error, match):
    cat = catalog(mode)
    before = state(cat)
    with pytest.raises(error, match=match):
        cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
    assert state(cat) == before
    # with statements before it that succeeded: those are undone too
    with pytest.raises(error, match=match):
        cat.execute(f"INSERT INTO t VALUES (3, 'c'); CREATE MATERIALIZED VIEW ok AS SELECT k FROM t; "
                    f"CREATE MATERIALIZED VIEW v AS {body}")
    assert state(cat) == before
    # the catalog works on as before
    cat.execute("INSERT INTO t VALUES (2, 'z')")
    assert cat.sql("SELECT * FROM a WHERE k = 2").to_pylist() == [{"k": 2, "n": 2}]


@pytest.mark.parametrize("mode", ["incremental", "recompute"])
def test_a_cycle_of_views_cannot_be_made(mode):
    cat = catalog(mode)
    before = state(cat)
    # a over b would close the cycle a -> b -> a: a exists, and nothing replaces a view's query
    with pytest.raises(SQLError, match=r"catalog item 'a' already exists"):
        cat.execute("CREATE MATERIALIZED VIEW a AS SELECT k, 1 AS n FROM b")
    with pytest.raises(SQLError):
        cat.execute("CREATE OR REPLACE MATERIALIZED VIEW a AS SELECT k, 1 AS n FROM b")
    # nor by dropping a (b depends on it) and creating it again over b
    with pytest.raises(SQLError, match="depend"):
        cat.execute("DROP MATERIALIZED VIEW a; CREATE MATERIALIZED VIEW a AS SELECT k, 1 AS n FROM b")
    assert state(cat) == before


def test_a_bad_view_leaves_a_durable_catalog_unchanged(tmp_path):
    cat = catalog("incremental", tmp_path)
    before = state(cat)
    for body, error, match in BAD:
        with pytest.raises(error, match=match):
            cat.execute(f"CREATE MATERIALIZED VIEW v AS {body}")
    assert state(cat) == before
    again = colmz.Catalog(tmp_path)
    assert state(again) == before
    again.execute("INSERT INTO t VALUES (5, 'e')")
    assert again.sql("SELECT * FROM b WHERE k = 5").to_pylist() == [{"k": 5}]
