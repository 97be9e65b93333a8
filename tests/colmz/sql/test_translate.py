"""``colmz.sql.translate``: Materialize -> DuckDB, mz_now() as a token, relation binding, types."""

from __future__ import annotations

import pyarrow as pa
import pytest

from colmz.sql import MZ_NOW, SQLError, UnsupportedSQL, arrow_type, translate


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
        ("SELECT * FROM (t JOIN u ON t.k = u.k) JOIN k USING (k) UNION ALL TABLE t",
         'SELECT * FROM ("__colmz_r0" JOIN "__colmz_r1" ON "__colmz_r0".k = "__colmz_r1".k) '
         'JOIN "__colmz_r2" USING (k) UNION ALL TABLE "__colmz_r0"', ("t", "u", "k")),
        ("SELECT substring(k FROM 2), (SELECT max(k) FROM u) FROM t WHERE EXISTS (SELECT 1 FROM k WHERE k.k = t.k)",
         'SELECT substring(k FROM 2), (SELECT max(k) FROM "__colmz_r0") FROM "__colmz_r1" WHERE EXISTS '
         '(SELECT 1 FROM "__colmz_r2" WHERE "__colmz_r2".k = "__colmz_r1".k)', ("u", "t", "k")),
        ("FROM t SELECT k", 'FROM "__colmz_r0" SELECT k', ("t",)),
        ("SELECT 'FROM t' FROM \"u\"", "SELECT 'FROM t' FROM \"__colmz_r0\"", ("u",)),
    ]:
        text, got = bind_relations(sql, names)
        assert (text, got) == (want if want is not None else sql, bound), sql
