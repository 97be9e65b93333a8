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
from colmz.dataflow.plan_nodes import Get, MapFilter, Reduce, SqlMapFilter
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


# ---- below a grouping: a filter on a grouped subquery's (or CTE's) group keys

GROUPED_SETUP = ["CREATE TABLE g (k BIGINT, f DOUBLE PRECISION, j BIGINT)",
                 "INSERT INTO g VALUES (1, 1.5, 1), (2, 2.0, 1), (2, -1.0, 2), (4, 3.0, 1)"]
#: Each commit keeps the kept groups changing; the second puts 1e308-size values into the
#: group k = 4, whose sum, average and variance overflow (PostgreSQL raises for them).
GROUPED_CHANGES = [["INSERT INTO g VALUES (1, 2.5, 2), (5, 1.0, 1)"],
                   ["INSERT INTO g VALUES (4, 1e308, 1), (4, 1e308, 1), (4, -1e308, 2)", "DELETE FROM g WHERE k = 2"],
                   ["UPDATE g SET f = f + 1 WHERE k = 1", "INSERT INTO g VALUES (4, 1e308, 1), (2, 7.0, 3)"]]
#: Bodies whose outer conjuncts read only the grouping's keys and drop the group k = 4,
#: as PostgreSQL (and the recompute path, colmz.sql.pushdown) filter it before grouping.
GROUPED_BODIES = [
    "SELECT * FROM (SELECT k, avg(f) AS a FROM g GROUP BY k) q WHERE abs(k - 1) < 1",
    "SELECT * FROM (SELECT k, avg(f) AS a, var_pop(f) AS v FROM g GROUP BY k) q WHERE k <> 4",
    "SELECT * FROM (SELECT k, count(*) AS n, sum(f) AS s FROM g GROUP BY k) q WHERE (k % 4) <> 0",
    "WITH q AS (SELECT k, j, sum(f) AS s FROM g GROUP BY k, j) SELECT * FROM q WHERE abs(k - 4) > 0 AND j > 0",
    "SELECT * FROM (SELECT j, k AS kk, avg(f) AS a, stddev_samp(f) AS d FROM g GROUP BY k, j) q "
    "WHERE abs(kk - 4) > 0 AND abs(j) < 5",
    "SELECT * FROM (SELECT j, k AS kk, avg(f) AS a FROM g GROUP BY j, k HAVING count(*) > 0) q WHERE kk::text <> '4'",
    "SELECT q.k, q.a, h.j FROM (SELECT k, avg(f) AS a FROM g GROUP BY k) q JOIN g h ON h.k = q.k WHERE abs(q.k - 4) > 0",
]


def _grouped(body, views="incremental"):
    cat = colmz.Catalog(views=views)
    for s in GROUPED_SETUP:
        cat.execute(s)
    cat.execute(f"CREATE MATERIALIZED VIEW mv AS {body}")
    return cat


def _below_the_grouping(cat):
    # every filter of the plan sits below its Reduce: none is left above a grouping
    lines = str(cat.explain("mv")).splitlines()
    reduce = next(i for i, ln in enumerate(lines) if "Reduce group_by" in ln)
    filters = [i for i, ln in enumerate(lines) if "MapFilter via SQL" in ln or "MapFilter where=" in ln]
    return bool(filters) and min(filters) > reduce


@pytest.mark.parametrize("body", GROUPED_BODIES)
def test_a_filter_on_group_keys_runs_below_the_grouping(body):
    cat, rec = _grouped(body), _grouped(body, "recompute")
    assert cat.object("mv").maintained.incremental and not cat.object("mv").maintained.plan.fallbacks()
    assert _below_the_grouping(cat), cat.explain("mv")
    for change in GROUPED_CHANGES:
        for c in (cat, rec):
            c.execute("; ".join(change))  # the overflowing group is dropped: no commit raises
        assert _rows(cat, "SELECT * FROM mv") == _rows(rec, "SELECT * FROM mv") == _rows(cat, body)


def test_the_overflowing_group_raises_when_the_filter_does_not_drop_it():
    # the oracle of the commit above: grouped without the filter, the commit raises and is
    # rolled back; with a conjunct on an aggregate, none moves (all or none, as the
    # recompute path decides), so both paths compute the group and raise alike
    bodies = ["SELECT k, avg(f) AS a FROM g GROUP BY k",
              "SELECT * FROM (SELECT k, avg(f) AS a FROM g GROUP BY k) q WHERE abs(k - 1) < 1 AND a > -1e300"]
    for body in bodies:
        cat, rec = _grouped(body), _grouped(body, "recompute")
        if body != bodies[0]:
            assert not _below_the_grouping(cat), cat.explain("mv")
        cat.execute("; ".join(GROUPED_CHANGES[0]))
        rec.execute("; ".join(GROUPED_CHANGES[0]))
        before = _rows(cat, "SELECT * FROM mv")
        for c in (cat, rec):
            with pytest.raises(Exception, match="out of range"):
                c.execute("; ".join(GROUPED_CHANGES[1]))
        assert _rows(cat, "SELECT * FROM mv") == before == _rows(rec, "SELECT * FROM mv")


def test_a_filter_on_group_keys_is_below_the_reduce_in_the_plan():
    schemas = {"g": {"k": pa.int64(), "f": pa.float64(), "j": pa.int64()}}
    p = plan("SELECT * FROM (SELECT k AS q, count(*) AS n FROM g GROUP BY k) u WHERE q <> 4 AND abs(q) < 9", schemas)
    red = p.root
    while not isinstance(red, Reduce):
        red = red.inputs[0]
    # the native conjunct and the SQL one, renamed to the reduce's input column t.k
    assert isinstance(red.input, MapFilter) and [str(w) for w in red.input.where] == ["g.k <> 4"]
    assert isinstance(red.input.input, SqlMapFilter) and red.input.input.where == ('abs("colmz_c0") < 9',)
    assert red.input.input.input == Get(red.input.schema, "g", "g", (("k", "g.k"), ("f", "g.f"), ("j", "g.j")))
    # a conjunct reading the count stays above, and the key's with it
    p = plan("SELECT * FROM (SELECT k AS q, count(*) AS n FROM g GROUP BY k) u WHERE q <> 4 AND n > 1", schemas)
    red = p.root
    while not isinstance(red, Reduce):
        red = red.inputs[0]
    assert isinstance(red.input, Get), p.explain()
    # a CTE referenced twice is not inlined by the recompute path: the filter stays above
    for body in ["WITH c AS (SELECT k, count(*) AS n FROM g GROUP BY k) SELECT * FROM c WHERE k <> 4 "
                 "UNION ALL SELECT * FROM c",
                 "WITH c AS (SELECT k, count(*) AS n FROM g GROUP BY k) SELECT * FROM c WHERE abs(k - 4) > 0 "
                 "AND k IN (SELECT k FROM c)"]:
        lines = plan(body, schemas).explain().splitlines()
        filt = next(i for i, ln in enumerate(lines) if "g.k <> 4" in ln or "abs(k - 4)" in ln)
        assert filt < next(i for i, ln in enumerate(lines) if "Reduce" in ln), lines


def test_the_grouped_pushed_views_equal_postgres():
    require("psycopg", "the PostgreSQL oracle needs psycopg")
    import psycopg
    from storage_servers import fresh_schema_url

    with psycopg.connect(fresh_schema_url(oracle_url()), autocommit=True) as conn:
        cat = colmz.Catalog()
        rec = colmz.Catalog(views="recompute")
        for s in GROUPED_SETUP:
            conn.execute(s)
            cat.execute(s)
            rec.execute(s)
        for i, body in enumerate(GROUPED_BODIES):
            for c in (cat, rec):
                c.execute(f"CREATE MATERIALIZED VIEW g{i} AS {body}")
        for change in GROUPED_CHANGES:
            for s in change:
                conn.execute(s)  # PostgreSQL answers: the group k = 4 is filtered before grouping
            for c in (cat, rec):
                c.execute("; ".join(change))
            for i, body in enumerate(GROUPED_BODIES):
                want = sorted((tuple(r) for r in conn.execute(body).fetchall()), key=repr)
                got = _rows(cat, f"SELECT * FROM g{i}")
                assert got == _rows(rec, f"SELECT * FROM g{i}"), (body, change)
                assert len(got) == len(want) and all(
                    a == b or all(x == y or isinstance(x, float) and abs(x - float(y)) <= 1e-9 * abs(x)
                                  for x, y in zip(a, b)) for a, b in zip(got, want)), (body, change, got, want)
