"""A derived select item without an alias is named by PostgreSQL's rule
(``colmz.sql.parse.output_names``): ``count(*)`` is ``count``, ``lower(s)`` is ``lower``, a
cast ``v::int`` is ``v``, a scalar subquery its own column's name, an operator's result
``?column?``. A query reading a CTE's, a ``FROM`` subquery's or a ``LATERAL`` subquery's
derived column by that name plans without a Fallback, and each body equals the recompute
path and PostgreSQL 15 after inserts (NULLs, duplicates), updates and deletes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from reference_models import catalogs, check_script
from sql_oracle import views_equal_postgres

from colmz.dataflow.plan import plan

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

SCHEMAS = {"t": {"k": pa.int64(), "v": pa.int64(), "s": pa.string()}, "u": {"k": pa.int64(), "w": pa.string()},
           "r": {"k": pa.int64(), "b": pa.bool_(), "x": pa.float64()}}

BODIES = [
    "WITH c AS (SELECT k, count(*) FROM t GROUP BY k) SELECT k, count FROM c",
    "WITH c AS (SELECT count(*), max(v) FROM t) SELECT count, max FROM c",
    "WITH c AS (SELECT k, lower(s) FROM t) SELECT k, lower FROM c WHERE lower <> 'b'",
    "SELECT k, upper, v FROM (SELECT k, upper(s), v::int FROM t) s",
    "SELECT u.k, count FROM u, LATERAL (SELECT count(*) FROM t WHERE t.k = u.k) c",
    "SELECT k, max FROM (SELECT k, (SELECT max(v) FROM t) FROM u) s",
    "SELECT k, max, \"?column?\" AS k1 FROM (SELECT k, max(v), k + 1 FROM t GROUP BY k) s",
    "WITH c AS (SELECT k, count(*) FROM t GROUP BY k) SELECT k, count FROM c ORDER BY count DESC, k LIMIT 2",
    "SELECT count, bool_and FROM (SELECT k, count(x), bool_and(b) FROM r GROUP BY k) s",
]

#: ``ORDER BY v`` beside an item ``v::text``: PostgreSQL sorts by the output column (as
#: text), the query path -- the recompute -- by the input column; the plan follows the
#: recompute path (a difference of colmz.sql's, not of the names), so this body is compared
#: with the recompute only.
SHADOWED = ["SELECT k, v::text FROM t ORDER BY v, k LIMIT 3"]

SCRIPT = [
    "INSERT INTO t VALUES (1, 2, 'a'), (2, 5, 'B'), (NULL, 7, 'a'), (3, NULL, NULL), (2, 5, 'b'), (4, 4, 'x')",
    "INSERT INTO u VALUES (1, 'a'), (2, 'c'), (2, 'b'), (NULL, 'a'), (4, NULL)",
    "INSERT INTO r VALUES (1, true, 0.5), (2, false, -1.0), (3, NULL, 2.0), (4, true, -0.25), (1, true, 0.5)",
    "UPDATE t SET v = v + 8 WHERE k >= 4",  # 12 sorts after 2, before it as text
    "UPDATE t SET v = 9 WHERE k = 1",
    "UPDATE t SET v = 0, s = 'a' WHERE k = 2",
    "UPDATE r SET b = NOT b WHERE k IN (1, 2)",
    "DELETE FROM t WHERE s = 'a'; DELETE FROM u WHERE k = 2",
    "DELETE FROM r WHERE x > 0",
    "DELETE FROM t",
]


def test_each_body_plans_without_a_fallback_and_equals_the_recompute():
    check_script(catalogs(BODIES + SHADOWED), SCRIPT)  # catalogs asserts no Fallback


def test_derived_items_are_named_as_postgresql_names_them():
    p = plan("SELECT k, count(*), upper(s), v::int, k + 1 FROM t GROUP BY k, s, v", SCHEMAS)
    assert not p.fallbacks()
    assert p.names == ["k", "count", "upper", "v", "?column?"]
    p = plan("SELECT k, (SELECT max(w) FROM u), CAST(s AS TEXT) FROM t", SCHEMAS)
    assert not p.fallbacks()
    assert p.names == ["k", "max", "s"]
    # repeated names are made unique, as every output column's name is
    assert plan("SELECT count(*), count(v) FROM t", SCHEMAS).names == ["count", "count_2"]


def test_each_body_equals_postgres(pg):
    from test_maintained import TABLES

    for b in BODIES:
        assert not plan(b, SCHEMAS).fallbacks(), b
    assert views_equal_postgres(pg, TABLES, BODIES, SCRIPT) == len(BODIES) * (len(SCRIPT) + 1)


#: A name two columns of a subquery or CTE share, read by name: PostgreSQL's error (the
#: planner read the first of them); ``*`` still reads both, a column alias names one apart.
AMBIGUOUS = [
    "SELECT count FROM (SELECT count(*), count(v) FROM t) s",
    "SELECT s.count FROM (SELECT count(*), count(v) FROM t) s",
    "WITH c AS (SELECT count(*), count(v) FROM t) SELECT count FROM c",
    "SELECT * FROM (SELECT count(*), count(v) FROM t) s WHERE count > 0",
    "SELECT 1 FROM (SELECT k, v AS k FROM t) s GROUP BY k",
    "SELECT k FROM (SELECT k, v AS k FROM t) s ORDER BY k LIMIT 1",
    "SELECT k FROM (SELECT k, k FROM t) s",
]


@pytest.mark.parametrize("body", AMBIGUOUS)
def test_a_name_two_columns_share_is_ambiguous(body):
    from test_maintained import TABLES

    import colmz
    from colmz.dataflow.plan_binding import PlanError

    name = "count" if "count" in body else "k"
    with pytest.raises(PlanError, match=f'column reference "{name}" is ambiguous'):
        plan(body, SCHEMAS)
    cat = colmz.Catalog()
    cat.execute("; ".join(TABLES))
    for how in (cat.sql, lambda q: cat.execute(f"CREATE MATERIALIZED VIEW a AS {q}")):
        with pytest.raises(Exception, match=f'column reference "{name}" is ambiguous'):
            how(body)


def test_names_apart_stay_readable():
    assert plan("SELECT * FROM (SELECT count(*), count(v) FROM t) s", SCHEMAS).names == ["count", "count_2"]
    # the renamed copy is no name PostgreSQL knows
    with pytest.raises(ValueError, match="'count_2' does not exist"):
        plan("SELECT count_2 FROM (SELECT count(*), count(v) FROM t) s", SCHEMAS)
    assert plan("SELECT count FROM (SELECT count(*), count(v) FROM t) s(c)", SCHEMAS).names == ["count"]
    assert plan("SELECT v, a FROM (SELECT k AS v, v FROM t) s (a)", SCHEMAS).names == ["v", "a"]


def test_ambiguous_references_raise_as_postgres_does(pg):
    import psycopg
    from test_maintained import TABLES

    pg.execute("DROP TABLE IF EXISTS t, u, r CASCADE")
    for s in TABLES:
        pg.execute(s)
    for body in AMBIGUOUS:
        with pytest.raises(psycopg.errors.AmbiguousColumn, match="is ambiguous"):
            pg.execute(body)
