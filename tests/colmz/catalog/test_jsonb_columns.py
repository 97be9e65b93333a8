"""A ``jsonb`` column holds PostgreSQL's jsonb text, whatever text was written to it.

colmz stores a jsonb column as text (``colmz.column_types``); a write (``INSERT``, ``UPDATE``)
reads each value as JSON and stores it as PostgreSQL prints the jsonb (``colmz.sql.write.
as_jsonb``), or raises PostgreSQL's error for text that is not JSON, writing nothing. The
expected texts are PostgreSQL 15's for the same statements.
"""

from __future__ import annotations

import pytest

import colmz
from colmz.sql import SQLError


def _table():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE jd (id INT, j JSONB, t TEXT)")
    return cat


def test_written_text_is_stored_as_postgresqls_jsonb_text():
    cat = _table()
    cat.execute("""INSERT INTO jd VALUES (1, '{"b":1,  "a": [1,2.50], "b": 2}', '{"b":1}'), (2, NULL, NULL)""")
    cat.execute("""INSERT INTO jd (j, id) SELECT '[1,{"y":1,"x":2, "é": -0, "aa": 1e2}]', 3""")
    cat.execute("""UPDATE jd SET j = '{"zz":1,"a":0}' WHERE id = 2""")
    assert [tuple(r.values()) for r in cat.sql("SELECT * FROM jd ORDER BY id").to_pylist()] == [
        (1, '{"a": [1, 2.50], "b": 2}', '{"b":1}'),  # a text column keeps its text
        (2, '{"a": 0, "zz": 1}', None),
        (3, '[1, {"x": 2, "y": 1, "aa": 100, "é": 0}]', None),
    ]
    # so a comparison with a jsonb literal (itself jsonb's text) is PostgreSQL's
    assert cat.sql("""SELECT id FROM jd WHERE j = '{"zz": 1, "a": 0}'::jsonb""").to_pylist() == [{"id": 2}]


@pytest.mark.parametrize("stmt", ["INSERT INTO jd VALUES (4, 'not json', 'x')",
                                  "UPDATE jd SET j = '{\"a\": }' WHERE id = 1"])
def test_text_that_is_not_json_is_refused_and_nothing_is_written(stmt):
    cat = _table()
    cat.execute("""INSERT INTO jd VALUES (1, '{"a": 1}', 'x')""")
    now = cat.now
    with pytest.raises(SQLError, match="invalid input syntax for type json"):
        cat.execute(stmt)
    assert cat.now == now
    assert cat.sql("SELECT id, j FROM jd").to_pylist() == [{"id": 1, "j": '{"a": 1}'}]


def test_a_json_column_keeps_its_text_but_refuses_text_that_is_not_json():
    # PostgreSQL's json stores the input text verbatim (spacing, key order, repeated keys),
    # after checking that it is JSON.
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE js (id INT, j JSON)")
    cat.execute("""INSERT INTO js VALUES (1, '{"b": 1,  "a":2, "a": 3}'), (2, NULL)""")
    now = cat.now
    for stmt in ("INSERT INTO js VALUES (3, 'nope')", "UPDATE js SET j = '{\"a\": }' WHERE id = 1"):
        with pytest.raises(SQLError, match="invalid input syntax for type json"):
            cat.execute(stmt)
    assert cat.now == now
    assert cat.sql("SELECT j, j::jsonb AS b FROM js WHERE id = 1").to_pylist() == [
        {"j": '{"b": 1,  "a":2, "a": 3}', "b": '{"a": 3, "b": 1}'}]


@pytest.mark.parametrize("stmt", [
    "INSERT INTO jd (id, j) SELECT 5, t FROM jd WHERE id = 1",   # a text column
    "INSERT INTO jd (id, j) VALUES (5, '{\"a\"' || ':1}')",    # || of two literals is text
    "INSERT INTO jd (id, j) VALUES (5, '{}'::text)",              # a cast to text
    "INSERT INTO jd VALUES (5, upper('{}'), 'x')",                # a text function
    # a CASE or coalesce of untyped literals resolves to text (select_common_type)
    "INSERT INTO jd VALUES (5, CASE WHEN true THEN '{}' ELSE '[]' END, 'x')",
    "INSERT INTO jd VALUES (5, CASE WHEN true THEN '{}' END, 'x')",
    "INSERT INTO jd (id, j) VALUES (5, CASE WHEN false THEN NULL END)",  # all NULL: text too
    "INSERT INTO jd (id, j) VALUES (5, coalesce(NULL, '{}'))",
    "INSERT INTO jd (id, j) SELECT 5, coalesce(t, '{}') FROM jd",
    # an UPDATE's assignment is checked as an INSERT's value
    "UPDATE jd SET j = t WHERE id = 1",
    "UPDATE jd SET j = '{}'::text",
    "UPDATE jd SET j = CASE WHEN id = 1 THEN '[]' END",
])
def test_a_text_expression_into_a_jsonb_column_is_postgresqls_type_error(stmt):
    # PostgreSQL 15: no assignment cast from text to jsonb; only an untyped literal (or a
    # jsonb value, or NULL) is written to a jsonb column
    cat = _table()
    cat.execute("""INSERT INTO jd VALUES (1, '{"a": 1}', '{"b": 2}')""")
    now = cat.now
    with pytest.raises(SQLError, match='column "j" is of type jsonb but expression is of type text'):
        cat.execute(stmt)
    assert cat.now == now
    # a literal, NULL, a jsonb column and a json cast are written
    cat.execute("""INSERT INTO jd (id, j) VALUES (2, '{"c": 1}'), (3, NULL)""")
    cat.execute("INSERT INTO jd (id, j) SELECT 4, j FROM jd WHERE id = 1")
    cat.execute("""INSERT INTO jd (id, j) VALUES (6, '{"d": 1}'::json)""")
    cat.execute("INSERT INTO jd (id, j) VALUES (7, coalesce(NULL, '{}'::jsonb)), (8, NULL)")
    cat.execute("DELETE FROM jd WHERE id > 6")
    cat.execute("""UPDATE jd SET j = CASE WHEN id = 3 THEN j ELSE '{"e": 1}'::jsonb END WHERE id = 3""")
    assert cat.sql("SELECT id, j FROM jd ORDER BY id").to_pylist() == [
        {"id": 1, "j": '{"a": 1}'}, {"id": 2, "j": '{"c": 1}'}, {"id": 3, "j": None},
        {"id": 4, "j": '{"a": 1}'}, {"id": 6, "j": '{"d": 1}'}]


_TASK = """CREATE CONTINUAL TASK ct (k INT, j JSONB, t TEXT) ON INPUT src AS (
    INSERT INTO ct SELECT k, '{"b": 1,  "a":[1, 2.50]}', '{"b": 1}' FROM src WHERE k = 1;
    INSERT INTO ct SELECT k, js::jsonb, js::text FROM src WHERE k > 1)"""


def _task_rows(cat):
    return [tuple(r.values()) for r in cat.sql("SELECT * FROM ct ORDER BY k").to_pylist()]


@pytest.mark.parametrize("times", [1, 3])  # one time, and a batch of consecutive times
def test_a_continual_tasks_jsonb_column_holds_postgresqls_jsonb_text(times):
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE src (k INT, js JSON)")
    cat.execute(_TASK)
    rows = [(1, None), (2, '{"y": 1,  "x": 2}'), (3, '[1,  2.50]')]
    if times == 1:
        cat.execute("INSERT INTO src VALUES " + ", ".join(
            f"({k}, {'NULL' if j is None else repr(j)})" for k, j in rows))
    else:
        for k, j in rows:
            cat.execute(f"INSERT INTO src VALUES ({k}, {'NULL' if j is None else repr(j)})")
    assert _task_rows(cat) == [
        (1, '{"a": [1, 2.50], "b": 1}', '{"b": 1}'),  # the text column keeps its text
        (2, '{"x": 2, "y": 1}', '{"y": 1,  "x": 2}'),
        (3, '[1, 2.50]', '[1,  2.50]'),
    ]


def test_a_reopened_continual_task_still_writes_jsonb_text(tmp_path):
    cat = colmz.Catalog(tmp_path / "c")
    cat.execute("CREATE TABLE src (k INT, js JSON)")
    cat.execute(_TASK)
    cat.execute("""INSERT INTO src VALUES (2, '{"y": 1,  "x": 2}')""")
    del cat
    cat = colmz.Catalog(tmp_path / "c")
    cat.execute("""INSERT INTO src VALUES (3, '{"b": [],  "a": 0}')""")
    assert _task_rows(cat) == [(2, '{"x": 2, "y": 1}', '{"y": 1,  "x": 2}'),
                               (3, '{"a": 0, "b": []}', '{"b": [],  "a": 0}')]


@pytest.mark.parametrize("body", [
    "INSERT INTO cj SELECT k, CASE WHEN k > 0 THEN '{}' END FROM src",
    "INSERT INTO cj SELECT k, '{}'::text FROM src",
    "INSERT INTO cj SELECT k, coalesce(NULL, '[]') FROM src",
])
def test_a_continual_tasks_text_expression_into_jsonb_is_postgresqls_type_error(body):
    # as an INSERT's: PostgreSQL 15 refuses a text expression written to a jsonb column
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE src (k INT, js JSON)")
    with pytest.raises(SQLError, match='column "j" is of type jsonb but expression is of type text'):
        cat.execute(f"CREATE CONTINUAL TASK cj (k INT, j JSONB) ON INPUT src AS ({body})")
    cat.execute("CREATE CONTINUAL TASK cj (k INT, j JSONB) ON INPUT src AS ("
                "INSERT INTO cj SELECT k, js::jsonb FROM src; INSERT INTO cj SELECT k, '[]' FROM src)")
    cat.execute("""INSERT INTO src VALUES (1, '{"b": 1,  "a": 2}')""")
    assert sorted(tuple(r.values()) for r in cat.sql("SELECT * FROM cj").to_pylist()) == [
        (1, '[]'), (1, '{"a": 2, "b": 1}')]


@pytest.mark.parametrize("body", [
    "INSERT INTO cj SELECT k, s, s FROM src",  # a text column of the input
    "INSERT INTO cj SELECT src.k, src.s || '', NULL FROM src",
    "INSERT INTO cj SELECT k, '{}', NULL FROM src; INSERT INTO cj SELECT k, t, t FROM cj",  # the task's own
])
def test_a_continual_task_reading_a_text_column_into_jsonb_is_refused_at_create(tmp_path, body):
    # PostgreSQL 15 (and Materialize) have no assignment cast from text to jsonb: "column "j"
    # is of type jsonb but expression is of type text". colmz created the task (a text
    # column read might have been json) and wrote the text as jsonb
    cat = colmz.Catalog(tmp_path / "c")
    cat.execute("CREATE TABLE src (k INT, s TEXT, j JSONB, js JSON)")
    cat.execute("""INSERT INTO src VALUES (1, '{"a": 1}', '{"b": 2}', '{"c": 3}')""")
    with pytest.raises(SQLError, match=r'CONTINUAL TASK cj statement \d \(INSERT INTO cj\): column "j" is of '
                                       'type jsonb but expression is of type text'):
        cat.execute(f"CREATE CONTINUAL TASK cj (k INT, j JSONB, t TEXT) ON INPUT src AS ({body})")
    assert cat.names == ["src"]  # nothing created, nothing stored
    del cat
    cat = colmz.Catalog(tmp_path / "c")
    assert cat.names == ["src"]
    # a jsonb or json column (PostgreSQL's assignment cast from json), a cast, a literal
    cat.execute("CREATE CONTINUAL TASK cj (k INT, j JSONB, t TEXT) ON INPUT src AS ("
                "INSERT INTO cj SELECT k, j, s FROM src; INSERT INTO cj SELECT k, js, NULL FROM src; "
                "INSERT INTO cj SELECT k, s::jsonb, NULL FROM src; INSERT INTO cj SELECT k, '[]', t FROM cj)")
    assert sorted(tuple(r.values()) for r in cat.sql("SELECT * FROM cj").to_pylist()) == [
        (1, '{"a": 1}', None), (1, '{"b": 2}', '{"a": 1}'), (1, '{"c": 3}', None)]
