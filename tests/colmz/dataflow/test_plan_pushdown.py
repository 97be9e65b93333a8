"""An outer ``WHERE``'s SQL conjuncts moved below a ``FROM`` subquery's SQL segment
(``colmz.dataflow.plan_pushdown``).

PostgreSQL pulls the subquery up, so its select list is computed only for the rows the outer
``WHERE`` keeps: ``r * r`` of a row a conjunct on a passed-through column drops is never
computed and raises no overflow. The maintained view must answer as the recompute and as
PostgreSQL 15 do; a conjunct reading a computed item, a volatile call or ``error`` stays
where it is. In a join, a ``FROM`` subquery (an inner join's item, an outer join's preserved
side) takes the conjuncts reading only its passed-through columns before the join, by the
recompute path's rules (``colmz.sql.pushdown``); a conjunct moves through ``DISTINCT`` and
on ``DISTINCT ON``'s keys.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from sql_oracle import oracle_url, require

import colmz
from colmz.dataflow.plan import plan
from colmz.dataflow.plan_nodes import Get, MapFilter, SqlMapFilter
from colmz.dataflow.plan_pushdown import sql_pushed_below_sql
from colmz.order import ColumnSpec

SCHEMAS = {"reals": {"k": pa.int64(), "r": pa.float64()}}
SETUP = ["CREATE TABLE reals (k BIGINT, r DOUBLE PRECISION)", "INSERT INTO reals VALUES (1, 2.0), (4, 1e200)"]
CHANGES = ["INSERT INTO reals VALUES (4, 1e300), (2, 3.0)", "DELETE FROM reals WHERE k = 1",
           "INSERT INTO reals VALUES (5, 1.5)"]
#: Bodies whose outer SQL conjunct on a passed-through column drops every row whose
#: ``r * r`` overflows (k = 4), as PostgreSQL's pulled-up plan does before computing it.
BODIES = [
    "SELECT k, y FROM (SELECT k, r * r AS y FROM reals) u WHERE k::text <> '4'",
    "SELECT k, y FROM (SELECT k, r * r AS y FROM reals) u WHERE k::text <> '4' AND y > 1",
    "SELECT k, y FROM (SELECT k, r * r AS y FROM reals WHERE r > 0) u WHERE k::text <> '4'",
    "SELECT k, z FROM (SELECT k, y + 1 AS z FROM (SELECT k, r * r AS y FROM reals) a) b WHERE k::text <> '4'",
    "SELECT q, y FROM (SELECT k AS q, r * r AS y FROM reals) u WHERE q::text <> '4'",
]


def _rows(cat, sql):
    return sorted((tuple(r.values()) for r in cat.sql(sql).to_pylist()), key=repr)  # NULLs sort too


@pytest.mark.parametrize("body", BODIES)
def test_an_outer_sql_filter_on_passed_columns_runs_before_the_subquerys_items(body):
    cat = colmz.Catalog()
    rec = colmz.Catalog(views="recompute")
    for c in (cat, rec):
        for s in SETUP:
            c.execute(s)
        c.execute(f"CREATE MATERIALIZED VIEW mv AS {body}")
    assert cat.object("mv").maintained.incremental
    text = str(cat.explain("mv"))
    # the outer conjunct is in the segment that computes r * r (its WHERE, before its items)
    assert "MapFilter via SQL [" in text and "r * r" in text
    seg = next(ln for ln in text.splitlines() if "r * r" in ln)
    assert "::text <> '4'" in seg, text
    for change in CHANGES:
        for c in (cat, rec):
            c.execute(change)  # raised the float overflow before: r * r of k = 4's rows
        assert _rows(cat, "SELECT * FROM mv") == _rows(rec, "SELECT * FROM mv") == _rows(cat, body)


def test_a_conjunct_on_a_computed_item_stays_above_it():
    p = plan("SELECT k, y FROM (SELECT k, r * r AS y FROM reals) u WHERE k::text <> '4' AND y::text <> '1'",
             SCHEMAS)
    lines = p.explain().splitlines()
    upper = next(i for i, ln in enumerate(lines) if "y::text <> '1'" in ln)
    lower = next(i for i, ln in enumerate(lines) if "r * r" in ln)
    assert upper < lower and "k::text <> '4'" in lines[lower] and "k::text" not in lines[upper]


def _segments():
    cols = (ColumnSpec("k", pa.int64()), ColumnSpec("r", pa.float64()))
    items = SqlMapFilter((cols[0], ColumnSpec("y", pa.float64())), Get(cols, "reals", "reals", (("k", "k"), ("r", "r"))),
                         (), (('"colmz_c0"', "k"), ('"colmz_c1" * "colmz_c1"', "y")), ("r * r",))
    renamed = MapFilter((ColumnSpec("u.y", pa.float64()), ColumnSpec("u.k", pa.int64())), items, (),
                        (("y", "u.y"), ("k", "u.k")))
    return items, renamed


def test_placeholders_are_renumbered_through_a_renaming_and_string_literals_kept():
    items, renamed = _segments()
    outer = SqlMapFilter(renamed.schema, renamed, ('"colmz_c1" <> length(\'"colmz_c0"\')',), None,
                         ("u.k <> length('\"colmz_c0\"')",))
    moved = sql_pushed_below_sql(outer)
    assert moved == MapFilter(renamed.schema, SqlMapFilter(
        items.schema, items.input, ('"colmz_c0" <> length(\'"colmz_c0"\')',), items.select,
        ("u.k <> length('\"colmz_c0\"')", "r * r")), (), renamed.select)


@pytest.mark.parametrize("call", ["random()", "error('no')", "now()"])
def test_volatile_calls_and_error_guards_never_move(call):
    items, renamed = _segments()
    where = (f'"colmz_c1"::text <> {call}::text',)
    outer = SqlMapFilter(renamed.schema, renamed, where, None, ("guard",))
    assert sql_pushed_below_sql(outer, frozenset({"random", "now"})) == outer
    # a conjunct reading the computed item never moves either
    on_y = SqlMapFilter(renamed.schema, renamed, ('"colmz_c0" > 1',), None, ("u.y > 1",))
    assert sql_pushed_below_sql(on_y) == on_y


def test_the_pushed_view_equals_postgres():
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    with psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True) as conn:
        cat = colmz.Catalog()
        for s in SETUP:
            conn.execute(s)
            cat.execute(s)
        # not BODIES[1]: PostgreSQL orders the scan's quals by cost and evaluates r * r > 1
        # (the cheaper) before k::text <> '4', so it raises the overflow there; colmz's native
        # y > 1 runs after the pushed SQL conjunct, and both its paths answer
        bodies = [b for i, b in enumerate(BODIES) if i != 1]
        for i, body in enumerate(bodies):
            cat.execute(f"CREATE MATERIALIZED VIEW v{i} AS {body}")
        for change in CHANGES:
            conn.execute(change)
            cat.execute(change)
            for i, body in enumerate(bodies):
                want = sorted(tuple(r) for r in conn.execute(body).fetchall())
                assert _rows(cat, f"SELECT * FROM v{i}") == want, (body, change)


# ---- a join's FROM subquery: an inner join's item, an outer join's preserved side

#: Bodies whose outer conjunct on a join's subquery's passed-through columns (qualified by
#: its alias) drops every row whose ``r * r`` overflows (k = 4), as the recompute path
#: (colmz.sql.pushdown) and PostgreSQL's pulled-up plan do before the join.
JOIN_BODIES = [
    "SELECT u.q, u.y, t.r FROM (SELECT k AS q, r * r AS y FROM reals) u JOIN reals t ON t.k = u.q "
    "WHERE abs(u.q - 4) > 0 AND t.k > 1",
    "SELECT u.q, u.y FROM (SELECT k AS q, r * r AS y FROM reals) u JOIN reals t ON true "
    "WHERE abs(u.q - 4) > 0 AND t.k = u.q",
    "SELECT u.q, u.y, t.k AS tk FROM (SELECT k AS q, r * r AS y FROM reals) u LEFT JOIN reals t ON t.k = u.q + 1 "
    "WHERE abs(u.q - 4) > 0",
    "SELECT t.k, u.y FROM reals t RIGHT JOIN (SELECT k AS q, r * r AS y FROM reals) u ON t.k = u.q + 1 "
    "WHERE abs(u.q - 4) > 0",
    "SELECT t.k, u.y FROM reals t RIGHT JOIN (SELECT k AS q, r * r AS y FROM reals) u ON t.k = u.q "
    "WHERE u.q::text <> '4'",
    "SELECT a.q, b.y FROM (SELECT k AS q, r * r AS y FROM reals) a, (SELECT k AS q, r * r AS y FROM reals) b "
    "WHERE abs(a.q - 4) > 0 AND (b.q % 4) <> 0 AND a.q = b.q",
]



def _maintained_and_recomputed(body):
    # the view over SETUP in a maintained and a recomputing catalog; planned with no Fallback
    cat = colmz.Catalog()
    rec = colmz.Catalog(views="recompute")
    for c in (cat, rec):
        for s in SETUP:
            c.execute(s)
        c.execute(f"CREATE MATERIALIZED VIEW mv AS {body}")  # raised the overflow before
    assert cat.object("mv").maintained.incremental and not cat.object("mv").maintained.plan.fallbacks()
    return cat, rec


def _changes_agree(cat, rec, body):
    # after each of CHANGES: the maintained view, the recomputed one and the query agree
    for change in CHANGES:
        for c in (cat, rec):
            c.execute(change)
        assert _rows(cat, "SELECT * FROM mv") == _rows(rec, "SELECT * FROM mv") == _rows(cat, body)

@pytest.mark.parametrize("body", JOIN_BODIES)
def test_a_joins_subquery_is_filtered_by_its_conjuncts_before_its_items(body):
    cat, rec = _maintained_and_recomputed(body)
    text = str(cat.explain("mv"))
    # every segment computing r * r filters by the moved conjunct first; none is left above
    segs = [ln for ln in text.splitlines() if "r * r" in ln]
    assert segs and all(("abs(" in ln or "::text <> '4'" in ln or "% 4" in ln) for ln in segs), text
    _changes_agree(cat, rec, body)


def test_a_joins_conjuncts_stay_above_when_one_reads_a_computed_column_or_the_padded_side():
    # all of an item's conjuncts move or none (colmz.sql.pushdown): y is computed
    p = plan("SELECT u.q, u.y FROM (SELECT k AS q, r * r AS y FROM reals) u JOIN reals t ON t.k = u.q "
             "WHERE abs(u.q - 4) > 0 AND u.y::text <> '1'", SCHEMAS).explain()
    seg = next(ln for ln in p.splitlines() if "r * r" in ln)
    assert "abs(" not in seg, p
    # a LEFT JOIN's NULL-padded side takes nothing: the conjunct stays above the join
    p = plan("SELECT t.k, u.y FROM reals t LEFT JOIN (SELECT k AS q, r * r AS y FROM reals) u ON t.k = u.q "
             "WHERE abs(u.q - 4) > 0", SCHEMAS).explain()
    assert all("abs(" not in ln for ln in p.splitlines() if "r * r" in ln), p
    # unqualified columns in a join are not the item's (the recompute path's rule)
    p = plan("SELECT q, u.y FROM (SELECT k AS q, r * r AS y FROM reals) u JOIN reals t ON t.k = u.q "
             "WHERE abs(q - 4) > 0", SCHEMAS).explain()
    assert all("abs(" not in ln for ln in p.splitlines() if "r * r" in ln), p


# ---- through SELECT DISTINCT, and DISTINCT ON's keys

DISTINCT_BODIES = [
    "SELECT q, y FROM (SELECT DISTINCT k AS q, r * r AS y FROM reals) u WHERE abs(q - 4) > 0",
    "SELECT q, y FROM (SELECT DISTINCT ON (k) k AS q, r * r AS y FROM reals ORDER BY k) u WHERE abs(q - 4) > 0",
    "SELECT u.q, u.y, t.r FROM (SELECT DISTINCT k AS q, r * r AS y FROM reals) u JOIN reals t ON t.k = u.q "
    "WHERE (u.q % 4) <> 0",
]


@pytest.mark.parametrize("body", DISTINCT_BODIES)
def test_a_conjunct_moves_through_distinct_and_distinct_ons_keys(body):
    cat, rec = _maintained_and_recomputed(body)
    seg = next(ln for ln in str(cat.explain("mv")).splitlines() if "r * r" in ln)
    assert "abs(" in seg or "% 4" in seg, seg
    _changes_agree(cat, rec, body)


def test_a_conjunct_on_a_distinct_on_non_key_column_stays_above_it():
    # which row of a key DISTINCT ON keeps would change: s passes through but is no key
    p = plan("SELECT q, s, y FROM (SELECT DISTINCT ON (k) k AS q, r AS s, r * r AS y FROM reals ORDER BY k, r) u "
             "WHERE s::text <> '4' AND abs(q - 4) > 0", SCHEMAS).explain()
    lines = p.splitlines()
    top = next(i for i, ln in enumerate(lines) if "TopK" in ln)
    seg = next(ln for ln in lines if "r * r" in ln)
    # and, as on the recompute path (colmz.sql.pushdown), the item's other conjuncts with it
    assert "s::text" not in seg and any("s::text" in ln for ln in lines[:top]), p
    assert "abs(" not in seg and any("abs(" in ln for ln in lines[:top]), p


def test_the_pushed_join_and_distinct_views_equal_postgres():
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    with psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True) as conn:
        cat = colmz.Catalog()
        for s in SETUP:
            conn.execute(s)
            cat.execute(s)
        for i, body in enumerate(JOIN_BODIES + DISTINCT_BODIES):
            cat.execute(f"CREATE MATERIALIZED VIEW j{i} AS {body}")
        for change in CHANGES:
            conn.execute(change)
            cat.execute(change)
            for i, body in enumerate(JOIN_BODIES + DISTINCT_BODIES):
                want = sorted((tuple(r) for r in conn.execute(body).fetchall()), key=repr)
                assert _rows(cat, f"SELECT * FROM j{i}") == want, (body, change)
