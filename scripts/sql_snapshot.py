"""What colmz's SQL path outputs over fixed texts, recorded, and two records compared: the
proof that a change of ``colmz.sql`` changes no output ("N of M identical").

A record is one JSON object with a section per family of outputs, each a dict from a case
to its output (a result's ``repr``, or the exception's type and message):

``grammar``
    :mod:`colmz.sql.grammar` over the texts colmz meets (:func:`grammar_texts`: the
    dialect corpus ``tests/sql_corpus.py``, the benchmark's queries
    ``asv_benchmarks/bench_sql.py``, the ``SELECT``/``WITH`` constants of
    ``tests/colmz/dataflow/test_*.py`` and every text translating the corpus and the
    benchmark parses): ``coverage:SOURCE`` is ``[read by colmz, distinct texts]``
    (:func:`grammar_coverage`, whose floor ``tests/colmz/sql/test_grammar.py`` asserts) and
    ``tree:TEXT`` what :func:`colmz.sql.grammar.read_query` gives (a tree, or ``None``:
    DuckDB's parser reads it).
``translate``
    :func:`colmz.sql.translate` of every corpus query (``translate corpus NAME``) and every
    string constant of ``tests/colmz/sql/test_translate*.py`` and ``test_transforms.py``
    (``translate literal TEXT``), and ``Catalog.sql`` of every corpus query over the corpus
    tables (``catalog corpus NAME``: names, types, rows; unordered rows as a multiset).
``front``
    Per string constant of the corpus, ``tests/colmz/sql/test_parse.py``, ``test_tokens.py``,
    ``test_hints.py``, ``test_shapes.py``, ``tests/colmz/catalog`` and :data:`FRONT_EXTRA`:
    ``tokenize``, ``parse``, ``shape_of``, hints, output names, CTE columns and the token
    helpers (balance, nesting, bracket matching, top-level runs, select offsets).
``sql``
    ``corpus:NAME`` (a ``Catalog`` answering each corpus query) and ``pushdown:NAME``
    (``push_filters`` of its translation); ``script:FILE::TEST:I`` (the SQL constants of
    each test function of ``tests/colmz/catalog`` and ``tests/colmz/continual`` executed in
    order by a fresh ``Catalog``); ``write:...`` (``INSERT`` planning over synthetic target
    types), ``delete:...``/``update:...`` (the builders and predicate shapes of
    :mod:`colmz.sql.lift`) and the pure functions of :mod:`colmz.sql.assign`,
    :mod:`colmz.sql.numeric`, :mod:`colmz.sql.names` and :mod:`colmz.sql.build`.
``type_rules``
    Every distinct call ``column_type_rules`` and ``column_ref_kinds`` get while a fresh ``Catalog`` answers the corpus, keyed by the call
    (sets and dicts written sorted, so the key does not depend on the hash seed).

The texts always come from this checkout; the colmz that reads them is this checkout's or
``--colmz DIR``'s (e.g. ``git archive main | tar -x -C DIR``). The cases and outputs of each
section are those the earlier one-purpose scripts wrote (``translate_snapshot``,
``sql_front_identity``, ``sql_identity``, ``type_rules_replay``'s calls), and ``compare``
also reads their files (the section told by its shape), so a record made with them before
a change compares with one made with this script after.

Every section runs with colmz's translation caches cleared, the type rules' first (their
calls are those of a fresh process). ``type_rules`` is also a pytest plugin: with
``scripts/`` on ``PYTHONPATH``, ``SQL_SNAPSHOT_TYPE_RULES=OUT pytest -p sql_snapshot ...``
writes the calls the tests make as a record with that one section.

Usage (``NUMBA_CACHE_DIR=/work/main/.numba_cache`` before each)::

    .venv/bin/python scripts/sql_snapshot.py record /tmp/after.json [--colmz DIR] [--sections translate,sql]
    .venv/bin/python scripts/sql_snapshot.py compare /tmp/before.json /tmp/after.json
    .venv/bin/python scripts/sql_snapshot.py both main        # git archive main, record both, compare
    .venv/bin/python scripts/sql_snapshot.py coverage         # the grammar's coverage, printed
"""

from __future__ import annotations

import argparse
import ast
import atexit
import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("type_rules", "grammar", "translate", "front", "sql")


# -- shared helpers ------------------------------------------------------------------------------


def _test_paths() -> None:
    # the corpus and oracle (tests/) and the benchmark (asv_benchmarks/) after the package:
    # tests/colmz is not colmz
    for sub in ("tests", "asv_benchmarks"):
        if str(ROOT / sub) not in sys.path:
            sys.path.append(str(ROOT / sub))


def outcome(fn, *args, ok: str = "", err: str = "raise ", ordered: bool = True, **kwargs) -> str:
    """``fn(*args, **kwargs)`` as recorded: ``ok`` + its ``repr`` (a table's schema and rows,
    as a multiset unless ``ordered``), or ``err`` + the exception's type and message."""
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome recorded
        return f"{err}{type(e).__name__}: {e}"
    if hasattr(out, "to_pylist") and hasattr(out, "schema"):
        rows = out.to_pylist()
        return f"{ok}table {out.schema} {rows if ordered else sorted(rows, key=repr)!r}"
    return ok + repr(out)


def string_constants(path: Path) -> list[str]:
    """Every string constant of the Python source ``path`` (``ast.walk`` order)."""
    return [n.value for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _clear_caches() -> None:
    from colmz.sql import clear_caches

    clear_caches()


# -- grammar ------------------------------------------------------------------------------------


def grammar_texts() -> dict[str, list[str]]:
    """The texts colmz meets by source: ``corpus``, ``bench``, ``views`` and ``translated``
    (what :func:`colmz.sql.translate` parses while translating the corpus and the
    benchmark's queries)."""
    from colmz.sql import SQLError, UnsupportedSQL, clear_caches, grammar, translate

    _test_paths()
    import bench_sql
    from sql_corpus import QUERIES

    corpus = [q for _, q in QUERIES]
    bench = list(bench_sql.QUERIES)
    views = [q for p in sorted((ROOT / "tests/colmz/dataflow").glob("test_*.py")) for q in string_constants(p)
             if q.lstrip()[:7].upper().startswith(("SELECT", "WITH "))]
    seen: list[str] = []
    real = grammar.read_query

    def recording(text):
        seen.append(text)
        return real(text)

    clear_caches()
    grammar.read_query = recording
    try:
        for q in corpus + bench:
            with contextlib.suppress(SQLError, UnsupportedSQL, ValueError):
                translate(q)
    finally:
        grammar.read_query = real
        clear_caches()
    return {"corpus": corpus, "bench": bench, "views": views, "translated": seen}


def grammar_coverage(by: dict[str, list[str]] | None = None) -> dict[str, tuple[int, int]]:
    """``{source: (read by colmz, distinct texts)}`` over :func:`grammar_texts` (or ``by``),
    and ``all`` over every source's texts."""
    from colmz.sql.grammar import read_query

    by = dict(grammar_texts() if by is None else by)
    by["all"] = [t for ts in by.values() for t in ts]
    out = {}
    for source, ts in by.items():
        distinct = list(dict.fromkeys(ts))
        out[source] = (sum(read_query(t) is not None for t in distinct), len(distinct))
    return out


def record_grammar() -> dict[str, object]:
    from colmz.sql.grammar import read_query

    by = grammar_texts()
    out: dict[str, object] = {f"coverage:{s}": list(c) for s, c in grammar_coverage(by).items()}
    for text in dict.fromkeys(t for ts in by.values() for t in ts):
        out[f"tree:{text}"] = outcome(read_query, text)
    return out


# -- translate ----------------------------------------------------------------------------------


def _translate_literals() -> list[str]:
    """String constants of the translation tests (each distinct text once, in file order)."""
    files = [*sorted((ROOT / "tests/colmz/sql").glob("test_translate*.py")), ROOT / "tests/colmz/sql/test_transforms.py"]
    return list(dict.fromkeys(t for p in files for t in string_constants(p) if t.strip()))


def record_translate() -> dict[str, str]:
    _test_paths()
    from sql_corpus import QUERIES, SETUP
    from sql_oracle import ordered

    import colmz
    from colmz.sql import translate

    out: dict[str, str] = {}
    for name, sql in QUERIES:
        out[f"translate corpus {name}"] = outcome(translate, sql, ok="ok: ")
    for text in _translate_literals():
        out[f"translate literal {text!r}"] = outcome(translate, text, ok="ok: ")
    cat = colmz.Catalog()
    for stmt in SETUP:
        cat.execute(stmt)

    def answer(sql):
        table = cat.sql(sql)
        rows = table.to_pylist()
        if not ordered(sql):  # rows in DuckDB's order of the moment: compared as a multiset
            rows.sort(key=repr)
        return table.column_names, [str(t) for t in table.schema.types], rows

    for name, sql in QUERIES:
        out[f"catalog corpus {name}"] = outcome(answer, sql, ok="ok: ")
    return out


# -- front --------------------------------------------------------------------------------------

FRONT_SOURCES = ["tests/sql_corpus.py", "tests/colmz/sql/test_parse.py", "tests/colmz/sql/test_tokens.py",
                 "tests/colmz/sql/test_hints.py", "tests/colmz/sql/test_shapes.py", "tests/colmz/catalog"]

#: Statements off the readers' common paths (malformed, unusual clauses), read besides.
FRONT_EXTRA = [
    "CREATE CONTINUAL TASK c WITH SNAPSHOT = false ON INPUT t AS (INSERT INTO c SELECT * FROM t)",
    "CREATE CONTINUAL TASK c (k INT) WITH (SNAPSHOT) ON INPUT t WITH (SNAPSHOT = true) AS (DELETE FROM c WHERE k > 1)",
    "CREATE CONTINUAL TASK c ON INPUT t AS (UPDATE c SET k = 1)", "CREATE CONTINUAL TASK c ON INPUT t AS OF 3",
    "CREATE CONTINUAL TASK c FROM RETAIN t WHILE (k > 1) AS OF 7", "CREATE CONTINUAL TASK c FROM TRANSFORM t USING",
    "CREATE TABLE t (k INT) WITH (APPEND ONLY)", "CREATE TABLE t (k INT) WITH (APPEND)", "CREATE TABLE t (k INT,)",
    "CREATE TABLE t", "CREATE TABLE IF NOT EXISTS a.b.t (k INT, v TEXT) extra",
    "CREATE MATERIALIZED VIEW v WITH (INCREMENTAL = 'require') AS SELECT 1", "CREATE MATERIALIZED VIEW v WITH (INCREMENTAL 'x') AS SELECT 1",
    "CREATE OR REPLACE MATERIALIZED VIEW IF NOT EXISTS s.v (a, b) IN CLUSTER c AS SELECT 1, 2",
    "CREATE MATERIALIZED VIEW v WITH INCREMENTAL AS SELECT 1", "EXPLAIN MATERIALIZED VIEW a.b", "EXPLAIN SELECT 1",
    "CREATE SCHEMA IF NOT EXISTS d.s", "CREATE SCHEMA a.b.c", "CREATE DATABASE d.x", "CREATE DATABASE IF NOT EXISTS d",
    "SUBSCRIBE TO a.b.c.d", "SUBSCRIBE (SELECT 1) WITH (SNAPSHOT = false, PROGRESS) AS OF 3 UP TO 9",
    "SUBSCRIBE t WITH (SNAPSHOT false, FOO)", "SUBSCRIBE t AS OF AT LEAST 3", "SUBSCRIBE ()", "SUBSCRIBE t UP TO x",
    "SUBSCRIBE t ENVELOPE UPSERT", "SUBSCRIBE", "SHOW COLUMNS IN a.b", "SHOW MATERIALIZED VIEWS FROM s", "SHOW SOURCES",
    "SHOW TABLES IN d.s extra", "DROP TABLE IF EXISTS a, b.c CASCADE", "DROP SCHEMA a, b", "DROP DATABASE d RESTRICT",
    "DROP TABLE a.b.c.d", "DROP VIEW v", "DROP TABLE", "INSERT INTO t DEFAULT VALUES", "INSERT INTO t (a, b) SELECT 1, 2 RETURNING a",
    "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", "INSERT INTO t (SELECT 1)", "INSERT INTO t",
    "DELETE FROM t USING u WHERE t.k = u.k", "DELETE FROM t x", "DELETE FROM t WHERE", "DELETE FROM t WHERE k = 1 RETURNING *",
    "UPDATE t x SET k = 1", "UPDATE t SET k = 1, v = WHERE k = 2", "UPDATE t SET k", "UPDATE t SET k = 1 extra = 2",
    "SELECT 1 AS OF 5", "SELECT x AS of FROM t", "SELECT 1 AS OF now()", "SELEC 1", "ALTER TABLE t ADD k INT",
    "SELECT 1; ; SELECT 2", "SELECT (1]", "SELECT ((1)", "SELECT 1)", "SELECT a[1:2]::float(10)[], b::float(30), c::\"float\"(3)",
    "SELECT CAST(x AS double precision), y::timestamp with time zone, z::character varying(3) FROM t",
    "SELECT k FROM t GROUP BY k OPTIONS (AGGREGATE INPUT GROUP SIZE = 5) UNION SELECT (SELECT 1 OPTIONS (LIMIT INPUT GROUP SIZE = 2))",
    "SELECT a[(SELECT 1)] FROM t OPTIONS (X = 1)", "SELECT options(1), f(x) OPTIONS (DISTINCT ON INPUT GROUP SIZE = 0)",
]


def _front_texts() -> list[str]:
    """Every non-blank string constant of :data:`FRONT_SOURCES` and :data:`FRONT_EXTRA`,
    each once, sorted."""
    found: set[str] = set(FRONT_EXTRA)
    for source in FRONT_SOURCES:
        path = ROOT / source
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            found.update(t for t in string_constants(f) if t.strip())
    return sorted(found)


def _front_one(text: str) -> dict:
    from colmz.sql import parse, tokenize
    from colmz.sql import tokens as tk
    from colmz.sql.hints import select_offset, strip_hints
    from colmz.sql.parse import output_names, select_list_is_empty
    from colmz.sql.shapes import shape_of

    def front(fn, *args):
        return outcome(fn, *args, err="")

    out = {"tokens": front(lambda: [(t.kind, t.text, t.start, t.end) for t in tokenize(text)]),
           "parse": front(parse, text), "shape": front(shape_of, text),
           "hints": front(strip_hints, text), "names": front(output_names, text),
           "empty_select": front(select_list_is_empty, text), "ctes": front(tk.cte_columns_of, text)}
    try:
        toks = tokenize(text)
    except Exception:  # noqa: BLE001 - recorded above
        return out
    out["balanced"] = front(tk.check_balanced, toks, text)
    out["depth"] = front(tk.nesting_depth, toks)
    if len(toks) <= 400:
        # (closing is asked at an opening bracket)
        out["closing"] = [tk.closing(toks, i) for i, t in enumerate(toks) if t.kind == "op" and t.text in "(["]
        out["top_level"] = [list(tk.top_level(toks, i)) for i in range(len(toks))]
        out["select_at"] = [select_offset(toks, i) for i in range(len(toks))]
    return out


def record_front() -> dict[str, dict]:
    # through JSON, as a record is read back (tuples become lists)
    return json.loads(json.dumps({t: _front_one(t) for t in _front_texts()}))


# -- sql (catalog, scripts, write planning, pure functions) -------------------------------------

SCRIPT_DIRS = ("tests/colmz/catalog", "tests/colmz/continual")


def _function_constants(path: Path):
    """Per test function, its string constants in ``ast.walk`` order."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{path.name}::{node.name}", [n.value for n in ast.walk(node)
                                                if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _sql_corpus(out: dict) -> None:
    _test_paths()
    from sql_corpus import QUERIES, SETUP
    from sql_oracle import ordered

    import colmz
    from colmz.sql import translate
    from colmz.sql.pushdown import push_filters

    cat = colmz.Catalog()
    for stmt in SETUP:
        cat.execute(stmt)
    for name, sql in QUERIES:
        out[f"corpus:{name}"] = outcome(cat.sql, sql, ordered=ordered(sql))
        out[f"pushdown:{name}"] = outcome(lambda s: push_filters(translate(s)), sql)


def _sql_scripts(out: dict, statements: dict) -> None:
    import colmz
    from colmz.sql import parse

    for d in SCRIPT_DIRS:
        for path in sorted((ROOT / d).glob("test_*.py")):
            for where, strings in _function_constants(path):
                cat = None
                for i, s in enumerate(strings):
                    try:
                        stmts = parse(s)
                    except Exception:  # noqa: BLE001 - not SQL: skipped
                        continue
                    if not stmts:
                        continue
                    for st in stmts:
                        statements.setdefault(type(st).__name__, []).append(st)
                    cat = cat or colmz.Catalog()
                    run = cat.sql if all(type(st).__name__ == "Query" for st in stmts) else cat.execute
                    out[f"script:{where}:{i}"] = outcome(run, s, ordered=False)


def _sql_write_planning(out: dict, statements: dict) -> None:
    import pyarrow as pa

    from colmz.order import ColumnSpec
    from colmz.sql import session, translate
    from colmz.sql.assign import typed_values
    from colmz.sql.run import run_query
    from colmz.sql.tree import parse_tree
    from colmz.sql.write import check_jsonb_values, insert_rows

    types = [pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.date32(), pa.timestamp("us", tz="UTC"),
             pa.bool_(), pa.float32(), pa.int16(), pa.timestamp("us"), pa.binary(), pa.uint64()]
    con = session()
    seen = set()
    for st in statements.get("InsertStatement", []):
        q = st.query
        if (q, tuple(st.columns or ())) in seen:
            continue
        seen.add((q, tuple(st.columns or ())))
        try:
            (tree,) = parse_tree(q)
            values = tree.from_ is not None and tree.from_.type == "EXPRESSION_LIST"
            n = len(tree.from_.rows[0]) if values else len(tree.items)
        except Exception:  # noqa: BLE001 - no arity known: the planning is not tried
            continue
        for v in range(len(types) + 1):
            targets = [types[(v + i) % len(types)] if v < len(types) else types[i % len(types)]
                       for i in range(n + 1)]
            key = f"write:{q}:{st.columns}:{v}"
            out[key + ":typed"] = outcome(typed_values, q, targets)
            names = [f"c{i}" for i in range(n + 1)]
            out[key + ":jsonb"] = outcome(check_jsonb_values, q, [names[i] if i % 2 else None for i in range(n)],
                                          frozenset({"v", "s"}), frozenset({"j"}), ["jsonb"] * n)
            text = typed_values(q, targets)
            try:
                rows = run_query(con, translate(text), 3)[0]
            except Exception as e:  # noqa: BLE001 - reading other relations: recorded
                out[key + ":rows"] = f"raise {type(e).__name__}: {e}"
                continue
            schema = [ColumnSpec(nm, t) for nm, t in zip(names, targets)]
            cols = names[: rows.num_columns] if st.columns else None
            out[key + ":insert"] = outcome(insert_rows, con, rows, schema, cols, literals=values,
                                           what="INSERT INTO t", table="t", t=3)
            out[key + ":insert_all"] = outcome(insert_rows, con, rows, schema[: rows.num_columns], None,
                                               literals=values, what="INSERT INTO t", table="t", t=3)


def _sql_predicates(out: dict, statements: dict) -> None:
    from colmz.sql.build import select_where, update_select
    from colmz.sql.lift import in_subquery, row_local

    for st in statements.get("DeleteStatement", []):
        key = f"delete:{st.table}:{st.where}"
        out[key + ":select"] = outcome(select_where, (*st.qualifier, st.table) if st.qualifier else st.table,
                                       st.where)
        if st.where is not None:
            for cols in (["k"], ["k", "v"], ["a", "b", "k", "v", "x"]):
                out[f"{key}:{cols}:in"] = outcome(in_subquery, st.where, st.table, cols)
                out[f"{key}:{cols}:local"] = outcome(row_local, st.where, st.table, cols)
    for st in statements.get("UpdateStatement", []):
        key = f"update:{st.table}:{st.assignments}:{st.where}"
        assigned = dict(st.assignments)
        out[key] = outcome(update_select, st.table, ["k", *assigned], assigned, st.where)
        out[key + ":q"] = outcome(update_select, ("x", st.table), [*assigned, "zz"], assigned, st.where)


def _sql_pure(out: dict) -> None:
    import pyarrow as pa

    from colmz.sql import assign, build, lift, names, numeric, write

    types = [pa.null(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
             pa.uint64(), pa.float16(), pa.float32(), pa.float64(), pa.decimal128(10, 2), pa.string(),
             pa.large_string(), pa.bool_(), pa.binary(), pa.large_binary(), pa.date32(), pa.date64(),
             pa.timestamp("us"), pa.timestamp("ms", tz="UTC"), pa.duration("us"),
             pa.month_day_nano_interval(), pa.list_(pa.int32())]
    for s in types:
        out[f"pg_type_name:{s}"] = outcome(assign.pg_type_name, s)
        # the DuckDB type of a literal's column: write's, or assign's where it moved
        out[f"duckdb_type:{s}"] = outcome(getattr(write, "duckdb_type", None) or assign.duckdb_type, s)
        for t in types:
            out[f"cast:{s}:{t}"] = outcome(assign.assignment_cast, s, t, "c")
            out[f"select:{s}:{t}"] = outcome(assign.assignment_select, "r", [s, t], [("a", t), ("b", s)])
    arrays = [pa.array([1, None], pa.int32()), pa.array([2**40], pa.int64()), pa.array([1.5], pa.float32()),
              pa.array(["x"]), pa.array([True])]
    for a in arrays:
        for t in types:
            out[f"arrow:{a.type}:{t}"] = outcome(assign.arrow_assignment, pa.table({"a": a}), [t])
    for nm in (["ct"], ["x", "ct"], ["y", "z", "ct"], ["a", "b", "c", "d"], "T", ["We ird", "x"], ()):
        for fn in (names.resolve_item, names.resolve_schema, names.sql_name, names.relation_word):
            out[f"names:{fn.__name__}:{nm}"] = outcome(fn, nm)
    for key in ("t", names.QualifiedName("materialize", "x", "t"), ("a", "b"), names.resolve_item("u")):
        for fn in (names.as_qualified, names.display_name):
            out[f"names:{fn.__name__}:{key!r}"] = outcome(fn, key)
        out[f"names:catalog_key:{key!r}"] = outcome(lambda k: names.catalog_key(names.as_qualified(k)), key)
    for v in ("x", 'a"b', "", "\x00", 3, None, True, 1.5, float("nan"), float("-inf"), "it's", b"x"):
        out[f"build:identifier:{v!r}"] = outcome(build.identifier, v)
        out[f"build:literal:{v!r}"] = outcome(build.literal, v)
        out[f"build:relation:{v!r}"] = outcome(build.relation, v)
    for t in (0, 5, 2**63, 2**64, -1, True, "1"):
        for form in (*build.NOW_FORMS, "x"):
            out[f"build:now_value:{t!r}:{form}"] = outcome(build.now_value, t, form)
    for form in (None, "uint64", "timestamptz"):
        out[f"build:now_sql:{form}"] = outcome(build.now_sql, form, "t.c")
    out["build:create_table"] = outcome(build.create_table, "my t", [("k", "BIGINT"), ('a";b', "TEXT")])
    out["build:cast_select"] = outcome(build.cast_select, "v", [("a", "DATE"), ("b", None), ("c", "BLOB"),
                                                                ("d", "X;Y")])
    for i in range(3):
        out[f"build:relation_name:{i}"] = outcome(build.relation_name, i)
    out["build:splice"] = outcome(build.splice, "SELECT a + b FROM t", [(7, 8, "x"), (11, 12, "y")], 2, 15)
    for form in (None, "timestamptz"):
        out[f"lift:insert:{form}"] = outcome(lift.lifted_insert, "SELECT k, mz_now() FROM r1", "r1", ["k"], form)
        out[f"lift:delete:{form}"] = outcome(lift.lifted_delete, "SELECT * FROM r0 WHERE (k > mz_now())", "r1",
                                             ["k", "v"], "r0", ["k"], form)
        out[f"lift:semijoin:{form}"] = outcome(lift.lifted_semijoin, "SELECT k, v FROM r1 WHERE mz_now() > 1",
                                               ["k", "v"], "r1", ["k"], form)
    out["lift:first"] = outcome(lift.first_match, "SELECT 1")
    out["lift:union"] = outcome(lift.tagged_union, ["SELECT 1 AS k", "SELECT 2 AS k"])
    out["write:arity"] = repr([write.arity_message(a, b) for a in range(3) for b in range(3)])
    lits = ["7", "-3", "2.50", "1.5e-7", "1e5", "0", "0.000", "3.0", "2147483648", "9223372036854775808",
            "1e40", "12345678901234567890.123456789"]
    for a in lits:
        out[f"numeric:parse:{a}"] = outcome(numeric.parse_literal, a)
        out[f"numeric:text:{a}"] = outcome(lambda x: numeric.literal_text(numeric.parse_literal(x)), a)
        for b in lits:
            for op in "+-*/":
                out[f"numeric:{a}{op}{b}"] = outcome(
                    lambda x, y, o: numeric.literal_text(numeric.combine(o, numeric.parse_literal(x),
                                                                         numeric.parse_literal(y))), a, b, op)
    floats = [2.0, 1e15, 1e14, 1.5e-7, -0.0, 0.0, 1e23, 9.15e21, float("nan"), float("inf"), -float("inf"),
              0.1, 1 / 3, 308148.125, 3.75e9, 5e-324, 1.7976931348623157e308, 3.4028234663852886e38, 1e-45,
              123456.7, 1e6, -2.5e-5]
    for f in floats:
        out[f"numeric:f8:{f!r}"] = outcome(numeric.float8_text, f)
        out[f"numeric:f4:{f!r}"] = outcome(numeric.float4_text, f)
    for s in (" 1.50 ", "+.5e-1", "1e 3", "-Inf", "nan", "1_000", "5.", ".", "1e2000", "1e99999999999",
              "1.005", "-1.005", "123.4", "1.0000000001", "Infinity", "99999999999999999999999999999999"):
        out[f"numeric:in:{s}"] = outcome(numeric.numeric_in, s)
        for p, sc in ((None, None), (10, 2), (4, 2), (5, 0)):
            out[f"numeric:typmod:{s}:{p}:{sc}"] = outcome(numeric.numeric_typmod, s, p, sc)


def record_sql() -> dict[str, str]:
    out: dict[str, str] = {}
    statements: dict = {}
    _sql_pure(out)
    _sql_corpus(out)
    _sql_scripts(out, statements)
    _sql_write_planning(out, statements)
    _sql_predicates(out, statements)
    return out


# -- type rules ---------------------------------------------------------------------------------

TYPE_RULES = ("column_type_rules", "column_ref_kinds")


def canonical(value) -> str:
    """``repr`` with sets' items and dicts' entries sorted: the same text in every process
    (a set of strings is iterated in the order of the hash seed)."""
    if isinstance(value, (set, frozenset)):
        items = sorted(canonical(v) for v in value)
        return f"{type(value).__name__}({{{', '.join(items)}}})" if items else f"{type(value).__name__}()"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{canonical(k)}: {canonical(v)}" for k, v in value.items())) + "}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(canonical(v) for v in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _type_rule_result(f, args, kw) -> tuple:
    # a call's outcome as compared: its output (a dict as sorted pairs) or its error
    try:
        out = f(*args, **kw)
    except Exception as e:  # noqa: BLE001 - an error is an outcome, compared by type and message
        return ("err", type(e).__name__, str(e))
    return ("ok", sorted(out.items()) if isinstance(out, dict) else out)


def type_rule_key(name: str, args: tuple, kw: tuple) -> str:
    """The case of one call: the rule's name, its arguments and keywords (:func:`canonical`)."""
    return canonical((name, args, kw))


class TypeRuleCalls:
    """Every distinct call of :data:`TYPE_RULES` while installed: each rule (and every
    module's imported name of it) wrapped to record its call and outcome."""

    def __init__(self):
        import colmz.sql.column_rules as cr
        import colmz.sql.jsonbcols as jc

        self.calls: dict[str, str] = {}
        self.functions = {"column_type_rules": cr.column_type_rules, "column_ref_kinds": jc.column_ref_kinds}
        self._patched: list[tuple[object, str, object]] = []

    def install(self) -> None:
        for name, f in self.functions.items():
            def wrapper(*args, _f=f, _name=name, **kw):
                key = type_rule_key(_name, args, tuple(sorted(kw.items())))
                if key not in self.calls:
                    self.calls[key] = canonical(_type_rule_result(_f, args, kw))
                return _f(*args, **kw)
            for m in list(sys.modules.values()):
                if getattr(m, name, None) is f:
                    self._patched.append((m, name, f))
                    setattr(m, name, wrapper)

    def uninstall(self) -> None:
        for m, name, f in reversed(self._patched):
            setattr(m, name, f)
        self._patched.clear()


def record_type_rules() -> dict[str, str]:
    """Every type-rule call while a fresh ``Catalog`` answers the corpus."""
    _test_paths()
    from sql_corpus import QUERIES, SETUP

    import colmz

    calls = TypeRuleCalls()
    calls.install()
    try:
        cat = colmz.Catalog()
        for s in SETUP:
            cat.execute(s)
        for _, sql in QUERIES:
            with contextlib.suppress(Exception):  # (a refusal is recorded as the rules' outcome)
                cat.sql(sql)
    finally:
        calls.uninstall()
    return calls.calls


# -- records ------------------------------------------------------------------------------------

RECORDERS = {"type_rules": record_type_rules, "grammar": record_grammar, "translate": record_translate,
             "front": record_front, "sql": record_sql}


def record(sections=SECTIONS) -> dict:
    """The record of ``sections`` (in :data:`SECTIONS`' order) by the ``colmz`` imported,
    with ``meta``: where that colmz is, and each section's seconds."""
    import colmz

    out: dict = {"meta": {"colmz": str(Path(colmz.__file__).resolve().parent.parent), "seconds": {}}}
    for name in SECTIONS:
        if name in sections:
            start = time.perf_counter()
            _clear_caches()
            out[name] = RECORDERS[name]()
            out["meta"]["seconds"][name] = round(time.perf_counter() - start, 1)
    return out


def _old_type_rules(calls: dict) -> dict[str, str]:
    # type_rules_replay's pickle: {(name, args, kw): outcome}
    return {type_rule_key(*k): canonical(v) for k, v in calls.items()}


def load(path: str | Path) -> dict:
    """A record: this script's, or one of the earlier scripts' files as its section (a
    ``type_rules_replay`` pickle, ``sql_front_identity``'s texts, ``sql_identity``'s cases,
    ``translate_snapshot``'s outcomes)."""
    raw = Path(path).read_bytes()
    if raw[:1] == b"\x80":
        return {"type_rules": _old_type_rules(pickle.loads(raw))}  # noqa: S301 - a record the old script wrote
    data = json.loads(raw)
    if "meta" in data and set(data) <= {"meta", *SECTIONS}:
        return data
    if "colmz" in data:
        data.pop("colmz")
        return {"sql": data}
    if data and all(isinstance(v, dict) for v in data.values()):
        return {"front": data}
    return {"translate": data}


def _show(value, width: int = 300) -> str:
    return "<absent>" if value is None else (value if isinstance(value, str) else json.dumps(value))[:width]


def compare(a: dict, b: dict, show: int = 10) -> int:
    """Print, per section recorded in both, how many of its cases have the same output, and
    the first ``show`` differences; the number of differing cases."""
    differing = 0
    for name in SECTIONS:
        if name not in a or name not in b:
            continue
        before, after = a[name], b[name]
        keys = sorted(set(before) | set(after))
        differ = [k for k in keys if before.get(k) != after.get(k)]
        for k in differ[:show]:
            x, y = before.get(k), after.get(k)
            if isinstance(x, dict) and isinstance(y, dict):
                x, y = ({s: d.get(s) for s in sorted(set(x) | set(y)) if x.get(s) != y.get(s)} for d in (x, y))
            print(f"DIFFERS {name} {k[:200]!r}\n  before: {_show(x)}\n  after:  {_show(y)}")
        print(f"{name}: {len(keys) - len(differ)} of {len(keys)} identical")
        differing += len(differ)
    return differing


def both(ref: str, sections=SECTIONS) -> int:
    """Record ``ref``'s colmz (``git archive`` into a temporary directory) and this
    checkout's, each in a fresh process, and compare."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        outs = [Path(tmp) / "before.json", Path(tmp) / "after.json"]
        for where, out in zip((base, ROOT), outs):
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "record", str(out), "--colmz", str(where),
                            "--sections", ",".join(sections)], check=True, cwd=tmp)
        return compare(load(outs[0]), load(outs[1]))


def _use_colmz(where: str | Path) -> None:
    where = Path(where).resolve()
    sys.path.insert(0, str(where))
    import colmz

    if not Path(colmz.__file__).resolve().is_relative_to(where):
        raise SystemExit(f"--colmz {where}: colmz imported from {colmz.__file__}, not from it")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the outputs into OUT (JSON)")
    rec.add_argument("out")
    rec.add_argument("--colmz", default=str(ROOT), help="the checkout whose colmz reads the texts")
    cmp_ = sub.add_parser("compare", help="compare two records (this script's or the earlier scripts')")
    cmp_.add_argument("before")
    cmp_.add_argument("after")
    cmp_.add_argument("--show", type=int, default=10, help="differences printed per section")
    bth = sub.add_parser("both", help="record REF's colmz and this checkout's, and compare")
    bth.add_argument("ref")
    cov = sub.add_parser("coverage", help="print what colmz.sql.grammar reads of the texts colmz meets")
    cov.add_argument("--colmz", default=str(ROOT))
    for p in (rec, bth):
        p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    sections = tuple(getattr(args, "sections", ",".join(SECTIONS)).split(","))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}: choose from {', '.join(SECTIONS)}")
    if args.command == "record":
        _use_colmz(args.colmz)
        got = record(sections)
        Path(args.out).write_text(json.dumps(got, indent=0, sort_keys=True))
        counts = ", ".join(f"{s} {len(got[s])} ({got['meta']['seconds'][s]} s)" for s in SECTIONS if s in got)
        print(f"recorded from {got['meta']['colmz']} into {args.out}: {counts}")
        return 0
    if args.command == "compare":
        return 1 if compare(load(args.before), load(args.after), args.show) else 0
    if args.command == "both":
        return 1 if both(args.ref, sections) else 0
    _use_colmz(args.colmz)
    import colmz.sql.grammar

    print(f"colmz.sql.grammar from {colmz.sql.grammar.__file__}")
    for source, (read, total) in grammar_coverage().items():
        print(f"  {source:10s} read {read:5d} of {total:5d} ({read / total:.1%}); DuckDB parses {total - read}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
elif "pytest" in sys.modules and os.environ.get("SQL_SNAPSHOT_TYPE_RULES"):
    # loaded as a pytest plugin (-p sql_snapshot): the calls the tests make, a record at exit
    _PLUGIN_CALLS = TypeRuleCalls()
    _PLUGIN_CALLS.install()
    atexit.register(lambda: Path(os.environ["SQL_SNAPSHOT_TYPE_RULES"]).write_text(
        json.dumps({"meta": {"colmz": str(ROOT), "seconds": {}}, "type_rules": _PLUGIN_CALLS.calls}, indent=0)))
