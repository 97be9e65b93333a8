"""``colmz.Catalog``: upstream sqllogictest scenarios, DML, views, times, atomicity."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.continual import NegativeMultiplicity
from colmz.sql import SQLError, UnsupportedSQL


def q(cat, sql, as_of=None):
    t = cat.sql(sql, as_of=as_of)
    return sorted(tuple(r.values()) for r in t.to_pylist())


@pytest.fixture
def cat():
    return colmz.Catalog()


# ----------------------------------------------------------------------------- upstream slt


def test_ct_upsert_slt(cat):
    cat.execute("CREATE TABLE append_only (key INT, val INT)")
    cat.execute("""CREATE CONTINUAL TASK upsert (key INT, val INT) ON INPUT append_only AS (
        DELETE FROM upsert WHERE key IN (SELECT key FROM append_only);
        INSERT INTO upsert SELECT key, max(val) FROM append_only GROUP BY key;
    )""")
    cat.execute("INSERT INTO append_only VALUES (1, 2), (1, 1)")
    assert q(cat, "SELECT * FROM upsert") == [(1, 2)]
    cat.execute("INSERT INTO append_only VALUES (1, 3), (2, 4)")
    assert q(cat, "SELECT * FROM upsert") == [(1, 3), (2, 4)]
    assert cat.now == 2
    assert q(cat, "SELECT * FROM upsert", as_of=1) == [(1, 2)]


def test_ct_audit_log_slt(cat):
    cat.execute("CREATE TABLE mv_input (key INT)")
    cat.execute("INSERT INTO mv_input VALUES (1)")
    cat.execute("CREATE MATERIALIZED VIEW anomalies AS SELECT sum(key)::INT FROM mv_input")
    assert q(cat, "SELECT * FROM anomalies") == [(1,)]
    cat.execute("""CREATE CONTINUAL TASK audit_log (count INT) ON INPUT anomalies AS (
        INSERT INTO audit_log SELECT * FROM anomalies WHERE sum > 1;
    )""")
    assert q(cat, "SELECT * FROM audit_log") == []
    cat.execute("INSERT INTO mv_input VALUES (2), (3)")
    assert q(cat, "SELECT * FROM anomalies") == [(6,)]
    assert q(cat, "SELECT * FROM audit_log") == [(6,)]


def test_audit_log_snapshot_variant(cat):
    # The variant with no filter: the default SNAPSHOT writes the MV's contents at creation.
    cat.execute("CREATE TABLE mv_input (key INT); INSERT INTO mv_input VALUES (1)")
    cat.execute("CREATE MATERIALIZED VIEW anomalies AS SELECT sum(key)::INT FROM mv_input")
    cat.execute("CREATE CONTINUAL TASK audit_log (count INT) ON INPUT anomalies AS "
                "(INSERT INTO audit_log SELECT * FROM anomalies WHERE sum IS NOT NULL)")
    cat.execute("INSERT INTO mv_input VALUES (2), (3)")
    assert q(cat, "SELECT * FROM audit_log") == [(1,), (6,)]


def test_ct_stream_table_join_slt(cat):
    cat.execute("CREATE TABLE big (key INT); CREATE TABLE small (key INT, val STRING)")
    cat.execute("INSERT INTO small VALUES (1, 'v0')")
    cat.execute("""CREATE CONTINUAL TASK stj (key INT, val STRING) ON INPUT big AS (
        INSERT INTO stj SELECT b.key, s.val FROM big b JOIN small s ON b.key = s.key;)""")
    cat.execute("INSERT INTO big VALUES (1)")
    assert q(cat, "SELECT * FROM stj") == [(1, "v0")]
    cat.execute("UPDATE small SET val = 'v1'")
    assert q(cat, "SELECT * FROM stj") == [(1, "v0")]  # references changing: no output
    cat.execute("INSERT INTO big VALUES (1)")
    assert q(cat, "SELECT * FROM stj") == [(1, "v0"), (1, "v1")]


def test_ct_snapshot_slt_and_inferred_columns(cat):
    cat.execute("CREATE TABLE input (key INT)")
    cat.execute("INSERT INTO input VALUES (1)")
    cat.execute("INSERT INTO input VALUES (2)")
    cat.execute("CREATE CONTINUAL TASK ct ON INPUT input AS (INSERT INTO ct SELECT * FROM input;)")
    cat.execute("INSERT INTO input VALUES (3)")
    assert q(cat, "SELECT * FROM ct") == [(1,), (2,), (3,)]
    assert cat.object("ct").schema == (colmz.ColumnSpec("key", pa.int32()),)


def test_ct_errors_slt(cat):
    # ct_errors.slt refuses an INT column into a STRING task column; colmz converts it as
    # PostgreSQL's assignment casts do (colmz/sql/assign.py) and keeps the refusal -- with
    # the slt's words -- for pairs PostgreSQL has no assignment cast for.
    cat.execute("CREATE TABLE foo (key INT); CREATE TABLE bar (key TEXT)")
    with pytest.raises(colmz.SchemaError, match="query columns did not match"):
        cat.execute("CREATE CONTINUAL TASK nope (key INT) ON INPUT bar AS (INSERT INTO nope SELECT * FROM bar;)")
    assert "nope" not in cat
    cat.execute("CREATE CONTINUAL TASK ok (key STRING) ON INPUT foo AS (INSERT INTO ok SELECT * FROM foo;)")
    cat.execute("INSERT INTO foo VALUES (12)")
    assert q(cat, "SELECT * FROM ok") == [("12",)]


def test_snapshot_false_and_option_positions(cat):
    cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
    cat.execute("CREATE CONTINUAL TASK a WITH (SNAPSHOT = false) ON INPUT t AS (INSERT INTO a SELECT * FROM t)")
    cat.execute("CREATE CONTINUAL TASK b ON INPUT t WITH (SNAPSHOT = false) AS (INSERT INTO b SELECT * FROM t)")
    cat.execute("CREATE CONTINUAL TASK c WITH (SNAPSHOT) ON INPUT t AS (INSERT INTO c SELECT * FROM t)")
    cat.execute("INSERT INTO t VALUES (2)")
    assert q(cat, "SELECT * FROM a") == q(cat, "SELECT * FROM b") == [(2,)]
    assert q(cat, "SELECT * FROM c") == [(1,), (2,)]


def test_transform_and_retain_sugar(cat):
    cat.execute("CREATE TABLE ev (id INT, ts UBIGINT)")
    cat.execute("CREATE CONTINUAL TASK tr FROM TRANSFORM ev USING (SELECT id * 10 AS x FROM ev WHERE id > 1)")
    cat.execute("CREATE CONTINUAL TASK keep FROM RETAIN ev WHILE (ts + 2 > mz_now())")
    seen = []
    for t in range(1, 7):
        if t == 5:
            continue
        cat.execute(f"INSERT INTO ev VALUES ({t}, {t})", time=t)
        seen.append((t, q(cat, "SELECT id FROM keep")))
    # A row ages out only when the input next receives rows (RETAIN is evaluated at input times).
    assert seen == [(1, [(1,)]), (2, [(1,), (2,)]), (3, [(2,), (3,)]), (4, [(3,), (4,)]), (6, [(6,)])]
    assert q(cat, "SELECT * FROM tr") == [(20,), (30,), (40,), (60,)]
    # Rows that fail the predicate on arrival are never inserted.
    cat.execute("INSERT INTO ev VALUES (7, 0)")
    assert q(cat, "SELECT id FROM keep") == [(6,)]


def test_reference_to_another_task_at_the_same_time(cat):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("CREATE CONTINUAL TASK first ON INPUT t AS (INSERT INTO first SELECT * FROM t)")
    cat.execute("CREATE CONTINUAL TASK second (n BIGINT) ON INPUT t AS "
                "(INSERT INTO second SELECT count(*) FROM first WHERE EXISTS (SELECT 1 FROM t))")
    cat.execute("INSERT INTO t VALUES (1), (2)")
    assert q(cat, "SELECT * FROM second") == [(2,)]


def test_input_and_reference_changing_at_the_same_time(cat):
    cat.execute("CREATE TABLE t (k INT); CREATE TABLE r (k INT, v TEXT)")
    cat.execute("CREATE CONTINUAL TASK j ON INPUT t AS (INSERT INTO j SELECT t.k, r.v FROM t JOIN r USING (k))")
    cat.execute("INSERT INTO r VALUES (1, 'x'); INSERT INTO t VALUES (1)")
    assert q(cat, "SELECT * FROM j") == [(1, "x")]


def test_two_deletes_of_one_row_raise_and_leave_the_catalog_unchanged(cat):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("""CREATE CONTINUAL TASK ct (k INT) ON INPUT t AS (
        INSERT INTO ct SELECT k FROM t WHERE k > 0;
        DELETE FROM ct WHERE k IN (SELECT -k FROM t);
        DELETE FROM ct WHERE k = 1 AND EXISTS (SELECT 1 FROM t WHERE k < 0))""")
    cat.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(NegativeMultiplicity):
        cat.execute("INSERT INTO t VALUES (-1)")
    assert cat.now == 1
    assert q(cat, "SELECT * FROM t") == [(1,)]
    assert q(cat, "SELECT * FROM ct") == [(1,)]
    cat.execute("INSERT INTO t VALUES (2)")  # still works afterwards
    assert cat.now == 2 and q(cat, "SELECT * FROM ct") == [(1,), (2,)]


# ----------------------------------------------------------------------------- DML and views


def test_dml_and_materialized_view(cat):
    cat.execute("CREATE TABLE t (k INT, v TEXT)")
    cat.execute("CREATE MATERIALIZED VIEW counts AS SELECT v, count(*) AS n FROM t GROUP BY v")
    cat.execute("INSERT INTO t VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    assert q(cat, "SELECT * FROM counts") == [("a", 2), ("b", 1)]
    cat.execute("UPDATE t SET v = 'b' WHERE k = 1")
    assert q(cat, "SELECT * FROM counts") == [("a", 1), ("b", 2)]
    cat.execute("DELETE FROM t WHERE v = 'b'")
    assert q(cat, "SELECT * FROM t") == [(2, "a")]
    assert q(cat, "SELECT * FROM counts") == [("a", 1)]
    assert q(cat, "SELECT * FROM counts", as_of=1) == [("a", 2), ("b", 1)]
    cat.execute("INSERT INTO t (v) VALUES ('c')")
    assert q(cat, "SELECT * FROM t WHERE v = 'c'") == [(None, "c")]
    cat.execute("DELETE FROM t")
    assert q(cat, "SELECT * FROM t") == [] and q(cat, "SELECT * FROM counts") == []
    assert cat.read("counts", as_of=1).to_pylist() == [("a", 2, 1, 1), ("b", 1, 1, 1)]


def test_script_is_one_transaction_at_one_time(cat):
    cat.execute("CREATE TABLE t (k INT)")
    out = cat.execute("INSERT INTO t VALUES (1); INSERT INTO t SELECT k + 10 FROM t; SELECT count(*) FROM t",
                      time=7)
    assert cat.now == 7 and out.to_pylist() == [{"count": 2}]  # named as PostgreSQL names it
    assert [r[1] for r in cat.read("t").to_pylist()] == [7, 7]
    with pytest.raises(ValueError, match="time=6 is before cat.now=7"):
        cat.execute("INSERT INTO t VALUES (3)", time=6)
    with pytest.raises(ValueError, match="writes nothing"):
        cat.execute("SELECT 1", time=9)
    cat.execute("DELETE FROM t WHERE k > 100")  # a write that changes nothing still commits
    assert cat.now == 8


def test_time_boundary_now_minus_one_now_and_now_plus_one(cat):
    cat.execute("CREATE TABLE t (k INT); CREATE TABLE other (k INT)")
    cat.execute("CREATE MATERIALIZED VIEW big AS SELECT k FROM t WHERE k > 100")
    cat.execute("CREATE CONTINUAL TASK log ON INPUT t AS (INSERT INTO log SELECT * FROM t WHERE k < 50)")
    cat.execute("INSERT INTO t VALUES (1)", time=5)
    with pytest.raises(ValueError, match="time=4 is before cat.now=5"):
        cat.execute("INSERT INTO t VALUES (2)", time=4)
    # time=now joins the commit at 5: it sees its writes, and nothing derived changes at 5.
    cat.execute("INSERT INTO t SELECT k + 59 FROM t; INSERT INTO other VALUES (7)", time=5)
    assert cat.now == 5 and q(cat, "SELECT * FROM t") == [(1,), (60,)]
    assert q(cat, "SELECT * FROM other") == [(7,)] and q(cat, "SELECT * FROM log") == [(1,)]
    assert [r[1:] for r in cat.read("t").to_pylist()] == [(5, 1), (5, 1)]
    # ... but not where it would revise sealed output: the task would log 2 at 5, the view
    # would hold 200 at 5. Either raises and leaves the catalog as it was.
    for sql in ("INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (200)"):
        with pytest.raises(ValueError, match="would revise .* at time 5, already sealed"):
            cat.execute(sql, time=5)
        assert q(cat, "SELECT * FROM t") == [(1,), (60,)] and cat.now == 5
    with pytest.raises(ValueError, match="would revise continual task 'log'"):
        cat.append("t", colmz.Updates({"k": [3]}, time=[5], diff=[1]))
    cat.append("other", colmz.Updates({"k": [8]}, time=[5], diff=[1]))  # joins too
    assert q(cat, "SELECT * FROM other") == [(7,), (8,)]
    cat.execute("INSERT INTO t VALUES (2)", time=6)
    assert cat.now == 6 and q(cat, "SELECT * FROM log") == [(1,), (2,)]
    # DDL at now comes after the commit: a write cannot join it any more.
    cat.execute("CREATE TABLE u (k INT)")
    with pytest.raises(ValueError, match="no commit at 6 to join"):
        cat.execute("INSERT INTO u VALUES (1)", time=6)


def test_failed_statement_changes_nothing(cat):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(SQLError):
        cat.execute("INSERT INTO t VALUES (2); INSERT INTO t SELECT nope FROM t")
    with pytest.raises(SQLError, match='invalid input syntax for type integer: "text"'):
        cat.execute("INSERT INTO t VALUES ('text')")  # a literal takes the column's type
    with pytest.raises(colmz.SchemaError):
        cat.execute("INSERT INTO t SELECT 'te' || 'xt'")  # a text expression does not
    with pytest.raises(SQLError):
        cat.execute("CREATE TABLE u (k INT); CREATE TABLE u (k INT)")
    assert "u" not in cat and cat.now == 1 and q(cat, "SELECT * FROM t") == [(1,)]


def test_append_change_log(cat):
    cat.execute("CREATE TABLE t (k BIGINT, s TEXT)")
    cat.execute("CREATE CONTINUAL TASK log ON INPUT t AS (INSERT INTO log SELECT * FROM t)")
    u = colmz.Updates({"k": [1, 2, 2], "s": ["a", "b", "b"]}, time=[4, 4, 4], diff=[1, 1, 1])
    cat.append("t", u)
    cat.append("t", colmz.Updates({"k": [2], "s": ["b"]}, time=[0], diff=[-1]), time=6)
    assert cat.now == 6
    assert cat.read("t").to_pylist() == [(1, "a", 6, 1), (2, "b", 6, 1)]
    assert q(cat, "SELECT * FROM log") == [(1, "a"), (2, "b"), (2, "b")]  # deletes dropped
    with pytest.raises(NegativeMultiplicity):
        cat.append("t", colmz.Updates({"k": [9], "s": ["z"]}, time=[7], diff=[-1]))
    with pytest.raises(ValueError, match="span times"):
        cat.append("t", colmz.Updates({"k": [1, 1], "s": ["a", "a"]}, time=[8, 9], diff=[1, 1]))
    with pytest.raises(ValueError, match="written only by the catalog"):
        cat.append("log", u, time=10)
    with pytest.raises(ValueError, match="would revise continual task 'log' at time 6, already sealed"):
        cat.append("t", u, time=6)
    with pytest.raises(ValueError, match="time=5 is before cat.now=6"):
        cat.append("t", u, time=5)
    assert cat.now == 6


def test_mz_now_in_a_view_and_queries(cat):
    cat.execute("CREATE TABLE ev (id INT, until UBIGINT)")
    cat.execute("CREATE MATERIALIZED VIEW live AS SELECT id FROM ev WHERE until > mz_now()")
    cat.execute("INSERT INTO ev VALUES (1, 3), (2, 10)")
    assert q(cat, "SELECT * FROM live") == [(1,), (2,)]
    cat.execute("CREATE TABLE other (x INT)")
    cat.execute("INSERT INTO other VALUES (0)", time=5)  # the view re-evaluates at every time
    assert q(cat, "SELECT * FROM live") == [(2,)]
    assert cat.sql("SELECT mz_now() AS now").to_pylist() == [{"now": 5}]


def test_postgres_translations(cat):
    cat.execute("CREATE TABLE j (doc JSONB, n INT)")
    cat.execute("""INSERT INTO j VALUES ('{"a": "x", "b": 2}', 7)""")
    got = cat.sql("SELECT doc ->> 'a' AS a, (doc ->> 'b')::INT8 + 1 AS b, n / 2 AS half, "
                  "'n=' || n AS s, n::TEXT AS t FROM j").to_pylist()
    assert got == [{"a": "x", "b": 3, "half": 3, "s": "n=7", "t": "7"}]


def test_drop_and_dependencies(cat):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("CREATE CONTINUAL TASK ct ON INPUT t AS (INSERT INTO ct SELECT * FROM t)")
    cat.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM ct")
    with pytest.raises(SQLError, match="depend"):
        cat.execute("DROP TABLE t")
    with pytest.raises(SQLError, match="is a continual task"):
        cat.execute("DROP TABLE ct")
    cat.execute("DROP MATERIALIZED VIEW mv; DROP CONTINUAL TASK ct; DROP TABLE t")
    cat.execute("DROP TABLE IF EXISTS t")
    assert cat.names == []
    with pytest.raises(KeyError):
        cat.execute("DROP TABLE t")


def test_writes_to_derived_objects_and_unsupported_sql(cat):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("CREATE CONTINUAL TASK ct ON INPUT t AS (INSERT INTO ct SELECT * FROM t)")
    with pytest.raises(SQLError, match="continual task"):
        cat.execute("INSERT INTO ct VALUES (1)")
    for bad, what in [
        ("CREATE VIEW v AS SELECT 1", "CREATE VIEW"),
        ("CREATE INDEX i ON t (k)", "CREATE INDEX"),
        ("SELECT * FROM t AS OF AT LEAST 3", "AS OF"),
        ("SUBSCRIBE t ENVELOPE UPSERT (KEY (k))", "ENVELOPE"),
        ("CREATE TABLE d (x NUMERIC)", "NUMERIC"),
        ("INSERT INTO t VALUES (1) RETURNING k", "RETURNING"),
        ("CREATE CONTINUAL TASK x WITH (FOO = 1) ON INPUT t AS (INSERT INTO x SELECT * FROM t)", "FOO"),
    ]:
        with pytest.raises(UnsupportedSQL, match=what):
            cat.execute(bad)
    with pytest.raises(ValueError, match="not allowed to be its input"):
        cat.execute("CREATE CONTINUAL TASK z ON INPUT z AS (INSERT INTO z SELECT 1)")
    with pytest.raises(SQLError, match="one query"):
        cat.sql("INSERT INTO t VALUES (1)")
    with pytest.raises(ValueError, match="not yet complete"):
        cat.sql("SELECT 1", as_of=cat.now + 1)



def test_retain_over_timestamps_reads_times_as_epoch_milliseconds(cat):
    # Upstream's retention window over a TIMESTAMPTZ column: mz_now() is then the logical time
    # read as milliseconds since the Unix epoch (as Materialize's mz_timestamp casts).
    t0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
    cat.execute("CREATE TABLE append_only (val STRING, ts_col TIMESTAMPTZ)")
    cat.execute("CREATE CONTINUAL TASK retain FROM RETAIN append_only WHILE (ts_col + INTERVAL '2s' > mz_now())")
    cat.execute("INSERT INTO append_only VALUES ('old', '2023-11-14 22:13:20+00'), "
                "('ancient', '2023-11-14 22:12:20+00')", time=t0)
    assert q(cat, "SELECT val FROM retain") == [("old",)]  # 'ancient' never enters
    cat.execute("INSERT INTO append_only VALUES ('new', '2023-11-14 22:13:23+00')", time=t0 + 3000)
    assert q(cat, "SELECT val FROM retain") == [("new",)]
    assert cat.sql("SELECT mz_now() > TIMESTAMPTZ '2023-11-14 00:00:00+00' AS x").to_pylist() == [{"x": True}]
    assert cat.sql("SELECT mz_now() - 3000 AS x").to_pylist() == [{"x": t0}]
    with pytest.raises(SQLError):
        cat.sql("SELECT mz_now() > 5 AND mz_now() > DATE '2020-01-01'")


# ----------------------------------------------------------------------------- user text stays in its statement

EXPLOITS = [
    # each closes the predicate's parenthesis, runs a statement of its own, and reopens one
    "1=0); COPY (SELECT 42) TO '{path}'; SELECT * FROM t WHERE (1=0",
    "1=0); ATTACH '{path}' AS x; SELECT * FROM t WHERE (1=0",
    "1=0); SET integer_division = false; SELECT * FROM t WHERE (1=0",
]


@pytest.mark.parametrize("form", ["DELETE FROM t WHERE {p}", "UPDATE t SET k = 2 WHERE {p}",
                                  "UPDATE t SET k = 2 WHERE k = 1; DELETE FROM t WHERE {p}"])
@pytest.mark.parametrize("exploit", EXPLOITS)
def test_a_predicate_cannot_run_another_statement(cat, tmp_path, form, exploit):
    # Before: the predicate was pasted into SELECT * FROM "t" WHERE (<text>) and the COPY
    # wrote its file, the ATTACH created a database, the SET changed every later answer.
    path = tmp_path / "out.file"
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1)")
    before = cat.now
    with pytest.raises(SQLError, match="unbalanced"):
        cat.execute(form.format(p=exploit.format(path=path)))
    assert not path.exists() and list(tmp_path.iterdir()) == []
    assert cat._con.sql("SELECT current_setting('integer_division')").fetchall() == [(True,)]
    assert cat.sql("SELECT 7 / 2 AS q").to_pylist() == [{"q": 3}]
    assert cat.now == before and q(cat, "SELECT k FROM t") == [(1,)]


def test_a_predicate_is_one_expression(cat, tmp_path):
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1)")
    for bad, what in [
        ("DELETE FROM t WHERE k = 1 UNION SELECT 1", "UNION"),
        ("DELETE FROM t WHERE k = 1 ORDER BY k", "ORDER"),
        ("UPDATE t SET k = (SELECT 1) FROM t WHERE k = 1", "FROM"),
        ("DELETE FROM t WHERE (k = 1", "unclosed"),
    ]:
        with pytest.raises(SQLError, match=what):
            cat.execute(bad)
    assert q(cat, "SELECT k FROM t") == [(1,)]
    cat.execute("INSERT INTO t VALUES (2), (NULL)")
    cat.execute("DELETE FROM t WHERE k IS DISTINCT FROM 2")  # FROM inside one expression
    assert q(cat, "SELECT k FROM t") == [(2,)]
    # A continual task's DELETE predicate, given through the Python API, is held to the same.
    from colmz.continual import ContinualTask, Delete, MemoryCollection

    src = MemoryCollection({"k": pa.int64()})
    with pytest.raises(SQLError, match=r"CONTINUAL TASK o statement 1 \(DELETE FROM o WHERE \.\.\.\): predicate: not one expression"):
        ContinualTask("o", {"src": src}, [Delete(f"1=0); COPY (SELECT 1) TO '{tmp_path / 'f'}'; SELECT (1")],
                      columns={"k": pa.int64()})
    assert list(tmp_path.iterdir()) == []


def test_duckdb_confirms_one_query_before_running_text(cat, tmp_path):
    from colmz.sql import check_one_query, run_query

    path = tmp_path / "f.csv"
    with pytest.raises(SQLError, match=r"2 statements \(SELECT, COPY\)"):
        run_query(cat._con, f"SELECT 1; COPY (SELECT 1) TO '{path}'", 0)
    with pytest.raises(SQLError, match=r"1 statement \(SET\)"):
        check_one_query(cat._con, "SET integer_division = false")
    assert not path.exists()


def test_unknown_table_is_named_never_a_python_variable(cat):
    # Before: DuckDB's replacement scans found run_query's local variable ``forms`` (or
    # ``t``, the time) and read it as a table, or refused it naming colmz's source file.
    cat.execute("CREATE TABLE t (k INT)")
    for name in ["forms", "translated", "nosuch", "np", "pa"]:
        with pytest.raises(SQLError, match=f"^unknown catalog item '{name}'$") as e:
            cat.sql(f"SELECT * FROM {name}")
        assert "Python" not in str(e.value)
    with pytest.raises(SQLError, match="unknown catalog item 'nosuch'"):
        cat.execute("INSERT INTO t SELECT k FROM nosuch")
    assert cat._con.sql("SELECT current_setting('python_enable_replacements')").fetchall() == [(False,)]


def test_every_colmz_connection_is_locked_without_replacement_scans():
    from colmz.continual import ContinualTask, Insert, MemoryCollection
    from colmz.sql import connect

    src = MemoryCollection({"k": pa.int64()})
    task = ContinualTask("o", {"src": src}, [Insert("SELECT k FROM src")])
    for con in (connect(), colmz.Catalog()._con, task.duckdb.connection()):
        assert con.sql("SELECT current_setting('python_enable_replacements'), "
                       "current_setting('lock_configuration')").fetchall() == [(False, True)]
        with pytest.raises(Exception, match="locked"):
            con.execute("SET integer_division = false")


def test_external_access_false_refuses_local_files(tmp_path):
    (tmp_path / "secret.csv").write_text("a\n1\n")
    bad = [f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')", "SELECT * FROM read_csv('/etc/passwd')",
           f"SELECT * FROM glob('{tmp_path}/*')"]
    # DuckDB's file functions are not PostgreSQL's: a catalog query naming one raises
    # PostgreSQL's error, whatever external_access says
    open_cat = colmz.Catalog()
    for text in bad:
        with pytest.raises(SQLError, match=r"function (read_csv|glob)\(unknown\) does not exist"):
            open_cat.sql(text)
    assert open_cat._con.sql(f"SELECT count(*) FROM read_csv('{tmp_path / 'secret.csv'}')").fetchall() == [(1,)]
    # external_access=False: the connection itself cannot reach a file (defence in depth)
    cat = colmz.Catalog(external_access=False)
    assert cat._con.sql("SELECT current_setting('enable_external_access'), "
                        "current_setting('lock_configuration')").fetchall() == [(False, True)]
    for text in bad:
        with pytest.raises(SQLError, match="does not exist"):
            cat.sql(text)
        with pytest.raises(Exception, match="disabled by configuration"):
            cat._con.sql(text.replace("SELECT *", "SELECT count(*)")).fetchall()
    # the catalog's own objects still work
    cat.execute("CREATE TABLE t (k INT)")
    cat.execute("INSERT INTO t VALUES (1)")
    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t")
    assert q(cat, "SELECT n FROM v") == [(1,)]
    with pytest.raises(TypeError, match="external_access"):
        colmz.Catalog(external_access="no")


def test_mz_now_placeholder_text_is_never_replaced_inside_literals(cat):
    # Before: the placeholder was replaced as text, so SELECT '__colmz_mz_now__' returned
    # 'CAST(9 AS UBIGINT)' and an INSERT stored the changed text.
    from colmz.sql import MZ_NOW

    cat.execute("CREATE TABLE s (v TEXT, t UBIGINT)")
    cat.execute(f"INSERT INTO s VALUES ('{MZ_NOW}', mz_now()), ('mz_now()', mz_now() + 1)", time=9)
    assert q(cat, "SELECT v, t FROM s") == [(MZ_NOW, 9), ("mz_now()", 10)]
    got = cat.sql(f"SELECT '{MZ_NOW}' AS a, 'mz_now()' AS b, mz_now() AS c, "
                  f"'x{MZ_NOW}y' || mz_now()::TEXT AS d").to_pylist()
    assert got == [{"a": MZ_NOW, "b": "mz_now()", "c": 9, "d": f"x{MZ_NOW}y9"}]
    cat.execute(f"CREATE MATERIALIZED VIEW lit AS SELECT v, '{MZ_NOW}' AS w FROM s")
    assert not cat.object("lit").uses_now  # a literal is not a call: no refresh at every time
    assert q(cat, "SELECT v, w FROM lit") == [(MZ_NOW, MZ_NOW), ("mz_now()", MZ_NOW)]
    # A continual task's statements keep the literal too (batched: tests/colmz/test_continual.py).
    cat.execute("CREATE CONTINUAL TASK ct (v TEXT, tm UBIGINT) ON INPUT s AS ("
                f"INSERT INTO ct SELECT v || '{MZ_NOW}', mz_now() FROM s WHERE v <> '{MZ_NOW}')")
    cat.execute("INSERT INTO s VALUES ('a', 0)")
    cat.append("s", colmz.Updates({"v": ["b", "c"], "t": [0, 0]}, time=[11, 12], diff=[1, 1]), time=11)
    assert q(cat, "SELECT v, tm FROM ct") == [
        (f"a{MZ_NOW}", 10), (f"b{MZ_NOW}", 11), (f"c{MZ_NOW}", 11), (f"mz_now(){MZ_NOW}", 9)]
    # The placeholder written as a name is colmz's own, never a way to reach it.
    for bad in [f"SELECT {MZ_NOW}", f'SELECT "{MZ_NOW}"', "SELECT * FROM __colmz_values"]:
        with pytest.raises(SQLError, match="colmz's own"):
            cat.sql(bad)
    with pytest.raises(SQLError, match="colmz's own"):
        cat.execute('CREATE TABLE "__colmz_in" (k INT)')
    with pytest.raises(SQLError, match="colmz's own"):
        cat.execute("CREATE TABLE x (__colmz_cid INT)")


def test_names_differing_only_in_case_are_two_tables_in_one_query(tmp_path):
    # Before: both were registered with DuckDB under their own names, which it folds to one
    # case, so the second registration replaced the first: t was counted twice, and a view
    # over both persisted that.
    cat = colmz.Catalog(tmp_path / "cat")
    cat.execute('CREATE TABLE "T" (k INT); CREATE TABLE t (k INT); CREATE TABLE "a.b;c" (k INT)')
    cat.execute('INSERT INTO "T" VALUES (1), (2), (3); INSERT INTO t VALUES (10); '
                'INSERT INTO "a.b;c" VALUES (7)')
    both = 'SELECT (SELECT count(*) FROM "T") AS big, (SELECT count(*) FROM t) AS small'
    assert cat.sql(both).to_pylist() == [{"big": 3, "small": 1}]
    assert q(cat, 'SELECT "T".k AS a, t.k AS b FROM "T" JOIN t ON "T".k < t.k') == [(1, 10), (2, 10), (3, 10)]
    assert q(cat, 'SELECT x.k FROM "T" AS x WHERE x.k * 5 > (SELECT min(k) FROM T)') == [(3,)]  # T is t
    assert q(cat, 'TABLE "a.b;c"') == [(7,)]
    cat.execute(f"CREATE MATERIALIZED VIEW v AS {both}")
    cat.execute('CREATE MATERIALIZED VIEW w AS SELECT k FROM "T" UNION ALL SELECT k FROM t')
    cat.execute('DELETE FROM "T" WHERE "T".k = 1; UPDATE t SET k = k + 1 WHERE t.k = 10')
    assert q(cat, "SELECT big, small FROM v") == [(2, 1)]
    assert q(cat, "SELECT k FROM w") == [(2,), (3,), (11,)]
    assert q(cat, 'SELECT k FROM "T"') == [(2,), (3,)] and q(cat, "SELECT k FROM t") == [(11,)]
    # A WITH name of the query's own shadows the catalog's, as in PostgreSQL.
    assert q(cat, 'WITH t AS (SELECT 42 AS k) SELECT k FROM t') == [(42,)]
    # DuckDB's messages name the user's tables, not colmz's registrations.
    with pytest.raises(SQLError, match='"T"') as e:
        cat.sql('SELECT "T".nope FROM "T"')
    assert "__colmz" not in str(e.value)
    reopened = colmz.Catalog(tmp_path / "cat")
    assert q(reopened, "SELECT big, small FROM v") == [(2, 1)]
    assert reopened.sql(both).to_pylist() == [{"big": 2, "small": 1}]


@pytest.mark.parametrize("batch", [False, True])
def test_a_task_tells_names_differing_only_in_case_apart(batch):
    # Before: the task registered input "T", reference t and output under their own names,
    # which DuckDB folds to one: the statements read whichever was registered last.
    from colmz.continual import ContinualTask, MemoryCollection

    big, small = MemoryCollection({"k": pa.int64()}), MemoryCollection({"k": pa.int64()})
    small.compare_and_append(colmz.Updates({"k": [100]}, time=[0], diff=[1]), 0, 1 << 40)
    task = ContinualTask("o", {"T": big}, [
        'INSERT INTO o SELECT "T".k + (SELECT max(k) FROM t) AS k FROM "T"',
        'DELETE FROM o WHERE o.k IN (SELECT k + 99 FROM "T" WHERE k > 2)',
    ], references={"t": small}, as_of=0, batch=batch)
    for t in (1, 2, 3):
        big.compare_and_append(colmz.Updates({"k": [t]}, time=[t], diff=[1]), big.upper, t + 1)
    task.run()
    assert task.stats["batches"] == (1 if batch else 0)
    # t=1, 2, 3 insert 101, 102, 103 ("T" + max of t); t=3 deletes 3 + 99 = 102
    assert task.output.snapshot(3).to_pylist() == [(101, 3, 1), (103, 3, 1)]
    with pytest.raises(SQLError, match=r"CONTINUAL TASK p statement 1 \(INSERT INTO p\): ") as e:
        ContinualTask("p", {"T": big}, ['INSERT INTO p SELECT "T".nope FROM "T"'], references={"t": small})
    assert "__colmz" not in str(e.value) and "nope" in str(e.value)


NASTY = ['a"b', "it's", "x.y", "semi;colon", "<tag>", "new\nline", "é日本", "back\\slash", "$$", "-- c",
         "/* c */", "a) ; DROP TABLE t; SELECT (1"]


def test_names_and_values_with_every_special_character_round_trip(cat):
    from colmz.sql import identifier as ident
    from colmz.sql import literal as lit

    for name in NASTY:
        col = f"c {name}"
        t = ident(name)
        cat.execute(f"CREATE TABLE {t} ({ident(col)} TEXT, n INT)")
        cat.execute(f"INSERT INTO {t} VALUES " + ", ".join(f"({lit(v)}, {j})" for j, v in enumerate(NASTY)))
        got = cat.sql(f"SELECT {ident(col)}, n FROM {t} ORDER BY n")
        assert got.column_names == [col, "n"] and got.column(0).to_pylist() == NASTY
        cat.execute(f"DELETE FROM {t} WHERE {ident(col)} = {lit(name)} OR {t}.n = {len(NASTY) - 1}")
        rows = {j: v for j, v in enumerate(NASTY) if v != name and j != len(NASTY) - 1}
        k = min(rows)
        cat.execute(f"UPDATE {t} SET {ident(col)} = {ident(col)} || {lit(name)} WHERE n = {k}")
        rows[k] += name
        assert sorted(cat.sql(f"SELECT {ident(col)} FROM {t}").column(0).to_pylist()) == sorted(rows.values())
        assert sorted(r[0] for r in cat.read(name).to_pylist()) == sorted(rows.values())
    assert cat.names == NASTY  # nothing ended a statement: every table is there, and only those
    both = " UNION ALL ".join(f"SELECT n FROM {ident(n)}" for n in NASTY)
    cat.execute(f"CREATE MATERIALIZED VIEW {ident('v;iew')} AS SELECT count(*) AS c FROM ({both}) u")
    assert q(cat, f"SELECT c FROM {ident('v;iew')}") == [(sum(len(cat.read(n)) for n in NASTY),)]


def test_a_huge_multiplicity_is_refused_naming_table_row_and_limit(cat):
    # Before: count(*) over a row of multiplicity 2**62 failed inside numpy ("array is too
    # big") naming nothing; now expand refuses before allocating, naming what and the limit.
    from colmz.continual import EXPAND_LIMIT

    cat.execute("CREATE TABLE t (k TEXT)")
    cat.append("t", colmz.Updates({"k": ["big", "small"]}, time=[1, 1], diff=[2**62, 2]))
    assert cat.read("t").to_pylist() == [("big", 1, 2**62), ("small", 1, 2)]  # kept, not expanded
    before = cat.now
    for sql in ["SELECT count(*) FROM t", "SELECT * FROM t WHERE k = 'small'"]:
        with pytest.raises(ValueError, match=rf"table 't' holds row \{{'k': 'big'\}} with multiplicity "
                                             rf"{2**62}: .*EXPAND_LIMIT = {EXPAND_LIMIT}"):
            cat.sql(sql)
    with pytest.raises(ValueError, match="table 't' holds row"):
        cat.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM t")
    with pytest.raises(ValueError, match="table 't' holds row"):
        cat.execute("DELETE FROM t WHERE k = 'small'")
    assert cat.now == before and "v" not in cat
    # many rows each under the limit, too many in all
    cat.execute("CREATE TABLE u (k INT)")
    cat.append("u", colmz.Updates({"k": [1, 2]}, time=[3, 3], diff=[EXPAND_LIMIT, 1]))
    with pytest.raises(ValueError, match=rf"table 'u' holds row \{{'k': 1\}} with multiplicity "
                                         rf"{EXPAND_LIMIT} \({EXPAND_LIMIT + 1} rows in all\)"):
        cat.sql("SELECT count(*) FROM u")


def test_query_forms_read_the_catalog_objects(cat):
    # Every place a query names a relation is bound to the object (bind_relations).
    cat.execute("CREATE TABLE t (k INT, v TEXT); CREATE TABLE u (k INT)")
    cat.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'); INSERT INTO u VALUES (2), (3)")
    for sql, want in [
        ("SELECT t.v FROM (t JOIN u ON t.k = u.k)", [("b",)]),
        ("SELECT k FROM t UNION ALL TABLE u", [(1,), (2,), (2,), (3,)]),
        ("SELECT v FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k)", [("b",)]),
        ("SELECT x.k FROM t AS x NATURAL JOIN u", [(2,)]),
        ("SELECT k FROM t, LATERAL (SELECT k AS j FROM u WHERE u.k > t.k) s WHERE j = 3", [(1,), (2,)]),
        ("WITH big AS (SELECT k FROM u WHERE k > 2) SELECT t.k FROM t CROSS JOIN big", [(1,), (2,)]),
        ("SELECT substring(v FROM 1 FOR 1) AS s FROM t WHERE k IN (TABLE u)", [("b",)]),
    ]:
        assert q(cat, sql) == want, sql


_CHARS = list("\"'.;<>\n\\ $-/*()[]éß日本\t") + list("aZ0_")
_names = st.text(alphabet=st.sampled_from(_CHARS), min_size=1, max_size=10).filter(
    lambda s: not s.lower().startswith("__colmz_"))


@settings(max_examples=25, deadline=None)
@given(name=_names, col=_names, values=st.lists(st.text(alphabet=st.sampled_from(_CHARS), max_size=8),
                                                 min_size=1, max_size=5))
def test_any_name_and_value_round_trips_and_none_ends_a_statement(name, col, values):
    from colmz.sql import identifier as ident
    from colmz.sql import literal as lit

    cat = colmz.Catalog()
    t, c = ident(name), ident(col)
    cat.execute(f"CREATE TABLE {t} ({c} TEXT)")
    cat.execute(f"INSERT INTO {t} VALUES " + ", ".join(f"({lit(v)})" for v in values))
    assert cat.names == [name]
    assert sorted(cat.sql(f"SELECT {c} FROM {t}").column(col).to_pylist()) == sorted(values)
    cat.execute(f"DELETE FROM {t} WHERE {c} = {lit(values[0])}")
    cat.execute(f"UPDATE {t} SET {c} = {c} || {lit(name)} WHERE {t}.{c} <> {lit(values[0])}")
    want = sorted(v + name for v in values if v != values[0])
    assert sorted(r[0] for r in cat.read(name).to_pylist() for _ in range(r[-1])) == want
    assert cat.names == [name] and cat.now == 3


def test_catalogs_of_one_process_share_duckdb_not_tables():
    # Every catalog is a session on the process's colmz database (colmz.sql.session): a
    # table of one is never what a query of another reads, in threads too.
    from concurrent.futures import ThreadPoolExecutor

    cats = [colmz.Catalog() for _ in range(4)]
    for i, c in enumerate(cats):
        c.execute("CREATE TABLE t (k INT)")
        c.execute(f"INSERT INTO t SELECT * FROM generate_series(1, {i + 1})")

    def total(i):
        return [cats[i].sql("SELECT sum(k) AS s, count(*) AS n FROM t").to_pylist()[0] for _ in range(20)]

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(total, range(4)))
    for i, answers in enumerate(got):
        assert answers == [{"s": (i + 1) * (i + 2) // 2, "n": i + 1}] * 20


def test_append_takes_pandas_and_arrow_frames():
    """A pandas or Arrow user appends a frame of the table's columns (rows, inserted at the
    next commit) or of its columns plus time and diff (updates); anything else is refused
    naming the columns, and the catalog is unchanged."""
    import pandas as pd

    cat = colmz.Catalog()
    cat.execute("CREATE TABLE t (k BIGINT, s TEXT)")
    cat.append("t", pd.DataFrame({"s": ["a", None], "k": [1, 2]}))        # any column order
    assert cat.now == 1
    cat.append("t", pa.table({"k": [3], "s": ["c"]}), time=4)
    cat.append("t", pa.table({"k": [1], "s": ["a"], "time": [5], "diff": [-1]}))
    cat.append("t", pa.record_batch({"k": [9], "s": ["z"]}))
    assert cat.now == 6
    assert sorted(cat.sql("SELECT k, s FROM t").to_pylist(), key=lambda r: r["k"]) == [
        {"k": 2, "s": None}, {"k": 3, "s": "c"}, {"k": 9, "s": "z"}]
    before = (cat.now, cat.read("t").to_pylist())
    for bad, err in ((pd.DataFrame({"k": [1]}), colmz.updates.SchemaError),
                     (pd.DataFrame({"k": [1], "s": ["x"], "extra": [0]}), colmz.updates.SchemaError),
                     ([(1, "x")], TypeError),
                     (pd.DataFrame({"k": ["not a number"], "s": ["x"]}), (TypeError, ValueError, colmz.updates.SchemaError))):
        with pytest.raises(err):
            cat.append("t", bad)
        assert (cat.now, cat.read("t").to_pylist()) == before


def test_if_not_exists_show_and_as_of_as_materialize_has_them(tmp_path):
    """CREATE TABLE / MATERIALIZED VIEW IF NOT EXISTS leave an existing object as it is;
    SHOW OBJECTS / TABLES / MATERIALIZED VIEWS [FROM schema] and SHOW COLUMNS FROM answer
    as Materialize does; a query's trailing AS OF t reads at t; execute's query result is
    named as PostgreSQL names it (count, not DuckDB's count_star()). Durable too."""
    cat = colmz.Catalog(str(tmp_path / "c"))
    cat.execute("CREATE TABLE t (k INT, s TEXT)")
    cat.execute("CREATE TABLE IF NOT EXISTS t (other BIGINT)")      # skipped: t keeps k, s
    cat.execute("INSERT INTO t VALUES (1, 'a')")
    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) FROM t")
    cat.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS v AS SELECT 1 AS one")
    cat.execute("CREATE SCHEMA x; CREATE TABLE x.u (z BOOLEAN)")
    cat.execute("INSERT INTO t VALUES (2, 'b')")
    with pytest.raises(SQLError, match="already exists"):
        cat.execute("CREATE TABLE t (k INT)")
    assert cat.sql("SHOW OBJECTS").to_pylist() == [{"name": "t", "type": "table"},
                                                   {"name": "v", "type": "materialized-view"}]
    assert cat.sql("SHOW TABLES").to_pylist() == [{"name": "t"}]
    assert cat.sql("SHOW TABLES FROM x").to_pylist() == [{"name": "u"}]
    assert cat.sql("SHOW MATERIALIZED VIEWS").to_pylist() == [{"name": "v"}]
    assert cat.execute("SHOW COLUMNS FROM t").to_pylist() == [
        {"name": "k", "nullable": True, "type": "integer"}, {"name": "s", "nullable": True, "type": "text"}]
    assert cat.execute("SELECT count(*) FROM t").to_pylist() == [{"count": 2}]
    assert cat.sql("SELECT count(*) FROM t AS OF 1").to_pylist() == [{"count": 1}]
    assert cat.execute("SELECT * FROM v AS OF 1").to_pylist() == [{"count": 1}]
    assert cat.sql("SELECT 1 AS of").column_names == ["of"]  # a column named of
    with pytest.raises(ValueError, match="not yet complete"):
        cat.sql("SELECT 1 AS OF 99")
    with pytest.raises(ValueError, match="give one"):
        cat.sql("SELECT 1 AS OF 1", as_of=2)
    with pytest.raises(SQLError, match="unknown schema"):
        cat.sql("SHOW TABLES FROM nosuch")
    again = colmz.Catalog(str(tmp_path / "c"))
    assert again.sql("SHOW OBJECTS FROM materialize.x").to_pylist() == [{"name": "u", "type": "table"}]
    assert [c.name for c in again.object("t").schema] == ["k", "s"]
    again.execute("CREATE TABLE IF NOT EXISTS t (k INT)")
    assert again.sql("SELECT * FROM v").to_pylist() == [{"count": 2}]
