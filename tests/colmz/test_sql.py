"""``colmz.sql``: tokenizer, statement parser (Materialize's continual-task grammar), translation."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from colmz.sql import (
    MZ_NOW,
    ContinualTaskStatement,
    CreateMaterializedView,
    CreateTable,
    DeleteStatement,
    Drop,
    InsertStatement,
    Query,
    SQLError,
    UnsupportedSQL,
    UpdateStatement,
    arrow_type,
    connect,
    output_names,
    parse,
    tokenize,
    translate,
)


def test_tokenizer_keeps_strings_comments_and_quoted_names_apart():
    toks = tokenize("SELECT 'a;''b', \"We;ird\" /* ; */ FROM t -- ;\n WHERE x->>'k' = E'\\'' AND $$;$$ <> y")
    kinds = [(t.kind, t.text) for t in toks]
    assert ("string", "'a;''b'") in kinds and ("qident", '"We;ird"') in kinds
    assert ("op", "->>") in kinds and ("string", "$$;$$") in kinds and ("op", "<>") in kinds
    assert not any(t.text == ";" for t in toks)
    assert toks[3].name == "We;ird"
    with pytest.raises(SQLError, match="unterminated string"):
        tokenize("SELECT 'open")
    with pytest.raises(SQLError, match="unterminated comment"):
        tokenize("/* open")


@given(st.text(alphabet="abc ;'\"()-\n*/$", max_size=30))
def test_tokenizer_never_fails_otherwise(text):
    try:
        toks = tokenize(text)
    except SQLError:
        return
    for a, b in zip(toks, toks[1:]):
        assert a.end <= b.start


def test_parse_continual_task_forms():
    s, = parse("""CREATE CONTINUAL TASK foo (key int, val int) ON INPUT append_only AS (
        DELETE FROM foo WHERE key IN (SELECT key FROM inserts);
        INSERT INTO foo SELECT key, max(value) FROM inserts GROUP BY key;
    );""")
    assert isinstance(s, ContinualTaskStatement)
    assert s.columns == [("key", "int"), ("val", "int")] and s.input == "append_only" and s.snapshot
    assert [type(b) for b in s.body] == [DeleteStatement, InsertStatement]
    assert s.body[0].where == "key IN (SELECT key FROM inserts)"
    assert s.body[1].query == "SELECT key, max(value) FROM inserts GROUP BY key"

    s, = parse("CREATE CONTINUAL TASK foo ON INPUT bar AS ()")
    assert s.columns is None and s.body == []
    for text, snap in [
        ("CREATE CONTINUAL TASK foo WITH (SNAPSHOT = false) ON INPUT bar AS ()", False),
        ("CREATE CONTINUAL TASK foo WITH (SNAPSHOT) ON INPUT bar AS ()", True),
        ("CREATE CONTINUAL TASK foo ON INPUT bar WITH (SNAPSHOT = false) AS ()", False),
        ("CREATE CONTINUAL TASK foo IN CLUSTER c WITH (SNAPSHOT = true) ON INPUT bar AS ()", True),
    ]:
        assert parse(text)[0].snapshot is snap
    s, = parse("CREATE CONTINUAL TASK foo IN CLUSTER c WITH (SNAPSHOT = false) "
               "FROM TRANSFORM bar USING (SELECT baz::TIMESTAMPTZ FROM bar WHERE baz)")
    assert s.sugar == "transform" and s.input == "bar" and not s.snapshot
    assert s.body == [InsertStatement("foo", None, "SELECT baz::TIMESTAMPTZ FROM bar WHERE baz")]
    s, = parse("CREATE CONTINUAL TASK foo FROM RETAIN bar WHILE (col + INTERVAL '1h' < mz_now())")
    assert s.sugar == "retain"
    assert s.body == [
        InsertStatement("foo", None, "SELECT * FROM \"bar\" WHERE (col + INTERVAL '1h' < mz_now())"),
        DeleteStatement("foo", "NOT (col + INTERVAL '1h' < mz_now())"),
    ]
    s, = parse("CREATE CONTINUAL TASK m.p.up (k INT) ON INPUT m.p.t AS (INSERT INTO m.p.up SELECT 1) AS OF 4")
    assert (s.name, s.input, s.as_of) == ("up", "t", 4)


def test_parse_continual_task_errors():
    with pytest.raises(SQLError, match="writes only its own output"):
        parse("CREATE CONTINUAL TASK foo ON INPUT bar AS (INSERT INTO other SELECT 1)")
    with pytest.raises(SQLError, match="INSERT or DELETE"):
        parse("CREATE CONTINUAL TASK foo ON INPUT bar AS (UPDATE foo SET a = 1)")
    with pytest.raises(SQLError, match="true or false"):
        parse("CREATE CONTINUAL TASK foo WITH (SNAPSHOT = 3) ON INPUT bar AS ()")
    with pytest.raises(UnsupportedSQL, match="option"):
        parse("CREATE CONTINUAL TASK foo WITH (RETAIN HISTORY = 1) ON INPUT bar AS ()")
    with pytest.raises(SQLError, match="ON INPUT, FROM TRANSFORM or FROM RETAIN"):
        parse("CREATE CONTINUAL TASK foo AS ()")
    with pytest.raises(SQLError, match="parenthesised"):
        parse("CREATE CONTINUAL TASK foo ON INPUT bar AS INSERT INTO foo SELECT 1")


def test_parse_other_statements():
    a, b, c, d, e, f, g = parse(
        "CREATE TABLE t (k INT, v VARCHAR(10)); INSERT INTO t (v, k) VALUES ('x', 1);"
        "DELETE FROM t WHERE k = 1; UPDATE t SET v = 'y', k = k + 1 WHERE k > 0;"
        "CREATE MATERIALIZED VIEW mv (a, b) AS SELECT * FROM t; DROP TABLE IF EXISTS t, u;"
        "WITH x AS (SELECT 1) SELECT * FROM x"
    )
    assert a == CreateTable("t", [("k", "INT"), ("v", "VARCHAR(10)")])
    assert b == InsertStatement("t", ["v", "k"], "VALUES ('x', 1)")
    assert c == DeleteStatement("t", "k = 1")
    assert d == UpdateStatement("t", [("v", "'y'"), ("k", "k + 1")], "k > 0")
    assert e == CreateMaterializedView("mv", ["a", "b"], "SELECT * FROM t")
    assert f == Drop("TABLE", ["t", "u"], True)
    assert isinstance(g, Query)
    assert parse("INSERT INTO t (SELECT 1)")[0].columns is None
    for bad, what in [("CREATE VIEW v AS SELECT 1", "CREATE VIEW"), ("ALTER TABLE t ADD x INT", "ALTER"),
                      ("DELETE FROM t USING u WHERE t.k = u.k", "USING"),
                      ("INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", "ON CONFLICT"),
                      ("UPDATE t AS x SET k = 1", "alias"), ("DROP SOURCE s", "DROP")]:
        with pytest.raises(UnsupportedSQL, match=what):
            parse(bad)


def test_translate():
    assert translate("SELECT mz_now(), x::JSONB, CAST(y AS jsonb) FROM t") == \
        f"SELECT {MZ_NOW}, x::JSON, CAST(y AS JSON) FROM t"
    assert translate("SELECT 'mz_now()' AS jsonb") == "SELECT 'mz_now()' AS JSON"
    assert translate("SELECT jsonb FROM t") == "SELECT jsonb FROM t"  # a column named jsonb
    with pytest.raises(SQLError, match="no arguments"):
        translate("SELECT mz_now(1)")
    for bad in ["SELECT mz_logical_timestamp()", "WITH MUTUALLY RECURSIVE x (a INT) AS (SELECT 1) SELECT 1",
                "SELECT * FROM t AS OF 5"]:
        with pytest.raises(UnsupportedSQL):
            translate(bad)


def test_duckdb_reads_postgres_arithmetic():
    con = connect()
    got = con.sql("SELECT 7 / 2 AS a, 7.0 / 2 AS b, -7 / 2 AS c, 7 % 3 AS d, 'x' || 1 AS e, "
                  "7::DOUBLE / 2 AS f").fetchall()
    assert got == [(3, 3.5, -3, 1, "x1", 3.5)]
    if con.sql("SELECT count(*) FROM duckdb_settings() WHERE name = 'error_on_division_by_zero'").fetchall()[0][0]:
        for q in ("SELECT 1 / 0", "SELECT 1.5 / 0", "SELECT 1 % 0"):
            with pytest.raises(Exception, match="(?i)division by zero"):
                con.sql(q).fetchall()


def test_arrow_types():
    assert arrow_type("int") == pa.int32() and arrow_type("INT8") == pa.int64()
    assert arrow_type("double   precision") == pa.float64()
    assert arrow_type("timestamp with time zone") == pa.timestamp("us", tz="UTC")
    assert arrow_type("jsonb") == pa.string() and arrow_type("varchar(3)") == pa.string()
    with pytest.raises(UnsupportedSQL, match="blank-padded"):
        arrow_type("char(3)")
    with pytest.raises(UnsupportedSQL, match="decimal"):
        arrow_type("numeric(10, 2)")
    with pytest.raises(UnsupportedSQL, match="GEOMETRY"):
        arrow_type("GEOMETRY")


def test_output_names_follow_postgres():
    assert output_names("SELECT a, t.b, c AS d, e f, count(*), x::INT8, CAST(y AS TEXT), 1 + 2, "
                        "CASE WHEN a THEN 1 END, (z) FROM t") == [
        "a", "b", "d", "f", "count", "x", "y", "?column?", "case", "z"]
    assert output_names("SELECT * FROM t") is None
    assert output_names("SELECT a FROM t UNION SELECT b FROM u") is None
    assert output_names("VALUES (1)") is None
    assert output_names("SELECT x IS NULL FROM t") == ["?column?"]


def test_missing_duckdb_names_the_extra(monkeypatch):
    import sys

    import colmz
    from colmz.sql import require_duckdb

    monkeypatch.setitem(sys.modules, "duckdb", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'colmz\[sql\]'"):
        require_duckdb()
    with pytest.raises(ImportError, match="sql"):
        colmz.Catalog()


def test_bind_relations_rewrites_relations_and_qualifiers_only():
    from colmz.sql import bind_relations

    names = frozenset({"t", "T", "k", "u"})
    for sql, want, bound in [
        ('SELECT (SELECT count(*) FROM "T"), (SELECT count(*) FROM t)',
         'SELECT (SELECT count(*) FROM "__colmz_r0"), (SELECT count(*) FROM "__colmz_r1")', ("T", "t")),
        # a column named like a table, EXTRACT's FROM, IS DISTINCT FROM: not relations
        ("SELECT k, extract(year FROM k), k IS DISTINCT FROM 1 FROM u",
         'SELECT k, extract(year FROM k), k IS DISTINCT FROM 1 FROM "__colmz_r0"', ("u",)),
        # an alias keeps its qualifiers; a table's own name as qualifier is bound with it
        ("SELECT x.k, u.k FROM t x JOIN u ON x.k = u.k, k",
         'SELECT x.k, "__colmz_r1".k FROM "__colmz_r0" x JOIN "__colmz_r1" ON x.k = "__colmz_r1".k, "__colmz_r2"',
         ("t", "u", "k")),
        # WITH names are the query's own; table functions and qualified names are DuckDB's
        ("WITH t AS (SELECT 1) SELECT * FROM t, read_csv('f') u, main.k", None, ()),
        ("TABLE T", 'TABLE "__colmz_r0"', ("t",)),
        ("SELECT 'FROM t' FROM \"u\"", "SELECT 'FROM t' FROM \"__colmz_r0\"", ("u",)),
    ]:
        text, got = bind_relations(sql, names)
        assert (text, got) == (want if want is not None else sql, bound), sql
