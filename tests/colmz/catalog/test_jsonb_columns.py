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
