"""What a new user sees first in Python: reprs, whole explain tables, messages that say why.

Each test reproduces a reported first-hour failure: ``<colmz.catalog.Catalog object at 0x...>``
in a notebook, a truncated ``explain()`` in a terminal, a reopened catalog saying a task that
existed "did not exist", ``SELEC`` reported as unsupported rather than mistyped.
"""

from __future__ import annotations

import pytest

import colmz
from colmz.as_of import Dataflow, Export, select_as_ofs
from colmz.sql import SQLError, UnsupportedSQL

UPSERT = """CREATE CONTINUAL TASK upsert (key INT, val INT) ON INPUT append_only AS (
    DELETE FROM upsert WHERE key IN (SELECT key FROM append_only);
    INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key)"""


def upsert_catalog(path=None) -> colmz.Catalog:
    cat = colmz.Catalog(path)
    cat.execute("CREATE TABLE append_only (key INT, val INT)")
    cat.execute(UPSERT)
    for i in range(5):
        cat.execute(f"INSERT INTO append_only VALUES ({i % 2}, {i})")
    return cat


def test_a_reopened_catalog_says_why_it_cannot_read_back(tmp_path):
    cat = upsert_catalog(str(tmp_path / "cat"))
    assert cat.sql("SELECT count(*) AS n FROM upsert", as_of=3).to_pylist() == [{"n": 2}]
    again = colmz.Catalog(str(tmp_path / "cat"))
    for read in (lambda: again.sql("SELECT * FROM upsert", as_of=3), lambda: again.read("upsert", as_of=3)):
        with pytest.raises(ValueError) as e:
            read()
        msg = str(e.value)
        assert "did not exist" not in msg  # it did exist at time 3
        assert "reopened at time 5" in msg and "reads no further back" in msg
    # an object created later still did not exist
    cat2 = colmz.Catalog()
    cat2.execute("CREATE TABLE a (k INT)")
    cat2.execute("INSERT INTO a VALUES (1)")
    cat2.execute("INSERT INTO a VALUES (2)")
    cat2.execute("CREATE TABLE late (k INT)")
    with pytest.raises(ValueError, match="'late' did not exist at time 0"):
        cat2.sql("SELECT * FROM late", as_of=0)


def test_catalog_and_task_reprs_say_what_they_hold(tmp_path):
    cat = upsert_catalog(str(tmp_path / "cat"))
    r = repr(cat)
    assert "object at 0x" not in r
    assert r == (f"Catalog(path={str(tmp_path / 'cat')!r}, now=5: append_only (table), "
                 "upsert (continual task))")
    assert repr(colmz.Catalog()) == "Catalog(in memory, now=0: no objects)"
    html = cat._repr_html_()
    assert "2 objects, now 5, stored in" in html
    for needle in ("append_only", "continual task", "<th", "key int32"):
        assert needle in html
    task = cat.task("upsert")
    assert repr(task) == ("ContinualTask('upsert' ON INPUT 'append_only', frontier=6, "
                          "statements=[DELETE, INSERT], columns=['key', 'val'])")
    th = task._repr_html_()
    assert "key IN (SELECT key FROM append_only)" in th and "frontier 6" in th
    assert "times_processed" in th
    # values reach the page escaped
    evil = colmz.Catalog()
    evil.execute('CREATE TABLE "<b>x</b>" (k INT)')
    assert "<b>x</b>" not in evil._repr_html_() and "&lt;b&gt;x&lt;/b&gt;" in evil._repr_html_()


def test_explain_prints_whole():
    # A chain of 8 dataflows: 40+ rows and 10 columns, which pandas truncated in a terminal.
    flows = [Dataflow(Export.index("i0"), ["s"])]
    flows += [Dataflow(Export.index(f"i{k}"), compute_inputs=[f"i{k - 1}"]) for k in range(1, 8)]
    r = select_as_ofs(flows, {"s": (10, 20)}, 15)
    table = r.explain()
    assert len(table) >= 40 and len(table.columns) == 10
    text = repr(table)
    assert "..." not in text
    assert len(text.splitlines()) == len(table) + 1
    assert all(c in text.splitlines()[0] for c in table.columns)
    assert repr(table[table["collection"] == "i7"]).count("\n") == int((table["collection"] == "i7").sum())


def test_a_mistyped_statement_is_a_syntax_error():
    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k INT)")
    with pytest.raises(SQLError, match="syntax error at or near 'SELEC'") as e:
        cat.execute("SELEC * FROM t")
    assert not isinstance(e.value, UnsupportedSQL)
    with pytest.raises(UnsupportedSQL, match="ALTER TABLE"):  # a real statement colmz lacks
        cat.execute("ALTER TABLE t ADD COLUMN x INT")
