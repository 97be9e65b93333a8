"""Maintained views whose answer hangs on a column being jsonb: a jsonb column compared with a
string literal (``=``, ``<>``, ``IN``, either side; in ``WHERE``, a select item, ``HAVING``,
a join's ``ON``, a window's partition), ``||`` of two jsonb columns (in a select item, inside
an aggregate), through a table and a materialized view's columns. colmz.sql.jsonbcols' rules
apply to the planner's SQL segments and native predicates as to the query
(``colmz.dataflow.plan``'s ``kinds``): each view is planned without a Fallback and equals the
recompute path and PostgreSQL 15 after inserts (duplicates, NULL documents), deletes and
updates that move a document onto and off the literal."""

from __future__ import annotations

import pytest
from reference_models import check_script
from sql_oracle import jsonb_text_connection

import colmz

pytestmark = pytest.mark.filterwarnings("ignore::colmz.dataflow.maintained.FallbackWarning")

TABLE = "CREATE TABLE e (k INT, j JSONB, b JSONB, s TEXT)"
#: A view the others may read (its columns' kinds are its query's: j stays jsonb).
BASE = ("base", "SELECT k, j FROM e WHERE k IS NOT NULL")

#: (name, body): each was refused at CREATE while the operators read jsonb columns as text.
BODIES = [
    ("eq", """SELECT e.k FROM e WHERE e.j = '{"a":1}'"""),
    ("eq_left", """SELECT k, s FROM e WHERE '{"t": [1,2],"a":1}' = j"""),
    ("ne_item", """SELECT k, j <> '{"a": 1, "t": [1,2]}' AS n FROM e"""),
    ("in_list", """SELECT k FROM e WHERE j IN ('{"a":1}', '[1,2]') OR k > 5"""),
    ("concat", "SELECT k, j || b AS m FROM e"),
    ("hav", """SELECT j, count(*) AS n FROM e GROUP BY j HAVING j <> '[1,  2]'"""),
    ("join_on", """SELECT e.k, f.s FROM e JOIN e AS f ON e.k = f.k AND f.b = '{"x":"y"}'"""),
    ("agg_concat", "SELECT k % 2 AS g, string_agg((j || b)::text, ';' ORDER BY k, (j || b)::text) AS a "
                   "FROM e GROUP BY k % 2"),
    ("win", """SELECT k, sum(CASE WHEN j = '{"a":1}' THEN 1 ELSE 0 END) OVER (PARTITION BY s) AS n FROM e"""),
    ("grouped_win", """SELECT j, count(*) OVER () AS r FROM e WHERE j <> '{"a": 2}' GROUP BY j"""),
    ("over_view", """SELECT k FROM base WHERE j = '{"a":1}' AND k > 0"""),
    # the brief's other spellings: a jsonb operator's result compared, containment
    ("arrow", """SELECT k FROM e WHERE j -> 'a' = '1'"""),
    ("contains", """SELECT k FROM e WHERE j @> '{"a":1}'"""),
]

SCRIPT = [
    """INSERT INTO e VALUES (1, '{"a": 1}', '{"x": "y"}', 'p'), (2, '{"a":1,"t":[1, 2]}', '[3]', 'q'),
       (3, '[1, 2]', '{"x":"y"}', NULL), (4, NULL, '{"z": 1}', 'r'), (1, '{"a": 1}', '{"x": "y"}', 'p'),
       (5, '{"a": 2}', NULL, 's'), (NULL, '{"a":1}', '[]', NULL)""",
    "DELETE FROM e WHERE k = 1",  # a duplicated row retracted to none
    """INSERT INTO e VALUES (6, '{"t": [1, 2], "a": 1}', '{"x": "y"}', 't'), (7, '{"a": {"b": 1}}', '[1]', 'u')""",
    """UPDATE e SET j = '{"a": 1}' WHERE k = 5""",  # onto the literal
    """UPDATE e SET j = '{"a": 3}', b = '{"x": "y"}' WHERE k = 2 OR k IS NULL""",  # off it
    "DELETE FROM e WHERE k IN (3, 4)",
    "DELETE FROM e",
]


def catalogs() -> list[colmz.Catalog]:
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLE)
        for name, body in [BASE, *BODIES]:
            cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    return cats


def test_each_previously_refused_body_is_maintained_and_equals_the_recompute():
    cats = catalogs()
    for name, _ in [BASE, *BODIES]:
        mv = cats[0].object(name).maintained
        assert mv.incremental and mv.plan is not None and not mv.plan.fallbacks(), (name, mv.reasons)
    check_script(cats, SCRIPT)


def test_the_rules_reach_the_operators():
    # a literal holding a number is compared by value in a segment (jsonb's 1.0 is 1), one
    # holding none natively as the canonical jsonb text; || of two jsonb columns is the merge
    # in the segment that computes it (not text concatenation)
    cats = catalogs()
    text = str(cats[0].explain("eq"))
    assert """MapFilter via SQL [e.j = '{"a":1}']""" in text, text
    assert """where=[f.b = '{"x": "y"}']""" in str(cats[0].explain("join_on"))
    cats[0].execute(SCRIPT[0])
    assert sorted(cats[0].sql("SELECT k FROM eq").column("k").to_pylist(), key=repr) == [1, 1, None]
    merged = dict(zip(*cats[0].sql("SELECT k, m FROM concat WHERE k IN (2, 3)").columns))
    assert {k.as_py(): m.as_py() for k, m in merged.items()} == {2: '[{"a": 1, "t": [1, 2]}, 3]', 3: '[1, 2, {"x": "y"}]'}


#: Over a GROUP BY's written subquery, where the query path's rules would not resolve the
#: reference: recomputed (a Fallback naming it), never read as text.
GROUPED = [
    """SELECT j, rank() OVER (ORDER BY count(*)) AS r FROM e GROUP BY j HAVING j <> '{"a":1}'""",
    """SELECT j = '{"a":1}' AS x, count(*) OVER () AS r FROM e GROUP BY j""",
]


def test_a_jsonb_rule_over_grouped_rows_falls_back_and_equals_the_recompute():
    cats = [colmz.Catalog(views="incremental"), colmz.Catalog(views="recompute")]
    for cat in cats:
        cat.execute(TABLE)
        cat.execute(";\n".join(f"CREATE MATERIALIZED VIEW g{i} AS {b}" for i, b in enumerate(GROUPED)))
    for i in range(len(GROUPED)):
        mv = cats[0].object(f"g{i}").maintained
        reasons = [f.reason for f in mv.plan.fallbacks()]
        assert any("reads a jsonb column with a string literal" in r for r in reasons), reasons
    check_script(cats, SCRIPT)


def test_a_literal_that_is_not_json_is_postgresqls_error_at_create():
    cat = colmz.Catalog(views="incremental")
    cat.execute(TABLE)
    with pytest.raises(colmz.sql.SQLError, match="invalid input syntax for type json"):
        cat.execute("CREATE MATERIALIZED VIEW bad AS SELECT k FROM e WHERE j = 'nope'")
    assert "bad" not in cat.names


# ---------------------------------------------------------------------------- PostgreSQL 15


@pytest.fixture(scope="module")
def pg():
    conn = jsonb_text_connection()
    yield conn
    conn.close()


def _rows(names, rows) -> tuple[list[str], list[str]]:
    return list(names), sorted(repr(tuple(r)) for r in rows)


def test_each_previously_refused_body_equals_postgres(pg):
    pg.execute("DROP TABLE IF EXISTS e CASCADE")
    pg.execute(TABLE)
    cat = colmz.Catalog(views="incremental")
    cat.execute(TABLE)
    for name, body in [BASE, *BODIES]:
        pg.execute(f"CREATE VIEW {name} AS {body}")
        cat.execute(f"CREATE MATERIALIZED VIEW {name} AS {body}")
    compared = 0
    for step in ["creation", *SCRIPT]:
        if step != "creation":
            pg.execute(step)
            cat.execute(step)
        for name, _ in [BASE, *BODIES]:
            got = cat.sql(f"SELECT * FROM {name}")
            cur = pg.execute(f"SELECT * FROM {name}")
            want = _rows([d.name for d in cur.description], cur.fetchall())
            assert _rows(got.column_names, zip(*(c.to_pylist() for c in got.columns))) == want, (name, step)
            compared += 1
    assert compared == (len(BODIES) + 1) * (len(SCRIPT) + 1)
