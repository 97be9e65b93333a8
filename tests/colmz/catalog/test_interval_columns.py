"""Tables with ``INTERVAL`` columns: PostgreSQL's months, days and time, kept as written.

A column ``INTERVAL`` is Arrow's ``month_day_nano_interval``; a durable table stores it in
Parquet as a struct of its three fields and reads it back exactly. Values keep their written
form (``SELECT`` shows ``'1 mon'``), while comparisons, ``GROUP BY``, ``DISTINCT`` and
``DELETE ... WHERE d = ...`` use PostgreSQL's equality (``'1 mon' = '30 days'``). Checked
against PostgreSQL 15 (``CI=1``), fields compared exactly (``tests/interval_oracle.py``).
"""

from __future__ import annotations

import re
from collections import Counter

import pyarrow as pa
import pytest
from interval_oracle import colmz_rows, pg_rows, value
from sql_oracle import require

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

TABLE = "CREATE TABLE iv (id INT, d INTERVAL, ts TIMESTAMP)"
#: Inserts: literals of every unit, a value several written forms share, NULL, negative and
#: mixed-sign fields, expressions, timestamp differences.
INSERTS = [
    "INSERT INTO iv VALUES (1, '1 mon', '2024-01-01'), (2, '30 days', '2024-01-02 03:00'), "
    "(3, '720 hours', NULL), (4, NULL, '2024-01-31')",
    "INSERT INTO iv VALUES (5, interval '-1 days 02:03:04.5', '2024-02-29'), (6, '1 year 2 mons 3 days', NULL), "
    "(7, '-3 mons', '2023-12-31 23:59:59.999999'), (8, '00:00:00.000001', '2024-03-01')",
    "INSERT INTO iv VALUES (9, interval '1 year 2 mons 3 days' * 2, NULL), (10, interval '1 day' + interval '1 hour', NULL)",
    "INSERT INTO iv SELECT id + 100, ts - TIMESTAMP '2023-12-25', ts FROM iv WHERE ts IS NOT NULL",
]
CHANGES = [
    "UPDATE iv SET d = d + interval '1 day' WHERE id = 2",
    "DELETE FROM iv WHERE d = interval '1 mon'",  # '1 mon' and '720 hours' (PostgreSQL's equality)
    "UPDATE iv SET d = d * 3 WHERE d < interval '0'",
    "INSERT INTO iv VALUES (11, '2 weeks', NULL)",
]
QUERIES = [
    "SELECT id, d FROM iv",
    "SELECT id, d, ts + d AS later, d > interval '1 day' AS long FROM iv",
    "SELECT id FROM iv WHERE d = interval '30 days'",
    "SELECT count(*) AS n, count(d) AS nd, count(DISTINCT d) AS distinct_d FROM iv",
]
#: (query, interval column positions) whose interval columns are compared by value:
#: PostgreSQL shows one written form of a group of equal ones (which one depends on its plan).
BY_VALUE = [
    ("SELECT d, count(*) AS n FROM iv GROUP BY d", (0,)),
    ("SELECT min(d) AS lo, max(d) AS hi FROM iv", (0, 1)),
]


def test_interval_text_is_postgres(pg):
    # DuckDB signs each part; PostgreSQL signs a positive part after a negative one
    forms = ["-1 days 02:03:04.5", "-1 years 2 mons 3 days", "1 year -2 mons 3 days -01:00:00", "-1 mon 1 day",
             "-1 mon -1 day 00:00:01", "1 day -00:00:01", "-13 mons", "-00:00:00.5", "0", "-1 year 1 day"]
    pg.execute("DROP TABLE IF EXISTS it")
    cat = colmz.Catalog()
    for s in ["CREATE TABLE it (id INT, d INTERVAL)",
              "INSERT INTO it VALUES " + ", ".join(f"({i}, '{f}')" for i, f in enumerate(forms))]:
        pg.execute(s)
        cat.execute(s)
    q = "SELECT id, d::text AS t, 'x' || d AS u FROM it ORDER BY id"
    assert cat.sql(q).to_pylist() == [dict(zip(("id", "t", "u"), r)) for r in pg.execute(q).fetchall()]


def _valued(rows, positions):
    return Counter(tuple(value(v) if i in positions and v is not None else v for i, v in enumerate(r))
                   for r in rows)


def _compare(pg, cat, after: str) -> None:
    for q in QUERIES:
        cn, cr = colmz_rows(cat, q)
        pn, pr = pg_rows(pg, q)
        assert (cn, Counter(cr)) == (pn, Counter(pr)), f"{q} after {after}"
    for q, positions in BY_VALUE:
        cn, cr = colmz_rows(cat, q)
        pn, pr = pg_rows(pg, q)
        assert (cn, _valued(cr, positions)) == (pn, _valued(pr, positions)), f"{q} after {after}"


def test_interval_tables_equal_postgres(pg):
    pg.execute("DROP TABLE IF EXISTS iv")
    cat = colmz.Catalog()
    for s in [TABLE, *INSERTS, *CHANGES]:
        pg.execute(s)
        cat.execute(s)
        _compare(pg, cat, s)


def _contents(cat) -> Counter:
    return Counter(colmz_rows(cat, "SELECT id, d, ts FROM iv")[1])


def test_interval_tables_are_durable(tmp_path):
    mem = colmz.Catalog()
    cat = colmz.Catalog(tmp_path)
    for s in [TABLE, *INSERTS, *CHANGES]:
        mem.execute(s)
        cat.execute(s)
        cat = colmz.Catalog(tmp_path)  # reopened: the catalog's column type, the parts' intervals
        assert cat.object("iv").schema[1].type == pa.month_day_nano_interval()
        assert _contents(cat) == _contents(mem), s
    # written forms kept: '1 mon' and '720 hours' deleted as equal to '1 mon', '31 days' kept
    assert (2, (0, 31, 0), (2024, 1, 2, 3)) not in _contents(cat)
    got = {r[0]: r[1] for r in _contents(cat)}
    assert got[2] == (0, 31, 0) and 1 not in got and 3 not in got and got[6] == (14, 3, 0)


def test_interval_extremes_survive_storage(tmp_path):
    t = pa.month_day_nano_interval()
    values = [(2**31 - 1, 2**31 - 1, 9_223_372_036_854_775_000), (-(2**31), -(2**31), -9_223_372_036_854_775_000),
              (0, 0, 0),
              (1, -30, 0), (0, 1, -86_400 * 10**9), None, (-1, 0, 999_000)]
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE e (k INT, d INTERVAL)")
    cat.append("e", pa.table({"k": pa.array(range(len(values)), pa.int32()), "d": pa.array(values, t)}))
    back = colmz.Catalog(tmp_path).sql("SELECT k, d FROM e ORDER BY k").column("d").to_pylist()
    assert [None if v is None else (v.months, v.days, v.nanoseconds) for v in back] == values


@pytest.mark.parametrize("written", ["INTERVAL DAY", "INTERVAL(0)", "INTERVAL HOUR TO MINUTE", "interval year"])
def test_interval_fields_and_precision_are_refused_by_name(written):
    cat = colmz.Catalog()
    with pytest.raises(colmz.sql.UnsupportedSQL, match=rf"(?i)column type {re.escape(written)}.*fields or precision"):
        cat.execute(f"CREATE TABLE t (k {written})")
    cat.execute("CREATE TABLE t (k INTERVAL)")  # none was made


def test_continual_tasks_and_constant_views_hold_intervals(tmp_path):
    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE s (k INT); CREATE CONTINUAL TASK c (i INTERVAL) ON INPUT s AS "
                "(INSERT INTO c SELECT INTERVAL '1 day' * k FROM s)")
    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT INTERVAL '1 mon' AS i")
    cat.execute("INSERT INTO s VALUES (1), (2)")
    cat = colmz.Catalog(tmp_path)  # reopened: the task's and the view's interval columns read back
    cat.execute("INSERT INTO s VALUES (3)")
    assert colmz_rows(cat, "SELECT i FROM c ORDER BY i")[1] == [((0, 1, 0),), ((0, 2, 0),), ((0, 3, 0),)]
    assert colmz_rows(cat, "SELECT i FROM v")[1] == [((1, 0, 0),)]


def test_an_interval_finer_than_microseconds_is_refused_before_anything_changes():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE e (k INT, d INTERVAL)")
    bad = pa.table({"k": pa.array([1, 2], pa.int32()),
                    "d": pa.array([(0, 0, 1000), (0, 1, 1500)], pa.month_day_nano_interval())})
    with pytest.raises(ValueError, match="column 'd' holds an interval of 1500 nanoseconds"):
        cat.append("e", bad)
    assert cat.sql("SELECT count(*) AS n FROM e").to_pylist() == [{"n": 0}]
    cat.append("e", bad.slice(0, 1))
    assert colmz_rows(cat, "SELECT k, d FROM e")[1] == [(1, (0, 0, 1))]
