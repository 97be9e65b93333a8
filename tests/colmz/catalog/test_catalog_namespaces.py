"""``colmz.Catalog`` namespaces: databases, schemas and ``db.schema.item`` names.

Name resolution follows ``src/sql/src/names.rs`` upstream: ``item`` is in
``materialize.public``, ``schema.item`` in database ``materialize``, ``db.schema.item`` is
full; errors are Materialize's (``src/sql/src/plan/statement/ddl.rs``: "schema '...' cannot be
dropped without CASCADE while it contains objects", "database '...' cannot be dropped with
RESTRICT while it contains schemas").
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import colmz
from colmz.sql import QualifiedName, SQLError

X_CT = QualifiedName("materialize", "x", "ct")
YZ_CT = QualifiedName("y", "z", "ct")

SETUP = [
    "CREATE SCHEMA x; CREATE DATABASE y; CREATE SCHEMA y.z",
    "CREATE TABLE input (id INT, v TEXT); CREATE TABLE x.input (id INT, v TEXT)",
    # Three tasks named ct: each reads its own schema's input, and the last two read the others.
    "CREATE CONTINUAL TASK ct (id INT, v TEXT) ON INPUT input AS (INSERT INTO ct SELECT * FROM input)",
    """CREATE CONTINUAL TASK x.ct (id INT, v TEXT) ON INPUT x.input AS (
        INSERT INTO x.ct SELECT id, v FROM x.input WHERE id NOT IN (SELECT id FROM x.ct);
        DELETE FROM x.ct WHERE id IN (SELECT id FROM ct))""",
    """CREATE CONTINUAL TASK y.z.ct (id INT, v TEXT) ON INPUT input AS (
        INSERT INTO y.z.ct SELECT i.id, x.ct.v FROM input i JOIN x.ct ON i.id = ct.id)""",
    "CREATE MATERIALIZED VIEW y.z.n AS SELECT count(*) AS n FROM materialize.public.ct",
]


def rows(cat, sql):
    return sorted(tuple(r.values()) for r in cat.sql(sql).to_pylist())


def build(cat):
    for s in SETUP:
        cat.execute(s)
    cat.execute("INSERT INTO x.input VALUES (1, 'a'), (2, 'b')")  # t=1: only x.ct runs
    cat.execute("INSERT INTO input VALUES (1, 'p'), (3, 'q')")  # t=2: ct and y.z.ct run


def check_built(cat):
    assert rows(cat, "SELECT * FROM ct") == [(1, "p"), (3, "q")]
    assert rows(cat, "SELECT * FROM x.ct") == rows(cat, "SELECT * FROM materialize.x.ct") == [(1, "a"), (2, "b")]
    # y.z.ct joined the public input's rows at t=2 with x.ct (qualifier ct.id: x.ct's item)
    assert rows(cat, "SELECT * FROM y.z.ct") == [(1, "a")]
    assert rows(cat, "SELECT * FROM y.z.n") == [(2,)]
    assert rows(cat, "SELECT c.id, x.ct.v FROM ct c JOIN x.ct USING (id)") == [(1, "a")]


def test_objects_named_alike_in_three_schemas_coexist_and_resolve():
    # Before: "an object named 'ct' already exists" (qualified names kept their last part).
    cat = colmz.Catalog()
    build(cat)
    check_built(cat)
    assert cat.names == ["input", QualifiedName("materialize", "x", "input"), "ct", X_CT, YZ_CT,
                         QualifiedName("y", "z", "n")]
    assert cat.schemas == [("materialize", "public"), ("materialize", "x"), ("y", "public"), ("y", "z")]
    assert cat.read(("x", "ct")).to_pylist() == cat.read(X_CT).to_pylist() == [(1, "a", 2, 1), (2, "b", 2, 1)]
    assert cat.object(("y", "z", "ct")).deps == {"input", X_CT}
    assert cat.object("ct").deps == {"input"}
    # x.ct's DELETE reads the public ct: at t=3 it retracts id 1 (in ct), inserts 3
    cat.execute("INSERT INTO x.input VALUES (3, 'c')")
    assert rows(cat, "SELECT * FROM x.ct") == [(2, "b"), (3, "c")]
    # a name given as a str is exact: "x.ct" is the public object named x.ct, not schema x's
    cat.execute('CREATE TABLE "x.ct" (k INT); INSERT INTO "x.ct" VALUES (9)')
    assert cat.read("x.ct").to_pylist() == [(9, 4, 1)]
    assert rows(cat, 'SELECT * FROM "x.ct"') == [(9,)] and len(rows(cat, "SELECT * FROM x.ct")) == 2


def test_durable_catalog_keeps_schemas_and_names_across_reopen(tmp_path):
    cat = colmz.Catalog(tmp_path)
    build(cat)
    again = colmz.Catalog(tmp_path)
    check_built(again)
    assert again.names == cat.names and again.schemas == cat.schemas
    again.execute("INSERT INTO x.input VALUES (3, 'c')")  # the tasks resume with their references
    assert rows(again, "SELECT * FROM x.ct") == [(2, "b"), (3, "c")]
    again.execute("CREATE SCHEMA empty; DROP DATABASE y")  # a schema with nothing in it is kept too
    third = colmz.Catalog(tmp_path)
    assert third.schemas == [("materialize", "public"), ("materialize", "x"), ("materialize", "empty")]
    assert third.names == ["input", QualifiedName("materialize", "x", "input"), "ct", X_CT]
    assert rows(third, "SELECT * FROM x.ct") == [(2, "b"), (3, "c")]


def test_a_catalog_without_schemas_writes_the_record_it_always_wrote(tmp_path):
    # A record written before namespaces has no namespaces entry and definitions without
    # database/schema: every name in it is a public one. One without schemas is still that.
    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
    cat.execute("CREATE CONTINUAL TASK c (k INT) ON INPUT t AS (INSERT INTO c SELECT k FROM t)")
    record = CatalogStore(open_location(str(tmp_path))).load()
    assert [sorted(d) for d in record["objects"]] == [["key", "kind", "name", "since", "stmt"]] * 2
    assert colmz.Catalog(tmp_path).names == ["t", "c"]
    cat.execute("CREATE SCHEMA s; CREATE TABLE s.t (k INT)")
    record = json.loads(json.dumps(CatalogStore(open_location(str(tmp_path))).load()))
    assert record["objects"][0] == {"kind": "namespaces",
                                    "databases": [["materialize", ["public", "s"]]]}
    assert [(d["name"], d.get("database"), d.get("schema")) for d in record["objects"][1:]] == [
        ("t", None, None), ("c", None, None), ("t", "materialize", "s")]


def test_a_record_written_before_schemas_opens_with_public_names(tmp_path):
    # The definitions a catalog wrote before schemas existed: no namespaces entry, no
    # database/schema, statements without qualifiers. Rewritten so, the record opens with
    # every name public and its task resumes.
    from colmz.catalog.store import CatalogStore
    from colmz.storage.url import open_location

    cat = colmz.Catalog(tmp_path)
    cat.execute("CREATE TABLE t (k INT); INSERT INTO t VALUES (1)")
    cat.execute(SELF_REF_TASK)
    store = CatalogStore(open_location(str(tmp_path)))
    record = store.load()
    old = []
    for d in record["objects"]:
        d = dict(d, stmt={k: v for k, v in d["stmt"].items() if k not in ("qualifier", "input_qualifier")})
        old.append(d)
    store.commit(old, [])
    assert all("qualifier" not in d["stmt"] for d in CatalogStore(open_location(str(tmp_path))).load()["objects"])
    again = colmz.Catalog(tmp_path)
    assert again.names == ["t", "c"] and again.schemas == [("materialize", "public")]
    again.execute("INSERT INTO t VALUES (1), (2)")
    assert rows(again, "SELECT * FROM c") == [(1,), (2,)]


SELF_REF_TASK = "CREATE CONTINUAL TASK c FROM TRANSFORM t USING (SELECT k FROM t WHERE k NOT IN (SELECT k FROM c))"


def test_namespace_errors_are_materializes_and_change_nothing():
    cat = colmz.Catalog()
    build(cat)
    before = (cat.names, cat.schemas, cat.now)
    for sql, msg in [
        ("DROP SCHEMA x", "schema 'materialize.x' cannot be dropped without CASCADE while it contains objects"),
        ("DROP SCHEMA y.z RESTRICT", "schema 'y.z' cannot be dropped without CASCADE while it contains objects"),
        ("DROP DATABASE y RESTRICT", "database 'y' cannot be dropped with RESTRICT while it contains schemas"),
        ("CREATE TABLE q.t (k INT)", "unknown schema 'q'"),
        ("CREATE TABLE nodb.s.t (k INT)", "unknown database 'nodb'"),
        ("CREATE SCHEMA nodb.s", "unknown database 'nodb'"),
        ("CREATE SCHEMA x", "schema 'x' already exists"),
        ("CREATE DATABASE y", "database 'y' already exists"),
        ("CREATE TABLE x.ct (k INT)", "catalog item 'materialize.x.ct' already exists"),
        ("CREATE TABLE a.b.c.d (k INT)", "qualified name did not have between 1 and 3 components"),
        ("SELECT * FROM q.t", "unknown schema 'q'"),
        ("SELECT * FROM x.nope", "unknown catalog item 'x.nope'"),
        ("SELECT * FROM nodb.x.t", "unknown database 'nodb'"),
        ("INSERT INTO x.nope VALUES (1)", "unknown catalog item 'x.nope'"),
        # a script is one transaction: the schema it created goes with the failing statement
        ("CREATE SCHEMA fresh; CREATE TABLE fresh.t (k INT); CREATE TABLE q.t (k INT)", "unknown schema 'q'"),
        ("CREATE CONTINUAL TASK x.c2 (id INT, v TEXT) ON INPUT x.input AS (INSERT INTO c2 SELECT * FROM x.input)",
         "writes only its own output x.c2"),
    ]:
        with pytest.raises(SQLError, match=msg.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
            cat.sql(sql) if sql.startswith("SELECT") else cat.execute(sql)
        assert (cat.names, cat.schemas, cat.now) == before, sql
    cat.execute("CREATE SCHEMA IF NOT EXISTS x; CREATE DATABASE IF NOT EXISTS y; DROP SCHEMA IF EXISTS q")
    assert (cat.names, cat.schemas) == before[:2]
    with pytest.raises(KeyError, match="unknown catalog item 'x.nope'"):
        cat.execute("DROP TABLE x.nope")


def test_cascade_drops_the_schemas_objects_and_whatever_reads_them():
    cat = colmz.Catalog()
    build(cat)
    # y.z.ct reads x.ct: dropping schema x drops it too (Materialize drops dependents)
    cat.execute("DROP SCHEMA x CASCADE")
    assert cat.names == ["input", "ct", QualifiedName("y", "z", "n")]
    assert cat.schemas == [("materialize", "public"), ("y", "public"), ("y", "z")]
    # a database drops with its schemas by default (Materialize's DROP DATABASE is CASCADE)
    cat.execute("DROP DATABASE y")
    assert cat.names == ["input", "ct"] and cat.schemas == [("materialize", "public")]
    cat.execute("CREATE MATERIALIZED VIEW v AS SELECT count(*) AS n FROM ct")
    with pytest.raises(SQLError, match="cannot drop 'ct': v depend"):
        cat.execute("DROP CONTINUAL TASK ct")
    cat.execute("DROP TABLE input CASCADE")  # the task reading it, and the view reading that
    assert cat.names == []
    # a schema once dropped can be made again, empty
    cat.execute("CREATE SCHEMA x; CREATE TABLE x.ct (k INT); INSERT INTO x.ct VALUES (1)")
    assert rows(cat, "SELECT * FROM x.ct") == [(1,)]


NASTY = ['a"b', "it's", "x.y", "semi;colon", "<tag>", "sp ace", "é日本", "back\\slash", "$$", "-- c",
         "a) ; DROP TABLE t; SELECT (1", "Mixed.Case", "new\nline"]


def nasty_task(name, schema=None) -> tuple[list[str], str, str, str]:
    """The DDL of a task ``name`` (in ``schema``) over its own input, reading itself and a
    value column, and the SQL names of the input, the task and the column."""
    from colmz.sql import identifier as ident

    q = (ident(schema) + ".") if schema else ""
    inp, me, col = q + ident("in " + name), q + ident(name), ident("c " + name)
    ddl = ([f"CREATE SCHEMA {ident(schema)}"] if schema else []) + [
        f"CREATE TABLE {inp} ({col} TEXT, n INT)",
        f"CREATE CONTINUAL TASK {me} ({col} TEXT, n INT) ON INPUT {inp} AS ("
        f"INSERT INTO {me} SELECT {col}, n FROM {inp} WHERE n NOT IN (SELECT n FROM {me});"
        f"DELETE FROM {me} WHERE {me}.n IN (SELECT n - 10 FROM {inp}))"]
    return ddl, inp, me, col


def test_any_quoted_name_is_a_task_schema_and_value_and_none_ends_a_statement(tmp_path):
    # Names with dots, quotes, semicolons, <, >, spaces and non-ASCII: a schema, a table and a
    # task reading itself -- created, written, read and reopened; values of the same text.
    # Each step is one script (a ;-separated text holding every name): one commit.
    from colmz.sql import literal as lit

    cat = colmz.Catalog(tmp_path)
    made, ddl = [], []
    for i, name in enumerate(NASTY):
        schema = None if i % 2 else "s " + name
        stmts, inp, me, col = nasty_task(name, schema)
        ddl += stmts
        made.append((name, schema, inp, me, col))
    cat.execute("; ".join(ddl))
    cat.execute("; ".join(f"INSERT INTO {inp} VALUES ({lit(name)}, 1), ({lit(name + ';')}, 2)"
                          for name, _, inp, _, _ in made))
    reopened = colmz.Catalog(tmp_path)
    # n = 11 retracts row 1; n = 2 is already there
    reopened.execute("; ".join(f"INSERT INTO {inp} VALUES ({lit(name)}, 11), ({lit('x')}, 2)"
                               for name, _, inp, _, _ in made))
    for name, schema, _, me, col in made:
        got = reopened.sql(f"SELECT {col}, n FROM {me} ORDER BY n")
        assert got.column_names == ["c " + name, "n"]
        assert got.to_pylist() == [{"c " + name: name + ";", "n": 2}, {"c " + name: name, "n": 11}], name
        key = name if schema is None else QualifiedName("materialize", schema, name)
        assert reopened.task(key).stats["times_processed"] >= 1
    keys = [n if s is None else QualifiedName("materialize", s, n) for n, s, *_ in made]
    assert [k for k in reopened.names if k in keys] == keys  # nothing ended a statement
    assert len(reopened.names) == 2 * len(NASTY)
    assert reopened.schemas[1:] == [("materialize", "s " + n) for i, n in enumerate(NASTY) if not i % 2]


# ----------------------------------------------------------------------------- model

_DBS = ["materialize", "y"]
_SCHEMAS = ["public", "x", "Z.q"]
_ITEMS = ["t", "T", "a.b"]
_op = st.one_of(
    st.tuples(st.just("create database"), st.sampled_from(_DBS)),
    st.tuples(st.just("create schema"), st.sampled_from(_DBS), st.sampled_from(_SCHEMAS)),
    st.tuples(st.just("create table"), st.sampled_from(_DBS), st.sampled_from(_SCHEMAS), st.sampled_from(_ITEMS)),
    st.tuples(st.just("insert"), st.sampled_from(_DBS), st.sampled_from(_SCHEMAS), st.sampled_from(_ITEMS),
              st.integers(0, 9)),
    st.tuples(st.just("drop table"), st.sampled_from(_DBS), st.sampled_from(_SCHEMAS), st.sampled_from(_ITEMS)),
    st.tuples(st.just("drop schema"), st.sampled_from(_DBS), st.sampled_from(_SCHEMAS), st.booleans()),
    st.tuples(st.just("drop database"), st.sampled_from(_DBS), st.booleans()),
)


def _apply(model: dict, op) -> tuple[str, bool]:
    """The SQL of ``op`` and whether Materialize accepts it; ``model`` ({db: {schema:
    {item: [values]}}}, dicts in creation order) is updated when it does."""
    from colmz.sql import identifier as ident

    kind = op[0]
    if kind == "create database":
        ok = op[1] not in model
        if ok:
            model[op[1]] = {"public": {}}
        return f"CREATE DATABASE {ident(op[1])}", ok
    if kind == "drop database":
        db, cascade = op[1], op[2]
        ok = db in model and (cascade or not model[db])
        if ok:
            del model[db]
        return f"DROP DATABASE {ident(db)}" + ("" if cascade else " RESTRICT"), ok
    db, schema = op[1], op[2]
    where = f"{ident(db)}.{ident(schema)}"
    has_schema = db in model and schema in model[db]
    if kind == "create schema":
        ok = db in model and schema not in model[db]
        if ok:
            model[db][schema] = {}
        return f"CREATE SCHEMA {where}", ok
    if kind == "drop schema":
        cascade = op[3]
        ok = has_schema and (cascade or not model[db][schema])
        if ok:
            del model[db][schema]
        return f"DROP SCHEMA {where}" + (" CASCADE" if cascade else ""), ok
    item = op[3]
    name = f"{where}.{ident(item)}"
    exists = has_schema and item in model[db][schema]
    if kind == "create table":
        ok = has_schema and not exists
        if ok:
            model[db][schema][item] = []
        return f"CREATE TABLE {name} (k INT)", ok
    if kind == "insert":
        if exists:
            model[db][schema][item].append(op[4])
        return f"INSERT INTO {name} VALUES ({op[4]})", exists
    if exists:
        del model[db][schema][item]
    return f"DROP TABLE {name}", exists


def _check(cat, model) -> None:
    assert cat.schemas == [(db, s) for db, scs in model.items() for s in scs]
    want = {(db, s, i): sorted(v) for db, scs in model.items() for s, items in scs.items() for i, v in items.items()}
    got = {}
    for n in cat.names:
        full = n if isinstance(n, QualifiedName) else QualifiedName("materialize", "public", n)
        got[tuple(full)] = sorted(r[0] for r in cat.read(n).to_pylist() for _ in range(r[-1]))
    assert got == want


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(_op, max_size=14))
def test_namespaces_follow_a_model_and_survive_reopen(ops):
    import tempfile

    d = tempfile.mkdtemp()
    cat = colmz.Catalog(d)
    model: dict = {"materialize": {"public": {}}}
    for op in ops:
        sql, ok = _apply(model, op)
        if ok:
            cat.execute(sql)
        else:
            with pytest.raises((SQLError, KeyError)):
                cat.execute(sql)
        _check(cat, model)
    _check(colmz.Catalog(d), model)
