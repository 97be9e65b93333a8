"""Interval columns in arithmetic and aggregates, against PostgreSQL 15 (``CI=1``).

``d * n``, ``n * d``, ``d / n`` of an interval column with an integer, real, double or numeric
``n`` (a column or a literal) are PostgreSQL's ``interval_mul``/``interval_div`` (fractions of
a month cascade down as 30 days, of a day as 24 hours); ``sum(d)`` adds each field alone
(``interval_pl``), as an aggregate, with ``FILTER``, per group and as a window;
``avg(d)`` is ``interval_avg``; ``percentile_cont`` interpolates with ``interval_lerp``;
``percentile_disc``, ``min`` and ``max`` order as PostgreSQL does. Fields are compared
exactly (``tests/interval_oracle.py``); where PostgreSQL may pick either of two equal written
forms (a percentile between ties), by value.
"""

from __future__ import annotations

from collections import Counter

import pytest
from interval_oracle import colmz_rows, pg_rows, value
from sql_oracle import catalog_beside, require

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

SETUP = [
    "CREATE TABLE ia (id INT, g INT, d INTERVAL, k INT, f DOUBLE PRECISION, r REAL)",
    "INSERT INTO ia VALUES (1, 1, '1 mon 2 days 03:00', 3, 2.5, 0.5), (2, 1, '40 days -1 hour', 7, 0.3, 1.5), "
    "(3, 2, '1 year 00:00:00.5', 2, 4, 3), (4, 2, NULL, 1, 1, 1), (5, 1, '-1 mon 3 days', -4, 0.7, 0.1), "
    "(6, 3, '00:00:00.000001', 5, 1e-3, 2.5), (7, 3, '1 mon', 6, 1.1, NULL), (8, 3, '30 days', NULL, 3.3, 7), "
    "(9, 2, '-2 years 11 mons -40 days 100:00:01', 9, -0.45, -2)",
]
#: (query, names of interval columns compared by value)
QUERIES = [
    ("SELECT id, d * 1.5 AS a, 1.5 * d AS b, d / 3 AS c, d * 0.3 AS e, d / 0.7 AS h FROM ia", ()),
    ("SELECT id, d * k AS a, k * d AS b, d / k AS c FROM ia WHERE k <> 0", ()),
    ("SELECT id, d * f AS a, f * d AS b, d / f AS c, d * r AS e, d / r AS h FROM ia", ()),
    ("SELECT id, d * 2.5 + d / 4 AS c, -(d * r) AS e FROM ia", ()),
    ("SELECT sum(d) AS s, avg(d) AS a, count(d) AS n FROM ia", ()),
    ("SELECT g, sum(d) AS s, avg(d) AS a, sum(d * f) AS sf FROM ia GROUP BY g", ()),
    ("SELECT g, sum(d) FILTER (WHERE k > 2) AS s, avg(d) FILTER (WHERE f < 1) AS a FROM ia GROUP BY g", ()),
    ("SELECT sum(d) AS s, avg(d) AS a FROM ia WHERE id > 100", ()),
    ("SELECT id, sum(d) OVER (ORDER BY id) AS s, avg(d) OVER (PARTITION BY g) AS a FROM ia", ()),
    ("SELECT id, sum(d) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM ia", ()),
    ("SELECT id, sum(d) FILTER (WHERE k > 2) OVER (PARTITION BY g) AS s FROM ia", ()),
    ("SELECT g, s FROM (SELECT g, sum(d) AS s FROM ia GROUP BY g) x WHERE s > interval '1 day'", ()),
    ("SELECT g, (SELECT sum(i.d) FROM ia i WHERE i.g = o.g) AS s FROM ia o", ()),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d) AS m, percentile_cont(0.3) WITHIN GROUP (ORDER BY d) "
     "AS p FROM ia", ()),
    ("SELECT g, percentile_cont(0.75) WITHIN GROUP (ORDER BY d) AS a, percentile_cont(0.2) WITHIN GROUP "
     "(ORDER BY d DESC) AS b, percentile_cont(0.4) WITHIN GROUP (ORDER BY d) FILTER (WHERE id <> 5) AS c "
     "FROM ia GROUP BY g", ("a", "b", "c")),
    ("SELECT percentile_cont(0) WITHIN GROUP (ORDER BY d) AS a, percentile_cont(1) WITHIN GROUP (ORDER BY d) AS b, "
     "percentile_cont(0.5) WITHIN GROUP (ORDER BY d) FILTER (WHERE false) AS c FROM ia", ()),
    ("SELECT g, percentile_disc(0.5) WITHIN GROUP (ORDER BY d) AS p, min(d) AS lo, max(d) AS hi FROM ia GROUP BY g",
     ("p", "lo", "hi")),
]
#: Queries printing intervals as text (PostgreSQL's interval output, IntervalStyle postgres)
TEXTS = [
    "SELECT id, (d * f)::text AS a, (d / k)::text AS b, (1.5 * d)::text AS c FROM ia WHERE k <> 0",
    "SELECT sum(d)::text AS s, avg(d)::text AS a, 'x' || sum(d) AS t FROM ia",
    "SELECT g, sum(d)::text AS s FROM ia GROUP BY g",
]
#: (query, PostgreSQL's message): errors colmz raises with PostgreSQL's words
ERRORS = [
    ("SELECT d / 0 FROM ia", "division by zero"),
    ("SELECT d * 1e10 FROM ia", "interval out of range"),
    ("SELECT percentile_cont(1.5) WITHIN GROUP (ORDER BY d) FROM ia", "percentile value 1.5 is not between 0 and 1"),
]


def _bag(names, rows, by_value) -> Counter:
    at = {i for i, n in enumerate(names) if n in by_value}
    return Counter(tuple(value(v) if i in at and v is not None else v for i, v in enumerate(r)) for r in rows)


@pytest.fixture(scope="module")
def both(pg):
    return catalog_beside(pg, SETUP, ("ia",))


@pytest.mark.parametrize("query, by_value", QUERIES)
def test_interval_arithmetic_and_aggregates_equal_postgres(both, query, by_value):
    pg, cat = both
    cn, cr = colmz_rows(cat, query)
    pn, pr = pg_rows(pg, query)
    assert cn == pn
    assert _bag(cn, cr, by_value) == _bag(pn, pr, by_value)


@pytest.mark.parametrize("query", TEXTS)
def test_interval_text_equals_postgres(both, query):
    pg, cat = both
    cur = pg.execute(query)
    assert cat.sql(query).column_names == [d.name for d in cur.description]
    assert Counter(tuple(r.values()) for r in cat.sql(query).to_pylist()) == Counter(cur.fetchall())


@pytest.mark.parametrize("query, message", ERRORS)
def test_interval_errors_are_postgresqls(both, query, message):
    import psycopg

    pg, cat = both
    with pytest.raises(psycopg.Error, match=message):
        pg.execute(query).fetchall()
    with pytest.raises(colmz.sql.SQLError) as ours:
        cat.sql(query)
    assert str(ours.value) == message


def test_a_sum_past_an_int32_of_months_is_out_of_range(pg):
    pg.execute("DROP TABLE IF EXISTS ib")
    cat = colmz.Catalog()
    for s in ["CREATE TABLE ib (d INTERVAL)", "INSERT INTO ib VALUES ('2000000000 mons'), ('2000000000 mons')"]:
        pg.execute(s)
        cat.execute(s)
    import psycopg

    with pytest.raises(psycopg.Error, match="interval out of range"):
        pg.execute("SELECT sum(d) FROM ib").fetchall()
    with pytest.raises(colmz.sql.SQLError, match="^interval out of range$"):
        cat.sql("SELECT sum(d) FROM ib")


@pytest.mark.parametrize("query, construct", [
    ("SELECT sum(DISTINCT d) FROM ia", r"sum\(DISTINCT \.\.\.\) of an interval"),
    ("SELECT avg(DISTINCT d) FROM ia", r"avg\(DISTINCT \.\.\.\) of an interval"),
    ("SELECT percentile_cont(ARRAY[0.1, 0.5]) WITHIN GROUP (ORDER BY d) FROM ia", "an array of fractions"),
])
def test_what_colmz_cannot_answer_as_postgresql_is_refused_by_name(query, construct):
    cat = colmz.Catalog()
    for s in SETUP:
        cat.execute(s)
    with pytest.raises(colmz.sql.UnsupportedSQL, match=construct):
        cat.sql(query)
