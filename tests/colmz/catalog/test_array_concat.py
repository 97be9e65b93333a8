"""``||`` of array columns and ``UPDATE ... SET c = '<literal>'``, against PostgreSQL 15 (``CI=1``).

``a || b`` of array columns is PostgreSQL's ``array_cat`` (a NULL operand left out, NULL when
both are), ``a || x`` ``array_append`` and ``x || a`` ``array_prepend`` (a NULL array an
empty one), a ``NULL`` literal beside an array an array; a string literal beside one is
refused by name. An ``UPDATE``'s string literal takes its column's type, as an ``INSERT``'s
``VALUES`` do (an array's text, an interval's, a timestamp's, a number's).
"""

from __future__ import annotations

from collections import Counter

import pytest
from sql_oracle import catalog_beside, require

import colmz

require("duckdb", "Catalog needs duckdb (pip install 'colmz[sql]')")

SETUP = [
    "CREATE TABLE ac (id INT, a INT[], b INT[], t TEXT[], k INT)",
    "INSERT INTO ac VALUES (1, '{1,2}', '{3}', '{x,y}', 5), (2, NULL, '{4,NULL}', NULL, NULL), "
    "(3, '{}', NULL, '{}', 7), (4, NULL, NULL, NULL, 8), (5, '{NULL}', '{}', '{\"p q\"}', -1)",
]
QUERIES = [
    "SELECT id, a || b AS x, b || a AS y FROM ac",
    "SELECT id, a || 5 AS x, 5 || a AS y, a || k AS z, k || b AS w, a || NULL::int AS v FROM ac",
    "SELECT id, a || NULL AS x, NULL || b AS y FROM ac",
    "SELECT id, a || b || a AS x, (a || b) || (b || a) AS y, a || ARRAY[7, 8] AS z, ARRAY[0] || b AS w FROM ac",
    "SELECT id, (a || b)[1] AS x, array_length(a || b, 1) AS y, cardinality(b || k) AS z FROM ac",
    "SELECT id, t || 'z'::text AS x, 'w'::text || t AS y, t || t AS z FROM ac",
    "SELECT id, a || b AS x FROM ac WHERE a || b = ARRAY[1, 2, 3] OR a || b IS NULL",
    "SELECT s.id, s.a || s.b AS x FROM (SELECT id, a, b FROM ac) s",
]
UPDATES = [
    "UPDATE ac SET a = '{4,5}' WHERE id = 1",
    "UPDATE ac SET b = '{}', t = '{\"a b\",NULL,c}' WHERE id = 2",
    "UPDATE ac SET a = '{7}', k = '9' WHERE a IS NULL",
    "UPDATE ac SET a = a || b, b = '{1, 2 ,3}' WHERE id >= 3",
]


@pytest.fixture(scope="module")
def both(pg):
    return catalog_beside(pg, SETUP, ("ac",))


def _same(pg, cat, query: str) -> None:
    cur = pg.execute(query)
    got = cat.sql(query)
    assert got.column_names == [d.name for d in cur.description], query
    assert Counter(tuple(map(_hashable, r.values())) for r in got.to_pylist()) == \
        Counter(tuple(map(_hashable, r)) for r in cur.fetchall()), query


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


@pytest.mark.parametrize("query", QUERIES)
def test_concat_of_array_columns_equals_postgres(both, query):
    _same(*both, query)


def test_update_string_literals_take_their_column_type(pg):
    pg.execute("DROP TABLE IF EXISTS au")
    cat = colmz.Catalog()
    for s in ["CREATE TABLE au (id INT, a INT[], b INT[], t TEXT[], d INTERVAL, ts TIMESTAMP, f FLOAT8, z BOOLEAN)",
              "INSERT INTO au VALUES (1, '{1}', '{2}', '{x}', '1 day', '2024-01-01', 1.5, true), "
              "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
              *(s.replace("ac", "au").replace(", k = '9'", ", f = 'NaN'")
                for s in UPDATES),
              "UPDATE au SET d = '1 mon -2 days', ts = '2024-02-29 12:00', z = 'f' WHERE id = 2"]:
        pg.execute(s)
        cat.execute(s)
        _same(pg, cat, "SELECT id, a, b, t, d::text AS d, ts, f::text AS f, z FROM au")


@pytest.mark.parametrize("query", ["SELECT a || '{7}' FROM ac", "SELECT '{7}' || b FROM ac"])
def test_a_string_beside_an_array_is_refused_by_name(both, query):
    with pytest.raises(colmz.sql.UnsupportedSQL, match=r"\|\| of an array and a string literal"):
        both[1].sql(query)


def test_a_malformed_update_literal_raises_postgresqls_error(both):
    pg, cat = both
    import psycopg

    with pytest.raises(psycopg.Error, match="malformed array literal"):
        pg.execute("UPDATE ac SET a = '{{1},{2,3}}' WHERE id = 1")
    before = cat.sql("SELECT * FROM ac").to_pylist()
    with pytest.raises(colmz.sql.SQLError, match="malformed array literal"):
        cat.execute("UPDATE ac SET a = '{{1},{2,3}}' WHERE id = 1")
    assert cat.sql("SELECT * FROM ac").to_pylist() == before
